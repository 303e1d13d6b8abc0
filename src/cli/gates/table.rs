//! Every feature gate kube-controller-manager registers, per supported minor (v1.34 to
//! v1.37), with its default, stage and lock, and the dependencies between them: upstream's
//! `--feature-gates` registry (gates of `pkg/features/kube_features.go`, client-go
//! `features/known_features.go`, controller-manager `pkg/features/kube_features.go`,
//! component-base logging, metrics and zpages) at that minor's emulation version. The
//! `v1_<minor>.rs` tables are generated from each version's source by `e2e/gen-gates.sh`
//! and checked against that version's binary (`upstream.rs`). Data only; what rkcm does with
//! each gate is [`super::support`].

use super::spec::GateSpec;

mod v1_34;
mod v1_35;
mod v1_36;
mod v1_37;

/// One minor's registry: its gates (sorted by name) and their dependencies.
#[derive(Debug)]
pub struct Registry {
    /// The Kubernetes minor (34 for v1.34).
    pub minor: u32,
    /// The patch release the table was generated from.
    pub version: &'static str,
    pub gates: &'static [GateSpec],
    /// `(gate, gates it needs)`: enabling a gate whose dependency is disabled is an error
    /// (component-base `featuregate` `AddDependencies`, from v1.35).
    pub dependencies: &'static [(&'static str, &'static [&'static str])],
}

/// Every supported minor's registry, oldest first.
pub static REGISTRIES: [Registry; 4] = [
    Registry {
        minor: 34,
        version: "v1.34.4",
        gates: v1_34::FEATURE_GATES,
        dependencies: v1_34::DEPENDENCIES,
    },
    Registry {
        minor: 35,
        version: "v1.35.4",
        gates: v1_35::FEATURE_GATES,
        dependencies: v1_35::DEPENDENCIES,
    },
    Registry {
        minor: 36,
        version: "v1.36.3",
        gates: v1_36::FEATURE_GATES,
        dependencies: v1_36::DEPENDENCIES,
    },
    Registry {
        minor: 37,
        version: "v1.37.1",
        gates: v1_37::FEATURE_GATES,
        dependencies: v1_37::DEPENDENCIES,
    },
];

/// The newest minor's gates and dependencies.
pub const NEWEST_GATES: &[GateSpec] = v1_37::FEATURE_GATES;
#[cfg(test)]
pub const NEWEST_DEPENDENCIES: &[(&str, &[&str])] = v1_37::DEPENDENCIES;

/// The newest minor rkcm knows: its registry applies until the server's version is read.
pub const NEWEST_MINOR: u32 = 37;
/// The oldest minor rkcm supports.
pub const OLDEST_MINOR: u32 = 34;

/// The registry of `minor`, if rkcm supports it.
pub fn registry(minor: u32) -> Option<&'static Registry> {
    REGISTRIES.iter().find(|r| r.minor == minor)
}

/// The newest registry (v1.37's).
pub fn newest() -> &'static Registry {
    &REGISTRIES[REGISTRIES.len() - 1]
}
