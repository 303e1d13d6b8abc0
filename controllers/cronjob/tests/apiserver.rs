//! CronJob scenarios against the real local control plane (one test or more per acceptance
//! scenario of upstream's CronJob behaviour; each test names its scenarios).
//!
//! Each test runs the CronJob controller in-process on an informer factory scoped to the
//! test's namespace, so it never sees or touches other tests' objects. No Job controller runs
//! on the plane for these Jobs, so the tests play it: they write Job status (start, success
//! or failure) through `jobs/status`.
//!
//! Minute-granularity scenarios run on a test clock (the controller's `ControllerContext.clock`)
//! that flows with real time from a chosen offset, so "the next minute" is seconds away; one
//! scenario runs a `*/1` schedule on the real clock.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-cronjob --test apiserver -- --include-ignored`.

// A test binary: a failed unwrap is a failing test (clippy counts only `#[test]` functions
// and `#[cfg(test)]` modules as tests, not the helpers beside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "apiserver/bookkeeping.rs"]
mod bookkeeping;
#[path = "apiserver/concurrency.rs"]
mod concurrency;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/scheduling.rs"]
mod scheduling;
