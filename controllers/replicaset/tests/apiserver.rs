//! ReplicaSet and ReplicationController scenarios against the real local control plane
//! (acceptance scenarios).
//!
//! Each test runs the two controllers in-process (`rkcm_replicaset::start_*` on informers of
//! its own) limited to the test's namespace, so they never touch other tests' objects on the
//! shared plane. Pod templates name a scheduler that does not exist, so pods stay unbound and
//! the tests act as the node (phase and Ready through `pods/status`, `pods/binding` to nodes
//! they create); an unbound pod that is deleted gracefully vanishes at once.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-replicaset --test apiserver -- --ignored`.

#[path = "apiserver/adoption.rs"]
mod adoption;
#[path = "apiserver/basics.rs"]
mod basics;
#[path = "apiserver/burst.rs"]
mod burst;
#[path = "apiserver/failure.rs"]
mod failure;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/lag.rs"]
mod lag;
#[path = "apiserver/namespace_terminating.rs"]
mod namespace_terminating;
#[path = "apiserver/pacing.rs"]
mod pacing;
#[path = "apiserver/podgc.rs"]
mod podgc;
#[path = "apiserver/rc.rs"]
mod rc;
#[path = "apiserver/scale_down.rs"]
mod scale_down;
#[path = "apiserver/sharding.rs"]
mod sharding;
#[path = "apiserver/stale_cache.rs"]
mod stale_cache;
#[path = "apiserver/status_conflicts.rs"]
mod status_conflicts;
#[path = "apiserver/takeover.rs"]
mod takeover;
