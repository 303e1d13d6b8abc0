//! Black-box tests of the `rkcm` binary (one test binary; modules under `tests/rkcm/`).
//!
//! Tests that need a running kube-apiserver are `#[ignore = "needs apiserver: make test"]`
//! and read the kubeconfig path from `RKCM_TEST_KUBECONFIG`.

// A test binary: a failed unwrap is a failing test (clippy counts only `#[test]` functions
// and `#[cfg(test)]` modules as tests, not the helpers beside them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

// A test crate root resolves `mod x;` next to itself (tests/x.rs), hence the paths.
#[path = "rkcm/ca_rotation.rs"]
mod ca_rotation;
#[path = "rkcm/chaos.rs"]
mod chaos;
#[path = "rkcm/cronjob_status_lag.rs"]
mod cronjob_status_lag;
#[path = "rkcm/cronjob_takeover.rs"]
mod cronjob_takeover;
#[path = "rkcm/daemonset_takeover.rs"]
mod daemonset_takeover;
#[path = "rkcm/explain.rs"]
mod explain;
#[path = "rkcm/flags.rs"]
mod flags;
#[path = "rkcm/forget.rs"]
mod forget;
#[path = "rkcm/handover.rs"]
mod handover;
#[path = "rkcm/job_faults.rs"]
mod job_faults;
#[path = "rkcm/job_takeover.rs"]
mod job_takeover;
#[path = "rkcm/kube_prometheus.rs"]
mod kube_prometheus;
#[path = "rkcm/kubeadm.rs"]
mod kubeadm;
#[path = "rkcm/kubeconfig.rs"]
mod kubeconfig;
#[path = "rkcm/leader.rs"]
mod leader;
#[path = "rkcm/packaging.rs"]
mod packaging;
#[path = "rkcm/prometheus.rs"]
mod prometheus;
#[path = "rkcm/quiet.rs"]
mod quiet;
#[path = "rkcm/real_nodes.rs"]
mod real_nodes;
#[path = "rkcm/rollout.rs"]
mod rollout;
#[path = "rkcm/rollout_daemonset.rs"]
mod rollout_daemonset;
#[path = "rkcm/rollout_statefulset.rs"]
mod rollout_statefulset;
#[path = "rkcm/secure_serving.rs"]
mod secure_serving;
#[path = "rkcm/serve.rs"]
mod serve;
#[path = "rkcm/shards.rs"]
mod shards;
#[path = "rkcm/skew.rs"]
mod skew;
#[path = "rkcm/statefulset_identity.rs"]
mod statefulset_identity;
#[path = "rkcm/statefulset_takeover.rs"]
mod statefulset_takeover;
#[path = "rkcm/takeover.rs"]
mod takeover;
#[path = "rkcm/zpages.rs"]
mod zpages;
