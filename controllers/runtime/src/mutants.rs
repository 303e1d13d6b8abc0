//! Deliberate bugs for the deterministic simulation's mutation check (`make sim-mutants`,
//! `sim/mutants.sh`): each is one `if mutants::on("name")` in a controller crate, chosen at
//! run time by `rkcm-sim --mutant NAME`, so one simulator build carries every mutant.
//!
//! Only the `sim-mutants` feature (enabled by the sim crate alone) compiles the switch in.
//! Without it [`on`] is a `const fn` that answers `false`, so a build of the controller-manager
//! alone (`cargo build -p rkcm`) carries no mutant; with it, no mutant is on until
//! [`select`] is called, which only the simulator does.

/// Every mutant the controller crates know, by name (what `rkcm-sim --mutant` accepts).
pub const ALL: &[&str] = &[
    "no-expectations",
    "no-stale-guard",
    "podgc-no-uid-precondition",
    "podgc-orphans-from-cache",
    "podgc-out-of-service-without-taint",
    "sts-early-replacement",
    "sts-force-delete-cut-off",
    "sts-recover-ready-pod",
    "job-count-before-finalizer",
    "cronjob-job-name-from-clock",
    "daemonset-replace-terminating",
    "deployment-ignore-min-available",
    "deployment-rollback-ignores-opt-in",
    "deployment-rollback-loop",
    "deployment-rollback-to-unavailable",
    "deployment-keeps-previous-rollout-condition",
    "ttl-no-version-precondition",
    "shard-range-without-lease",
    "shard-take-without-fence",
];

#[cfg(feature = "sim-mutants")]
static SELECTED: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Whether the mutant `name` is switched on for this process.
#[cfg(feature = "sim-mutants")]
pub fn on(name: &str) -> bool {
    debug_assert!(ALL.contains(&name), "unknown mutant {name}");
    SELECTED.get().is_some_and(|s| *s == name)
}

/// Whether the mutant `name` is switched on: never, in a build without `sim-mutants`.
#[cfg(not(feature = "sim-mutants"))]
#[inline(always)]
pub const fn on(_name: &str) -> bool {
    false
}

/// Switches the mutant `name` on for the rest of the process (once; the simulator calls it
/// before its run). An error for a name not in [`ALL`], a second selection, or a build
/// without the `sim-mutants` feature.
pub fn select(name: &str) -> Result<(), String> {
    let Some(known) = ALL.iter().find(|m| **m == name) else {
        return Err(format!(
            "unknown mutant {name:?}; known: {}",
            ALL.join(", ")
        ));
    };
    #[cfg(feature = "sim-mutants")]
    {
        SELECTED
            .set(known)
            .map_err(|_| format!("a mutant is already selected, not {known}"))
    }
    #[cfg(not(feature = "sim-mutants"))]
    {
        Err(format!(
            "mutant {known}: this build has no mutants (feature sim-mutants of rkcm-runtime)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        let mut names = ALL.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
    }

    #[test]
    fn unknown_names_are_refused_and_none_is_on_by_default() {
        assert!(select("no-such-mutant").is_err());
        assert!(ALL.iter().all(|m| !on(m)));
    }
}
