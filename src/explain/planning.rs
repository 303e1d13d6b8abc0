//! The configuration `rkcm explain` plans with: the manager's, not built-in defaults. Taken
//! from the same flags the manager takes (`--feature-gates`, `--rkcm-*`,
//! `--terminated-pod-gc-threshold`), parsed by the manager's own parser and turned into each
//! controller's `Config` by the registry's functions; with `--manager URL`, the running
//! manager's flags (`/debug/rkcm/config`) come first and the command line's after them.

use serde::Serialize;

use crate::cli::{Invocation, parse};
use crate::registry;

/// Where the planning flags came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    /// No flag given: upstream's defaults (and rkcm's own defaults).
    Defaults,
    /// The command line's flags.
    Flags,
    /// The running manager's configuration (and any flags given after it).
    Manager,
}

/// The settings the explained plans depend on.
#[derive(Debug, Clone)]
pub struct Planning {
    pub source: Source,
    /// The flags, as given to the manager's parser.
    pub flags: Vec<String>,
    pub statefulset: rkcm_statefulset::Config,
    /// The ReplicaSet and ReplicationController plan's settings.
    pub replicas: rkcm_replicaset::plan::PlanConfig,
    pub daemonset: rkcm_daemonset::Config,
    pub deployment: rkcm_deployment::Config,
    pub terminated_pod_gc_threshold: i32,
    /// `--rkcm-shards` (0: one leader) and where the shard Leases are
    /// (`--leader-elect-resource-namespace`).
    pub shards: u32,
    pub shard_namespace: String,
    /// The zone of a CronJob without `spec.timeZone`: the manager's local zone when it says
    /// which, else this process's.
    pub cronjob_time_zone: jiff::tz::TimeZone,
}

/// Whether the long flag `name` (without dashes) is one `explain` passes to the manager's
/// parser.
pub fn is_planning_flag(name: &str) -> bool {
    crate::serve::effective::plans_with(name)
}

impl Planning {
    /// The planning configuration of `flags` (each `--NAME=VALUE`), parsed as the manager
    /// parses its command line.
    pub fn from_flags(flags: &[String], source: Source) -> Result<Self, String> {
        Self::from_flags_at(flags, source, None)
    }

    /// [`Self::from_flags`] with the feature gates of kube-controller-manager v1.`minor`, as
    /// the manager takes them against a server of that minor (`None`: the newest minor that
    /// accepts them).
    pub fn from_flags_at(
        flags: &[String],
        source: Source,
        minor: Option<u32>,
    ) -> Result<Self, String> {
        let argv = std::iter::once("rkcm".to_owned()).chain(flags.iter().cloned());
        let mut cli = match parse::parse(argv) {
            Ok(Invocation::Run(cli)) => cli,
            Ok(Invocation::PrintVersion(_)) => return Err("unexpected --version".to_owned()),
            Err(err) => return Err(format!("the manager's flags: {err}")),
        };
        if let Some(minor) = minor {
            cli.feature_gates = crate::cli::FeatureGates::parse_at(
                minor,
                &cli.generic.feature_gates,
            )
            .map_err(|errs| {
                format!(
                    "the manager's flags, as kube-controller-manager v1.{minor} reads them: {}",
                    errs.join("; ")
                )
            })?;
        }
        Ok(Self {
            source,
            flags: flags.to_vec(),
            statefulset: registry::statefulset_config(&cli),
            replicas: {
                let rs = registry::replica_config(cli.replicaset.concurrent_replicaset_syncs, &cli);
                rkcm_replicaset::plan::PlanConfig {
                    burst: rs.burst_replicas,
                    pod_deletion_cost: rs.pod_deletion_cost,
                }
            },
            daemonset: registry::daemonset_config(&cli),
            deployment: registry::deployment_config(&cli),
            terminated_pod_gc_threshold: cli.podgc.terminated_pod_gc_threshold,
            shards: cli.rkcm.rkcm_shards,
            shard_namespace: cli.leader.leader_elect_resource_namespace.clone(),
            cronjob_time_zone: rkcm_cronjob::Config::default().local_time_zone,
        })
    }

