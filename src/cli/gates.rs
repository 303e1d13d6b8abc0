//! Feature gates: upstream's registry of each supported minor (v1.34 to v1.37),
//! `--feature-gates` parsing with upstream's rules, and what rkcm does with each gate.
//!
//! rkcm behaves against a v1.N API server as kube-controller-manager v1.N would: the gates'
//! defaults, locks and names are v1.N's. The command line is checked before the server's
//! version is known: it is refused only when no supported minor accepts it. Once the server's
//! minor is read, [`FeatureGates::parse_at`] gives that minor's answer, refusals included.
//!
//! Parsing follows component-base `featuregate` (`unsafeSetFromMap`): an unknown name is an
//! error, a locked gate accepts only its default, `AllAlpha`/`AllBeta` set every alpha/beta
//! gate not named explicitly, and a gate enabled while one it depends on is disabled is an
//! error. On top of that rkcm refuses, at start and naming the gate, every effective value it
//! does not implement ([`Support`]): an operator asking for a behaviour rkcm lacks gets an
//! error, never a silently ignored gate.

use std::collections::BTreeMap;

use super::generic::parse_go_bool;

#[cfg(test)]
mod minors;
mod spec;
mod table;
#[cfg(test)]
mod upstream;

pub use spec::{GateSpec, Stage};
pub use table::{NEWEST_MINOR, OLDEST_MINOR, REGISTRIES, Registry, registry};

/// The newest minor's gates (v1.37's), sorted by name.
#[cfg(test)]
pub const FEATURE_GATES: &[GateSpec] = table::NEWEST_GATES;

