//! Feature gates: the static v1.37 table and `--feature-gates` parsing.

use std::collections::BTreeMap;

use super::generic::parse_go_bool;

// ---------------------------------------------------------------------------------------------
// Feature gates
// ---------------------------------------------------------------------------------------------

/// Maturity of a feature gate; also the `stage` label of `kubernetes_feature_enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    Alpha,
    Beta,
    Ga,
}

impl Stage {
    /// The label value upstream uses (GA is the empty string).
    pub fn label(self) -> &'static str {
        match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "",
        }
    }
}

/// One known gate: name, v1.37 default, stage, and whether it is locked to its default.
#[derive(Clone, Copy, Debug)]
pub struct GateSpec {
    pub name: &'static str,
    pub default: bool,
    pub stage: Stage,
    pub locked: bool,
}

const fn gate(name: &'static str, default: bool, stage: Stage, locked: bool) -> GateSpec {
    GateSpec {
        name,
        default,
        stage,
        locked,
    }
}

/// The gates the implemented controllers read, with their v1.37 state (upstream
/// `pkg/features/kube_features.go`). Upstream knows many more
/// (apiserver/kubelet gates); an operator passing one of those gets an error rather than a
/// silently ignored gate.
pub const FEATURE_GATES: &[GateSpec] = &[
    // Meta gates.
    gate("AllAlpha", false, Stage::Alpha, false),
    gate("AllBeta", false, Stage::Beta, false),
    // Manager and client machinery (manager.md §1.8).
    gate("WatchListClient", true, Stage::Beta, false),
    gate("WatchList", true, Stage::Beta, false),
    gate("InOrderInformers", true, Stage::Beta, false),
    gate("InformerResourceVersion", false, Stage::Alpha, false),
    gate("AtomicFIFO", true, Stage::Beta, false),
    gate("CoordinatedLeaderElection", false, Stage::Beta, false),
    gate("ComponentSLIs", true, Stage::Ga, true),
    // Workload controllers.
    gate(
        "DeploymentReplicaSetTerminatingReplicas",
        true,
        Stage::Beta,
        false,
    ),
    gate("PodDeletionCost", true, Stage::Beta, false),
    gate("LogarithmicScaleDown", true, Stage::Ga, true),
    gate(
        "StaleControllerConsistencyReplicaSet",
        true,
        Stage::Beta,
        false,
    ),
    gate("StaleControllerConsistencyJob", true, Stage::Beta, false),
    gate(
        "StaleControllerConsistencyStatefulSet",
        true,
        Stage::Beta,
        false,
    ),
    gate(
        "StaleControllerConsistencyDaemonSet",
        true,
        Stage::Beta,
        false,
    ),
    gate("MaxUnavailableStatefulSet", true, Stage::Beta, false),
    gate(
        "StatefulSetSemanticRevisionComparison",
        true,
        Stage::Beta,
        false,
    ),
    gate("StatefulSetRecreateStrategy", false, Stage::Alpha, false),
    gate(
        "TaintTolerationComparisonOperators",
        false,
        Stage::Alpha,
        false,
    ),
    gate("JobBackoffLimitPerIndex", true, Stage::Ga, true),
    gate("JobSuccessPolicy", true, Stage::Ga, true),
    gate("JobPodReplacementPolicy", true, Stage::Ga, true),
    gate("JobManagedBy", true, Stage::Ga, true),
    gate(
        "MutableSchedulingDirectivesForSuspendedJobs",
        true,
        Stage::Beta,
        false,
    ),
    gate(
        "MutablePodResourcesForSuspendedJobs",
        true,
        Stage::Beta,
        false,
    ),
    gate("WorkloadWithJob", false, Stage::Alpha, false),
    gate("GenericWorkload", false, Stage::Alpha, false),
    gate("GangScheduling", false, Stage::Alpha, false),
    gate("PodObservedGenerationTracking", true, Stage::Ga, true),
    gate("SidecarContainers", true, Stage::Ga, true),
];

/// The effective feature gates: the table's defaults plus `--feature-gates` overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeatureGates {
    overrides: BTreeMap<&'static str, bool>,
}

impl FeatureGates {
    /// Parses the accumulated `key=value` entries of `--feature-gates` (component-base
    /// `MapStringBool` + `featuregate.Set`).
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        let mut overrides = BTreeMap::new();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let Some((key, value)) = entry.split_once('=') else {
                return Err(format!("missing bool value for {entry}"));
            };
            let key = key.trim();
            // Versioned component registries prefix gates with their component.
            let key = key.strip_prefix("kube:").unwrap_or(key);
            let value = value.trim();
            let enabled = parse_go_bool(value)
                .map_err(|e| format!("invalid value of {key}={value}, err: {e}"))?;
            let spec = FEATURE_GATES
                .iter()
                .find(|g| g.name == key)
                .ok_or_else(|| format!("unrecognized feature gate: {key}"))?;
            if spec.locked && enabled != spec.default {
                return Err(format!(
                    "cannot set feature gate {key} to {enabled}, feature is locked to {}",
                    spec.default
                ));
            }
            if spec.name == "CoordinatedLeaderElection" && enabled {
                return Err(
                    "feature gate CoordinatedLeaderElection=true is not supported by rkcm"
                        .to_string(),
                );
            }
            overrides.insert(spec.name, enabled);
        }
        Ok(Self { overrides })
    }

    /// Whether `name` is on. Unknown names are off.
    pub fn enabled(&self, name: &str) -> bool {
        let Some(spec) = FEATURE_GATES.iter().find(|g| g.name == name) else {
            return false;
        };
        if let Some(v) = self.overrides.get(spec.name) {
            return *v;
        }
        if !spec.locked {
            let all = |meta: &str| self.overrides.get(meta).copied().unwrap_or(false);
            match spec.stage {
                Stage::Alpha if spec.name != "AllAlpha" && all("AllAlpha") => return true,
                Stage::Beta if spec.name != "AllBeta" && all("AllBeta") => return true,
                _ => {}
            }
        }
        spec.default
    }

    /// Every known gate with its effective state, for `kubernetes_feature_enabled`.
    pub fn all(&self) -> Vec<(&'static GateSpec, bool)> {
        FEATURE_GATES
            .iter()
            .map(|g| (g, self.enabled(g.name)))
            .collect()
    }
}