    /// Plans in the manager's local time zone `name` (IANA); an unknown name is an error,
    /// not a silent fallback to this machine's zone.
    pub fn in_time_zone(mut self, name: &str) -> Result<Self, String> {
        self.cronjob_time_zone = jiff::tz::TimeZone::get(name)
            .map_err(|err| format!("the manager's local time zone {name:?}: {err}"))?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(f: &[&str]) -> Result<Planning, String> {
        let f: Vec<String> = f.iter().map(|s| (*s).to_owned()).collect();
        Planning::from_flags(&f, Source::Flags)
    }

    #[test]
    fn plans_with_the_managers_defaults_gates_and_own_flags() {
        let d = flags(&[]).expect("defaults");
        assert!(
            d.statefulset.max_unavailable,
            "MaxUnavailableStatefulSet is on by default"
        );
        assert!(!d.daemonset.rollout_skips_not_ready_nodes);
        assert!(!d.deployment.rollback_on_progress_deadline);
        assert_eq!(d.terminated_pod_gc_threshold, 12500);
        assert!(d.replicas.pod_deletion_cost);

        let p = flags(&[
            "--feature-gates=MaxUnavailableStatefulSet=false,PodDeletionCost=false",
            "--feature-gates=TaintTolerationComparisonOperators=true",
            "--rkcm-daemonset-rollout-skip-not-ready-nodes=true",
            "--rkcm-deployment-rollback-on-progress-deadline=true",
            "--terminated-pod-gc-threshold=3",
        ])
        .expect("parsed");
        assert!(p.deployment.rollback_on_progress_deadline);
        assert!(!p.statefulset.max_unavailable);
        assert!(p.daemonset.rollout_skips_not_ready_nodes);
        assert!(p.daemonset.taint_comparison_operators);
        assert!(!p.replicas.pod_deletion_cost);
        assert_eq!(p.terminated_pod_gc_threshold, 3);
    }

    #[test]
    fn plans_cronjobs_in_the_managers_local_time_zone() {
        let p = flags(&[])
            .and_then(|p| p.in_time_zone("Asia/Tokyo"))
            .expect("a known zone");
        assert_eq!(p.cronjob_time_zone.iana_name(), Some("Asia/Tokyo"));
        let err = flags(&[])
            .and_then(|p| p.in_time_zone("Nowhere/Atlantis"))
            .expect_err("an unknown zone is refused");
        assert!(err.contains("Nowhere/Atlantis"), "{err}");
    }

    #[test]
    fn refuses_what_the_manager_refuses() {
        let err = flags(&["--feature-gates=NoSuchGate=true"]).expect_err("refused");
        assert!(
            err.contains("unrecognized feature gate: NoSuchGate"),
            "{err}"
        );
        let err = flags(&["--rkcm-no-such-flag=true"]).expect_err("refused");
        assert!(err.contains("rkcm-no-such-flag"), "{err}");
    }

    /// Against a server of an older minor the plan takes that minor's gates, as the manager.
    #[test]
    fn plans_with_the_servers_minor() {
        let at = |minor, f: &[&str]| {
            let f: Vec<String> = f.iter().map(|s| (*s).to_owned()).collect();
            Planning::from_flags_at(&f, Source::Flags, Some(minor))
        };
        assert!(at(37, &[]).expect("v1.37").statefulset.max_unavailable);
        assert!(!at(36, &[]).expect("v1.36").statefulset.max_unavailable);
        assert!(!at(34, &[]).expect("v1.34").statefulset.max_unavailable);
        let gate = "--feature-gates=TaintTolerationComparisonOperators=true";
        assert!(
            at(35, &[gate])
                .expect("v1.35 knows it")
                .daemonset
                .taint_comparison_operators
        );
        let err = at(34, &[gate]).expect_err("unknown at v1.34");
        assert!(
            err.contains("v1.34") && err.contains("unrecognized feature gate"),
            "{err}"
        );
    }
}
