//! DaemonSet scenarios against the real local control plane (acceptance scenarios of the
//! DaemonSet controller, upstream v1.37 behaviour).
//!
//! Each test runs the controller in-process on informers scoped to the test's namespace, and
//! creates nodes of its own: labelled with a value unique to the test (the DaemonSets select
//! them with a `nodeSelector`, so the plane's shared nodes and other tests' nodes are never
//! involved), tainted `NoSchedule` so no other pod lands there (the DaemonSets tolerate it),
//! and annotated for kwok, which makes them Ready and runs the pods the scheduler binds there.
//! Nodes are deleted at the end of each test.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-daemonset --test apiserver -- --include-ignored`.

#[path = "apiserver/basics.rs"]
mod basics;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/lifecycle.rs"]
mod lifecycle;
#[path = "apiserver/nodes.rs"]
mod nodes;
#[path = "apiserver/notready.rs"]
mod notready;
#[path = "apiserver/pacing.rs"]
mod pacing;
#[path = "apiserver/rollout.rs"]
mod rollout;
#[path = "apiserver/takeover.rs"]
mod takeover;
