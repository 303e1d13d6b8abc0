//! The simulation in `make test`: one seed replays exactly, and a fixed seed set passes for
//! every controller. A failure names its seed and the command that replays it.

use rkcm_sim::{Ctl, run};

fn replay_hint(ctl: Ctl, seed: u64) -> String {
    format!(
        "replay: cargo run -p rkcm-sim -- --controller {} --seed {seed} --trace",
        ctl.name()
    )
}

/// Two runs of one seed give the same trace, end state and findings: once in this process,
/// back to back, and once more in a fresh process each, as `--seed` replays it. Fails if a
/// hash map's order, the wall clock or anything else outside the seed reaches the schedule.
#[test]
fn a_seed_replays_exactly() -> anyhow::Result<()> {
    for ctl in Ctl::ALL {
        for seed in [3, 11] {
            let a = run(ctl, seed)?;
            let b = run(ctl, seed)?;
            assert!(
                a.trace.len() > 20,
                "{} seed {seed}: trace too short",
                ctl.name()
            );
            assert_eq!(
                a.digest(),
                b.digest(),
                "{} seed {seed} ran differently twice ({})",
                ctl.name(),
                replay_hint(ctl, seed)
            );
        }
        let seed = "7";
        let traced = || -> anyhow::Result<String> {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_rkcm-sim"))
                .args([
                    "--controller",
                    ctl.name(),
                    "--seed",
                    seed,
                    "--trace",
                    "--dump",
                ])
                .output()?;
            // The trace and the end state; not the summary line with its wall-clock rate.
            let text = String::from_utf8_lossy(&out.stdout);
            Ok(text
                .lines()
                .filter(|l| !l.starts_with(&format!("{}: ", ctl.name())))
                .collect::<Vec<_>>()
                .join("\n"))
        };
        let (first, second) = (traced()?, traced()?);
        assert!(
            first.lines().count() > 20,
            "{}: trace too short",
            ctl.name()
        );
        assert!(
            first == second,
            "{} seed {seed} ran differently in two processes",
            ctl.name()
        );
    }
    Ok(())
}

/// Seeds that found a defect, kept as regression tests (run here even when they lie outside
/// the fixed range): the controller, the seed, the invariant it broke and the fix.
const REGRESSIONS: &[(Ctl, u64, &str)] = &[
    // A sync on a ReplicaSet cache that lagged behind the new ReplicaSet the controller had
    // just created sized the others past replicas + maxSurge (DeploymentAboveSurge). Fixed by
    // the Deployment controller's stale-cache guard.
    (Ctl::Deployment, 19, "ReplicaSet cache behind a create"),
    (Ctl::Deployment, 24, "ReplicaSet cache behind a create"),
    (Ctl::Deployment, 35, "ReplicaSet cache behind a create"),
    // The only active ReplicaSet had the right size but replica annotations of an
    // interrupted proportional scale: every sync took the scaling path and the next template
    // never rolled out (NotConvergedAfterFaults; upstream kubernetes/kubernetes#138036).
    (Ctl::Deployment, 25, "stale desired-replicas annotation"),
    // The ReplicaSet cache had applied no object yet (the ADDED event of the controller's own
    // first ReplicaSet was still delayed) and the guard took "no version" for current: a
    // second full-size ReplicaSet (DeploymentAboveSurge). Fixed in the guard: an empty cache
    // holds the sync.
    (Ctl::Deployment, 101, "guard passed on an empty cache"),
    (Ctl::Deployment, 121, "guard passed on an empty cache"),
    // A crash between creating a CronJob's Job and writing its status left the slot
    // unrecorded; the Job was deleted and the slot ran again (CronJobSlotTwice). Fixed: a
    // forgotten running child's scheduled time is recorded as started.
    (Ctl::CronJob, 142, "Job created, status write lost"),
    // A Job deleted before its new pod's ADDED event arrived: the pod, whose controller the
    // cache no longer knew, kept the tracking finalizer for ever (upstream's addPod sends it
    // to the orphan worker; rkcm's shared child handler dropped it).
    (Ctl::CronJob, 43, "pod of a deleted Job kept its finalizer"),
    // Not a controller defect: a failing Job counted as failed (and deleted) a pod its lagging
    // cache still showed running though it had just succeeded, as upstream does; the checker
    // now allows for it (JobCountAboveTerminatedPods).
    (
        Ctl::TtlAfterFinished,
        607,
        "checker: succeeded pod deleted by a failing Job",
    ),
];

/// Runs the simulator binary (each seed in its own process, as `--seed` replays it); the
/// failures it printed, if it failed.
fn simulate(args: &[&str]) -> anyhow::Result<Option<String>> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rkcm-sim"))
        .args(args)
        .output()?;
    if out.status.success() {
        return Ok(None);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("FAIL") || l.starts_with("  "))
        .collect();
    Ok(Some(format!(
        "rkcm-sim {} failed ({}):\n{}",
        args.join(" "),
        out.status,
        report.join("\n")
    )))
}

/// Every regression seed passes.
#[test]
fn regression_seeds_pass() -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for &(ctl, seed, found) in REGRESSIONS {
        let seed_arg = seed.to_string();
        if let Some(report) = simulate(&["--controller", ctl.name(), "--seed", &seed_arg])? {
            failures.push(format!("regression ({found}): {report}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// The fixed seed set of `make test`: every controller, seeds 0..40, no invariant broken and
/// every object converged after the faults.
#[test]
fn fixed_seed_set_passes() -> anyhow::Result<()> {
    if let Some(report) = simulate(&["--controller", "all", "--seeds", "40"])? {
        panic!("{report}");
    }
    Ok(())
}
