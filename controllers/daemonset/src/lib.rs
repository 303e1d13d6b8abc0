//! The DaemonSet controller: one pod of each DaemonSet on every eligible node, rolled to new
//! template revisions with RollingUpdate (maxUnavailable or maxSurge) or OnDelete.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/daemon/daemon_controller.go`,
//! `update.go` and `util/daemonset_util.go`.

pub mod backoff;
pub mod consts;
pub mod eligibility;
pub mod nodes;
pub mod plan;
mod podutil;
pub mod revision;
pub mod status;
pub mod template;

#[cfg(test)]
mod testutil;
