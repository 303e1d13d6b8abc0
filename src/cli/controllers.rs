//! The per-controller flag groups (`--concurrent-*-syncs` and friends), including those of
//! upstream controllers rkcm does not implement.

use clap::{ArgAction, Args};

use super::duration::{GoDuration, parse_duration};
use super::generic::parse_go_bool;

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Deployment controller flags")]
pub struct DeploymentFlags {
    /// The number of deployment objects that are allowed to sync concurrently. Larger
    /// number = more responsive deployments, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_deployment_syncs: i32,

    /// Removed upstream; accepted and ignored so old manifests keep working.
    #[arg(long, value_parser = parse_duration, value_name = "duration", hide = true)]
    pub deployment_controller_sync_period: Option<GoDuration>,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "ReplicaSet controller flags")]
pub struct ReplicaSetFlags {
    /// The number of replica sets that are allowed to sync concurrently. Larger number =
    /// more responsive replica management, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_replicaset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "ReplicationController flags")]
pub struct ReplicationControllerFlags {
    /// The number of replication controllers that are allowed to sync concurrently. Larger
    /// number = more responsive replica management, but more CPU (and network) load. Also
    /// spelled --concurrent_rc_syncs (upstream's registered name).
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_rc_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "StatefulSet controller flags")]
pub struct StatefulSetFlags {
    /// The number of statefulset objects that are allowed to sync concurrently. Larger
    /// number = more responsive statefulsets, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_statefulset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "DaemonSet controller flags")]
pub struct DaemonSetFlags {
    /// The number of daemonset objects that are allowed to sync concurrently. Larger number
    /// = more responsive daemonsets, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 2,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_daemonset_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Job controller flags")]
pub struct JobFlags {
    /// The number of job objects that are allowed to sync concurrently. Larger number = more
    /// responsive jobs, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_job_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "CronJob controller flags")]
pub struct CronJobFlags {
    /// The number of cron job objects that are allowed to sync concurrently. Larger number =
    /// more responsive jobs, but more CPU (and network) load.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_cron_job_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "TTL-after-finished controller flags")]
pub struct TtlAfterFinishedFlags {
    /// The number of TTL-after-finished controller workers that are allowed to sync
    /// concurrently.
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_ttl_after_finished_syncs: i32,
}

#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Garbage collector controller flags")]
pub struct GarbageCollectorFlags {
    /// The number of garbage collector workers that are allowed to sync concurrently.
    #[arg(
        long,
        default_value_t = 20,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_gc_syncs: i32,

    /// Enables the generic garbage collector. MUST be synced with the corresponding flag of
    /// the kube-apiserver.
    #[arg(long, action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "true", value_parser = parse_go_bool,
          value_name = "bool")]
    pub enable_garbage_collector: bool,
}

/// Concurrency flags of upstream controllers rkcm does not implement: accepted
/// so manifests written for kube-controller-manager keep working.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Flags of controllers rkcm does not implement (accepted, no effect)")]
pub struct OtherControllerFlags {
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_service_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub mirroring_concurrent_service_endpoint_syncs: i32,
    #[arg(
        long,
        default_value_t = 10,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_namespace_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_resource_quota_syncs: i32,
    #[arg(
        long,
        default_value_t = 1,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_service_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_serviceaccount_token_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_horizontal_pod_autoscaler_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_ephemeralvolume_syncs: i32,
    #[arg(
        long,
        default_value_t = 5,
        value_name = "int32",
        allow_negative_numbers = true
    )]
    pub concurrent_validating_admission_policy_status_syncs: i32,
}
