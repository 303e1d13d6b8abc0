//! PodGC scenarios against the real local control plane (acceptance scenarios).
//!
//! Each test runs its own PodGC in-process (`rkcm_podgc::start` on its own informers) with a
//! scaled-down period and quarantine, limited to the test's namespaces so that it never
//! touches the pods of other tests sharing the cluster; one test keeps the real 40 s
//! quarantine to prove its lower bound. Tests create their own nodes (which no simulator
//! manages) and set pod phases through the status subresource, since no kubelet runs.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-podgc --test apiserver -- --ignored`.

#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/orphaned.rs"]
mod orphaned;
#[path = "apiserver/safety.rs"]
mod safety;
#[path = "apiserver/terminated.rs"]
mod terminated;
#[path = "apiserver/terminating.rs"]
mod terminating;
