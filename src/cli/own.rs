//! rkcm's own flags: behaviour upstream kube-controller-manager does not have. Every name
//! starts with `--rkcm-`, and each one's default is upstream's behaviour unless the README's
//! "Differences from upstream" says otherwise.

use clap::{ArgAction, Args};

use super::generic::parse_go_bool;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "rkcm's own flags (not upstream's)")]
pub struct RkcmFlags {
    /// Not upstream: DaemonSet rolling updates leave nodes whose Ready condition is not True
    /// out (they neither use the maxUnavailable/maxSurge budget nor get updated). Risk: a
    /// revision that itself makes nodes NotReady is then not stopped by the budget and rolls
    /// across the whole cluster. A DaemonSet's annotation
    /// rkcm.io/daemonset-rollout-skip-not-ready-nodes ("true"/"false") overrides this.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = parse_go_bool,
          value_name = "bool")]
    pub rkcm_daemonset_rollout_skip_not_ready_nodes: bool,
}
