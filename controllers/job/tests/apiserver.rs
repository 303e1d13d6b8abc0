//! Job controller scenarios against the real local control plane (upstream v1.37 behaviour;
//! numbers refer to the Job acceptance scenarios).
//!
//! Each test runs the controller in-process on informers of its own, limited to the test's
//! namespace. Pods scheduled to the simulated nodes are run by kwok: a Job's pods succeed, or
//! fail with the exit code of the `pod-container-running-failed.stage.kwok.x-k8s.io/exit-code`
//! annotation when labelled `pod-container-running-failed.stage.kwok.x-k8s.io=true`. Tests that
//! drive pods themselves name a scheduler that does not exist, so pods stay unbound and only the
//! test sets their status.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-job --test apiserver -- --include-ignored`.

#[path = "apiserver/accounting.rs"]
mod accounting;
#[path = "apiserver/basics.rs"]
mod basics;
#[path = "apiserver/elastic.rs"]
mod elastic;
#[path = "apiserver/failures.rs"]
mod failures;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/indexed.rs"]
mod indexed;
#[path = "apiserver/lifecycle.rs"]
mod lifecycle;
#[path = "apiserver/orphaning.rs"]
mod orphaning;
#[path = "apiserver/policies.rs"]
mod policies;
#[path = "apiserver/terminating.rs"]
mod terminating;