/// What rkcm does with a gate. Every gate that changes a controller rkcm runs (or the client
/// machinery under it) is [`Support::Honoured`], [`Support::DefaultOnly`] or
/// [`Support::NotImplemented`]; the README's feature-gate table lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// Both settings implemented, with upstream's effect; the text says where.
    Honoured(&'static str),
    /// Only upstream's default is implemented: the other value is refused at start.
    DefaultOnly(&'static str),
    /// Upstream's default is on but rkcm behaves as with the gate off (a difference the README
    /// lists): `false` is accepted, `true` given explicitly is refused, the default is logged,
    /// and `kubernetes_feature_enabled` reports it off.
    #[expect(
        dead_code,
        reason = "no gate is classified so today; start-up, log and metric still handle one"
    )]
    NotImplemented(&'static str),
    /// Changes nothing in the controllers rkcm runs: accepted either way, as upstream's
    /// workload controllers ignore it too.
    NoEffect(&'static str),
}

/// Gates newer than some supported minors whose behaviour rkcm keeps at those minors (with
/// the newest minor's default) instead of going without it: the stale-cache guards, added in
/// v1.36, keep a sync from acting on a cache that does not yet show the controller's own
/// writes. Without them a v1.34 or v1.35 manager can act twice on a lagging cache; rkcm does
/// not bring that back. Not settable there (the minor's manager does not know them).
pub const KEPT_WHEN_ABSENT: &[&str] = &[
    "AtomicFIFO",
    "StaleControllerConsistencyDaemonSet",
    "StaleControllerConsistencyJob",
    "StaleControllerConsistencyReplicaSet",
    "StaleControllerConsistencyStatefulSet",
];

/// Why a gate has no effect in rkcm, unless [`support`] says more.
pub const NO_EFFECT: &str =
    "API server, kubelet, scheduler or controllers rkcm does not run; none of rkcm's controllers";

/// rkcm's support for the gate `name` (see [`Support`]).
pub fn support(name: &str) -> Support {
    use Support::*;
    match name {
        "AllAlpha" | "AllBeta" => Honoured("sets every alpha (beta) gate not named explicitly"),
        "AtomicFIFO" => Honoured(
            "informer stores report their last synced resourceVersion; the stale-cache guards \
             depend on it",
        ),
        "WatchListClient" => {
            Honoured("informers start with one streaming watch (on) or paginated lists (off)")
        }
        "ControllerManagerReleaseLeaderElectionLockOnExit" => Honoured(
            "on SIGTERM the leader releases its Lease once its controllers stopped (on) or \
             leaves it to expire (off)",
        ),
        "DeploymentReplicaSetTerminatingReplicas" => {
            Honoured("ReplicaSet and Deployment status.terminatingReplicas")
        }
        "PodDeletionCost" => Honoured(
            "ReplicaSet scale-down ranks pods by controller.kubernetes.io/pod-deletion-cost",
        ),
        "StaleControllerConsistencyReplicaSet"
        | "StaleControllerConsistencyDaemonSet"
        | "StaleControllerConsistencyStatefulSet"
        | "StaleControllerConsistencyJob" => Honoured(
            "a sync waits until the caches show the controller's own writes for that object",
        ),
        "MaxUnavailableStatefulSet" => {
            Honoured("StatefulSet rollingUpdate.maxUnavailable (off: one pod at a time)")
        }
        "StatefulSetSemanticRevisionComparison" => Honoured(
            "a StatefulSet whose newest revision differs only by defaults or encoding keeps it \
             (off: a new revision and a rollout)",
        ),
        "TaintTolerationComparisonOperators" => Honoured(
            "DaemonSet placement and NoExecute eviction honour Gt/Lt tolerations (off: they \
             tolerate nothing)",
        ),
        "MutableSchedulingDirectivesForSuspendedJobs" => {
            Honoured("suspending a Job clears status.startTime")
        }
        "StatefulSetRecreateStrategy" => DefaultOnly(
            "the Recreate update strategy is not implemented (with the gate off a Recreate \
             StatefulSet gets upstream's error and no update)",
        ),
        "WorkloadWithJob" => DefaultOnly("gang scheduling of Jobs is not implemented"),
        // Locked on from v1.35; at v1.34 (beta) upstream's `false` makes the Job controller
        // sync Jobs of every manager.
        "JobManagedBy" => DefaultOnly(
            "the Job controller always leaves Jobs whose spec.managedBy names another manager \
             alone",
        ),
        "CoordinatedLeaderElection" => {
            DefaultOnly("coordinated leader election is not implemented")
        }
        "ClientsAllowCBOR" | "ClientsPreferCBOR" => {
            DefaultOnly("rkcm's API clients speak JSON and protobuf, not CBOR")
        }
        "ClientsAllowCARotation" => Honoured(
            "a CA file of the kubeconfig (or the ServiceAccount's ca.crt) is re-read while \
             running, new connections trust what it holds (on), or read once at start (off)",
        ),
        "ComponentFlagz" => Honoured("/flagz: the flags and their values (on) or 404 (off)"),
        "ComponentStatusz" => {
            Honoured("/statusz: start time, uptime, versions and paths (on) or 404 (off)")
        }
        "InOrderInformersBatchProcess"
        | "UnlockWhileProcessingFIFO"
        | "InformerResourceVersion" => NoEffect(
            "client-go informer internals; rkcm's informers deliver every change in order \
                 either way",
        ),
        "ClientsAllowTLSCacheGC" => NoEffect("client-go transport cache internals"),
        "ContextualLogging" | "LoggingAlphaOptions" | "LoggingBetaOptions" => {
            NoEffect("logging options only")
        }
        "GenericWorkload" => NoEffect(
            "the Job controller reads it only together with WorkloadWithJob, which rkcm refuses",
        ),
        "MutablePodResourcesForSuspendedJobs" => NoEffect("API server validation only"),
        _ => NoEffect(NO_EFFECT),
    }
}

/// The effective feature gates of one minor: its registry's defaults plus `--feature-gates`
/// overrides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FeatureGates {
    minor: u32,
    overrides: BTreeMap<&'static str, bool>,
}

impl Default for FeatureGates {
    /// The newest minor's defaults.
    fn default() -> Self {
        Self {
            minor: NEWEST_MINOR,
            overrides: BTreeMap::new(),
        }
    }
}

impl FeatureGates {
    /// The command line's gates before the server's minor is known: those of the newest minor
    /// that accepts `entries`. When none does, the newest minor's errors.
    pub fn parse(entries: &[String]) -> Result<Self, Vec<String>> {
        let mut newest_errors = None;
        for registry in REGISTRIES.iter().rev() {
            match Self::parse_at(registry.minor, entries) {
                Ok(gates) => return Ok(gates),
                Err(errs) => {
                    newest_errors.get_or_insert(errs);
                }
            }
        }
        Err(newest_errors.unwrap_or_default())
    }

    /// The minor whose registry these gates follow.
    #[cfg(test)]
    pub fn minor(&self) -> u32 {
        self.minor
    }

