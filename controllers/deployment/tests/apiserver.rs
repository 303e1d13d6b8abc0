//! Deployment scenarios against the real local control plane (acceptance scenarios, one
//! test or more per scenario; each test names its scenarios).
//!
//! Each test runs the Deployment controller and the ReplicaSet controller in-process, on one
//! informer factory of their own, limited to the test's namespace, so they never touch other
//! tests' objects on the shared plane (whose upstream kube-controller-manager runs neither,
//! but does run the garbage collector and the quota controller). Pod templates name a
//! scheduler that does not exist, so pods stay unbound and the tests act as the node:
//! Running/Ready through `pods/status` (with explicit transition times), `pods/binding` to
//! nodes they create (no kwok annotation: nothing simulates them) when a scenario needs pods
//! that stay terminating. An unbound pod that is deleted gracefully vanishes at once.
//!
//! "Never" and "before" claims are checked on watch histories ([`harness::History`]), not
//! on samples; "stays so for N s" uses `holds_for` with the period the scenario names.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-deployment --test apiserver -- --ignored`.

#[path = "apiserver/basics.rs"]
mod basics;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/history.rs"]
mod history;
#[path = "apiserver/lifecycle.rs"]
mod lifecycle;
#[path = "apiserver/ownership.rs"]
mod ownership;
#[path = "apiserver/progress.rs"]
mod progress;
#[path = "apiserver/propagation.rs"]
mod propagation;
#[path = "apiserver/proportional.rs"]
mod proportional;
#[path = "apiserver/recreate.rs"]
mod recreate;
#[path = "apiserver/rolling.rs"]
mod rolling;
