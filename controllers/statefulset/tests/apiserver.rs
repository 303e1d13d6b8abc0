//! StatefulSet scenarios against the real local control plane (scenario numbering in each
//! test's doc).
//!
//! Each test runs the StatefulSet controller in-process on a namespace-scoped informer
//! factory of its own, so it never sees other tests' objects. The plane's
//! scheduler places pods on kwok's simulated nodes, which make them Running and Ready and
//! finish graceful deletions; the plane's upstream kube-controller-manager runs the garbage
//! collector and the PersistentVolume binder. Claims bind to PersistentVolumes the tests
//! create (hostPath, a storage class name unique to the test), deleted afterwards.
//!
//! "Never" claims are checked on the testkit's watch histories (`History`), not samples.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-statefulset --test apiserver -- --ignored`.

#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/manual.rs"]
mod manual;
#[path = "apiserver/ordering.rs"]
mod ordering;
#[path = "apiserver/pacing.rs"]
mod pacing;
#[path = "apiserver/safety.rs"]
mod safety;
#[path = "apiserver/takeover.rs"]
mod takeover;
#[path = "apiserver/updates.rs"]
mod updates;
#[path = "apiserver/volumes.rs"]
mod volumes;