    fn registry(&self) -> &'static Registry {
        registry(self.minor).unwrap_or_else(table::newest)
    }

    fn spec_of(&self, name: &str) -> Option<&'static GateSpec> {
        self.registry().gates.iter().find(|g| g.name == name)
    }

    /// Parses the accumulated `key=value` entries of `--feature-gates` as kube-controller-manager
    /// v1.`minor` does (component-base `MapStringBool` + `featuregate.Set`), then checks
    /// dependencies and what rkcm implements. Every failure is returned; each names its gate.
    /// A minor rkcm does not support reads as the newest.
    pub fn parse_at(minor: u32, entries: &[String]) -> Result<Self, Vec<String>> {
        let minor = registry(minor).map_or(NEWEST_MINOR, |r| r.minor);
        let at = Self {
            minor,
            overrides: BTreeMap::new(),
        };
        let mut overrides = BTreeMap::new();
        let mut errs = Vec::new();
        for entry in entries {
            let entry = entry.trim();
            if entry.is_empty() {
                continue;
            }
            let Some((key, value)) = entry.split_once('=') else {
                return Err(vec![format!(
                    "invalid argument for \"--feature-gates\" flag: missing bool value for {entry}"
                )]);
            };
            let key = key.trim();
            // Versioned component registries prefix gates with their component.
            let key = key.strip_prefix("kube:").unwrap_or(key);
            let value = value.trim();
            let enabled = parse_go_bool(value).map_err(|e| {
                vec![format!(
                    "invalid argument for \"--feature-gates\" flag: invalid value of \
                     {key}={value}, err: {e}"
                )]
            })?;
            let Some(spec) = at.spec_of(key) else {
                // Upstream returns at the first unknown name.
                return Err(vec![format!(
                    "invalid argument for \"--feature-gates\" flag: unrecognized feature gate: \
                     {key}"
                )]);
            };
            if spec.locked && enabled != spec.default {
                errs.push(format!(
                    "invalid argument for \"--feature-gates\" flag: cannot set feature gate \
                     {key} to {enabled}, feature is locked to {}",
                    spec.default
                ));
                continue;
            }
            overrides.insert(spec.name, enabled);
        }
        if !errs.is_empty() {
            return Err(errs);
        }
        let gates = Self { minor, overrides };
        errs.extend(gates.dependency_errors());
        errs.extend(gates.refusals());
        if errs.is_empty() {
            Ok(gates)
        } else {
            Err(errs)
        }
    }

    /// Whether `name` is on. A name this minor does not know is off (its manager has no such
    /// behaviour), except the stale-cache guards ([`KEPT_WHEN_ABSENT`]), which keep the newest
    /// minor's default.
    pub fn enabled(&self, name: &str) -> bool {
        match self.spec_of(name) {
            Some(spec) => self.effective(spec).0,
            None => {
                KEPT_WHEN_ABSENT.contains(&name)
                    && table::NEWEST_GATES
                        .iter()
                        .any(|g| g.name == name && g.default)
            }
        }
    }

    /// The effective value of `spec` and, when a meta gate set it, that gate's name.
    fn effective(&self, spec: &GateSpec) -> (bool, Option<&'static str>) {
        if let Some(v) = self.overrides.get(spec.name) {
            return (*v, None);
        }
        let meta = match spec.stage {
            Stage::Alpha if spec.name != "AllAlpha" => Some("AllAlpha"),
            Stage::Beta if spec.name != "AllBeta" => Some("AllBeta"),
            _ => None,
        };
        if let Some(meta) = meta
            && let Some(v) = self.overrides.get(meta)
        {
            return (*v, Some(meta));
        }
        (spec.default, None)
    }

    /// Upstream's dependency check: `X is enabled, but depends on features that are
    /// disabled: [Y]`, one line per gate, by name.
    fn dependency_errors(&self) -> Vec<String> {
        self.registry()
            .dependencies
            .iter()
            .filter(|(gate, _)| self.enabled(gate))
            .filter_map(|(gate, deps)| {
                let off: Vec<&str> = deps.iter().copied().filter(|d| !self.enabled(d)).collect();
                (!off.is_empty()).then(|| {
                    format!(
                        "invalid argument for \"--feature-gates\" flag: {gate} is enabled, but \
                         depends on features that are disabled: [{}]",
                        off.join(" ")
                    )
                })
            })
            .collect()
    }

    /// The effective values rkcm does not implement, one error per gate.
    fn refusals(&self) -> Vec<String> {
        let mut out = Vec::new();
        for spec in self.registry().gates {
            let (enabled, via) = self.effective(spec);
            let refused = match support(spec.name) {
                Support::DefaultOnly(why) if enabled != spec.default => Some(why),
                Support::NotImplemented(why)
                    if enabled && self.overrides.contains_key(spec.name) =>
                {
                    Some(why)
                }
                _ => None,
            };
            if let Some(why) = refused {
                let via = via
                    .map(|m| format!(" (set by {m}=true)"))
                    .unwrap_or_default();
                out.push(format!(
                    "feature gate {}={enabled}{via} is not implemented by rkcm: {why}",
                    spec.name
                ));
            }
        }
        out
    }

    /// Gates in effect whose behaviour rkcm does not have ([`Support::NotImplemented`] left at
    /// its default): `(gate, why)`, logged once at start.
    pub fn notices(&self) -> Vec<(&'static str, &'static str)> {
        self.registry()
            .gates
            .iter()
            .filter_map(|spec| match support(spec.name) {
                Support::NotImplemented(why) if self.effective(spec).0 => Some((spec.name, why)),
                _ => None,
            })
            .collect()
    }

    /// Every known gate with what rkcm does, for `kubernetes_feature_enabled`: the effective
    /// state, except that a gate whose behaviour rkcm lacks ([`Support::NotImplemented`])
    /// reports off, as rkcm runs, whatever upstream's default.
    pub fn all(&self) -> Vec<(&'static GateSpec, bool)> {
        self.registry()
            .gates
            .iter()
            .map(|g| {
                let implemented = !matches!(support(g.name), Support::NotImplemented(_));
                (g, implemented && self.effective(g).0)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// v1.37's answer (the tests of other minors are in `minors`).
    fn parse(entries: &[&str]) -> Result<FeatureGates, Vec<String>> {
        FeatureGates::parse_at(
            37,
            &entries.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
    }

    fn spec_of(name: &str) -> Option<&'static GateSpec> {
        FEATURE_GATES.iter().find(|g| g.name == name)
    }

    const DEPENDENCIES: &[(&str, &[&str])] = table::NEWEST_DEPENDENCIES;

    fn refused(entries: &[&str]) -> String {
        parse(entries).expect_err("refused").join("\n")
    }

    /// The v1.37.1 states the controllers depend on (kube_features.go, client-go and
    /// controller-manager feature tables).
    #[test]
    fn table_has_upstreams_states() {
        let state = |n: &str| spec_of(n).map(|s| (s.default, s.stage, s.locked));
        assert_eq!(FEATURE_GATES.len(), 254);
        assert_eq!(
            state("MaxUnavailableStatefulSet"),
            Some((true, Stage::Beta, false))
        );
        assert_eq!(
            state("StatefulSetRecreateStrategy"),
            Some((false, Stage::Alpha, false))
        );
        assert_eq!(
            state("TaintTolerationComparisonOperators"),
            Some((false, Stage::Alpha, false))
        );
        assert_eq!(state("InOrderInformers"), Some((true, Stage::Ga, true)));
        assert_eq!(
            state("InformerResourceVersion"),
            Some((true, Stage::Ga, false))
        );
        assert_eq!(state("JobManagedBy"), Some((true, Stage::Ga, true)));
        assert_eq!(
            state("ControllerManagerReleaseLeaderElectionLockOnExit"),
            Some((false, Stage::Alpha, false))
        );
        // Gone from v1.37 (GA and removed): upstream rejects them as unknown.
        for gone in [
            "JobSuccessPolicy",
            "JobPodReplacementPolicy",
            "LogarithmicScaleDown",
            "GangScheduling",
            "StatefulSetAutoDeletePVC",
        ] {
            assert!(state(gone).is_none(), "{gone}");
        }
        let mut names: Vec<&str> = FEATURE_GATES.iter().map(|g| g.name).collect();
        let sorted = {
            let mut s = names.clone();
            s.sort_unstable();
            s
        };
        assert_eq!(names, sorted);
        names.dedup();
        assert_eq!(names.len(), FEATURE_GATES.len());
        for (gate, deps) in DEPENDENCIES {
            assert!(spec_of(gate).is_some(), "{gate}");
            assert!(deps.iter().all(|d| spec_of(d).is_some()), "{gate}");
        }
    }

    #[test]
    fn overrides_and_meta_gates() {
        let g = parse(&["WatchListClient=false", "kube:PodDeletionCost=0"]).expect("ok");
        assert!(!g.enabled("WatchListClient"));
        assert!(!g.enabled("PodDeletionCost"));
        assert!(g.enabled("InOrderInformers"), "default");
        assert!(!g.enabled("NoSuchGate"));

        // AllAlpha turns every alpha gate on that is not named, and the refused ones are named.
        let err = refused(&["AllAlpha=true"]);
        assert!(
            err.contains(
                "StatefulSetRecreateStrategy=true (set by AllAlpha=true) is not implemented"
            ),
            "{err}"
        );
        assert!(
            err.contains("WorkloadWithJob=true (set by AllAlpha=true)"),
            "{err}"
        );
        // ... but it needs GenericWorkload, a beta gate AllAlpha does not touch.
        assert!(
            err.contains("WorkloadWithJob is enabled, but depends on features that are disabled: [GenericWorkload]"),
            "{err}"
        );
        let g = parse(&[
            "AllAlpha=true",
            "StatefulSetRecreateStrategy=false",
            "WorkloadWithJob=false",
            "ClientsAllowCBOR=false",
            "ClientsPreferCBOR=false",
            // Alpha gates of the scheduler need this beta gate, upstream as here.
            "GenericWorkload=true",
        ])
        .expect("AllAlpha without what rkcm refuses");
        assert!(g.enabled("TaintTolerationComparisonOperators"));
        assert!(g.enabled("WatchListClient"), "beta unaffected");

        // AllBeta=false turns every beta gate off that is not named: the stale-cache guards
        // then need AtomicFIFO no more.
        let g = parse(&["AllBeta=false"]).expect("all beta off");
        assert!(!g.enabled("StaleControllerConsistencyJob"));
        assert!(!g.enabled("AtomicFIFO"));
        assert!(g.enabled("JobManagedBy"), "GA unaffected");
        let g = parse(&["AllBeta=false", "PodDeletionCost=true"]).expect("explicit wins");
        assert!(g.enabled("PodDeletionCost"));
    }

    #[test]
    fn upstreams_errors() {
        assert_eq!(
            refused(&["NoSuchGate=true"]),
            "invalid argument for \"--feature-gates\" flag: unrecognized feature gate: NoSuchGate"
        );
        assert!(refused(&["JobSuccessPolicy=true"]).contains("unrecognized feature gate"));
        assert!(
            refused(&["JobManagedBy=false"]).contains(
                "cannot set feature gate JobManagedBy to false, feature is locked to true"
            )
        );
        parse(&["JobManagedBy=true"]).expect("the locked value itself is fine");
        assert!(refused(&["WatchList"]).contains("missing bool value for WatchList"));
        assert!(refused(&["WatchList=maybe"]).contains("invalid value of WatchList=maybe"));
        // AtomicFIFO off while a guard that needs it is on: upstream's dependency error.
        let err = refused(&["AtomicFIFO=false"]);
        for guard in ["DaemonSet", "Job", "ReplicaSet", "StatefulSet", "HPA"] {
            assert!(
                err.contains(&format!(
                    "StaleControllerConsistency{guard} is enabled, but depends on features that are disabled: [AtomicFIFO]"
                )),
                "{err}"
            );
        }
        parse(&[
            "AtomicFIFO=false",
            "StaleControllerConsistencyDaemonSet=false",
            "StaleControllerConsistencyJob=false",
            "StaleControllerConsistencyReplicaSet=false",
            "StaleControllerConsistencyStatefulSet=false",
            "StaleControllerConsistencyHPA=false",
            "NodeControllerLeaseCircuitBreaker=false",
        ])
        .expect("guards off: AtomicFIFO may go");
    }

    /// Every value rkcm does not implement is refused, naming the gate; the implemented value
    /// of the same gate is accepted.
    #[test]
    fn unimplemented_values_are_refused_by_name() {
        for (gate, refused_value) in [
            ("StatefulSetRecreateStrategy", "true"),
            ("CoordinatedLeaderElection", "true"),
            ("ClientsAllowCBOR", "true"),
            ("ClientsPreferCBOR", "true"),
        ] {
            let err = refused(&[&format!("{gate}={refused_value}")]);
            assert_eq!(
                err.lines().count(),
                1,
                "{gate}: one error naming the gate: {err}"
            );
            assert!(
                err.starts_with(&format!(
                    "feature gate {gate}={refused_value} is not implemented by rkcm: "
                )),
                "{err}"
            );
            let other = if refused_value == "true" {
                "false"
            } else {
                "true"
            };
            parse(&[&format!("{gate}={other}")]).unwrap_or_else(|e| panic!("{gate}: {e:?}"));
        }
        let err = refused(&["GenericWorkload=true", "WorkloadWithJob=true"]);
        assert_eq!(
            err,
            "feature gate WorkloadWithJob=true is not implemented by rkcm: gang scheduling of \
             Jobs is not implemented"
        );
        // No default rkcm runs is one it does not implement.
        assert!(parse(&[]).expect("defaults").notices().is_empty());
        // Implemented gates take either value.
        for gate in [
            "ClientsAllowCARotation",
            "ComponentFlagz",
            "ComponentStatusz",
        ] {
            for value in ["true", "false"] {
                parse(&[&format!("{gate}={value}")]).unwrap_or_else(|e| panic!("{gate}: {e:?}"));
            }
        }
    }

    /// `kubernetes_feature_enabled` says what rkcm does: a gate whose behaviour rkcm lacks
    /// reports 0 even where upstream's default (and so [`FeatureGates::enabled`]) is on.
    #[test]
    fn the_metric_reports_what_rkcm_does() {
        for entries in [
            &[][..],
            &["AllBeta=false"][..],
            &["ClientsAllowCARotation=false"][..],
        ] {
            let gates = parse(entries).expect("valid");
            for (spec, reported) in gates.all() {
                let does = match support(spec.name) {
                    Support::NotImplemented(_) => false,
                    _ => gates.enabled(spec.name),
                };
                assert_eq!(reported, does, "{} with {entries:?}", spec.name);
            }
        }
        let reported = |name: &str| {
            parse(&[])
                .expect("defaults")
                .all()
                .into_iter()
                .find(|(s, _)| s.name == name)
                .map(|(_, on)| on)
        };
        assert_eq!(reported("ClientsAllowCARotation"), Some(true));
        assert_eq!(reported("ComponentFlagz"), Some(true));
        assert_eq!(reported("WatchListClient"), Some(true));
    }

    /// Every gate that upstream's workload controllers, or the client-go and
    /// controller-manager machinery under them, read in v1.37 has a classification other
    /// than the catch-all (found by following the imports of `pkg/controller/{daemon,
    /// deployment,replicaset,replication,statefulset,job,cronjob,podgc,ttlafterfinished}`).
    #[test]
    fn every_gate_the_controllers_read_is_classified() {
        for gate in [
            "AtomicFIFO",
            "WatchListClient",
            "InOrderInformersBatchProcess",
            "UnlockWhileProcessingFIFO",
            "InformerResourceVersion",
            "ClientsAllowCBOR",
            "ClientsPreferCBOR",
            "ClientsAllowCARotation",
            "ClientsAllowTLSCacheGC",
            "ControllerManagerReleaseLeaderElectionLockOnExit",
            "CoordinatedLeaderElection",
            "ComponentFlagz",
            "ComponentStatusz",
            "DeploymentReplicaSetTerminatingReplicas",
            "PodDeletionCost",
            "StaleControllerConsistencyReplicaSet",
            "StaleControllerConsistencyDaemonSet",
            "StaleControllerConsistencyStatefulSet",
            "StaleControllerConsistencyJob",
            "MaxUnavailableStatefulSet",
            "StatefulSetSemanticRevisionComparison",
            "StatefulSetRecreateStrategy",
            "TaintTolerationComparisonOperators",
            "MutableSchedulingDirectivesForSuspendedJobs",
            "WorkloadWithJob",
            "GenericWorkload",
        ] {
            assert!(spec_of(gate).is_some(), "{gate} is an upstream gate");
            assert_ne!(support(gate), Support::NoEffect(NO_EFFECT), "{gate}");
        }
    }
}
