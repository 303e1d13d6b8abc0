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
        let seed = 7;
        let (first, second) = (traced(ctl, seed)?, traced(ctl, seed)?);
        assert!(
            first.lines().count() > 20,
            "{}: trace too short",
            ctl.name()
        );
        if let Some(diff) = first_difference(&first, &second) {
            panic!(
                "{} seed {seed} ran differently in two processes: {diff} ({})",
                ctl.name(),
                replay_hint(ctl, seed)
            );
        }
    }
    Ok(())
}

/// One seed's trace and end state as a fresh `rkcm-sim --seed` process prints them; not the
/// summary line with its wall-clock rate.
fn traced(ctl: Ctl, seed: u64) -> anyhow::Result<String> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rkcm-sim"))
        .args(["--controller", ctl.name(), "--seed", &seed.to_string()])
        .args(["--trace", "--dump"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(text
        .lines()
        .filter(|l| !l.starts_with(&format!("{}: ", ctl.name())))
        .collect::<Vec<_>>()
        .join("\n"))
}

/// The first line where two traces differ, both versions of it.
fn first_difference(a: &str, b: &str) -> Option<String> {
    let (mut a, mut b) = (a.lines(), b.lines());
    for n in 1.. {
        match (a.next(), b.next()) {
            (None, None) => return None,
            (x, y) if x == y => {}
            (x, y) => {
                let (x, y) = (x.unwrap_or("(end)"), y.unwrap_or("(end)"));
                return Some(format!("first difference at line {n}:\n  {x}\n  {y}"));
            }
        }
    }
    None
}

/// Seeds that once ran differently from one process to the next although nothing in their
/// scenario is random outside the seed; each runs in several fresh processes, which must all
/// print the same trace. A difference that shows in some processes only needs several to be
/// caught reliably.
const REPLAYED_ACROSS_PROCESSES: &[(Ctl, u64, &str)] = &[
    // After a manager restart the TTL and Job controllers both waited for the Job informer's
    // sync on a tokio `watch` channel, which wakes its waiters in an order drawn from tokio's
    // unseeded generator: which controller wrote first at 52.5 s changed between processes.
    (
        Ctl::TtlAfterFinished,
        8,
        "sync waiters woken in random order",
    ),
    (
        Ctl::TtlAfterFinished,
        6,
        "sync waiters woken in random order",
    ),
];

/// How many fresh processes run each seed of [`REPLAYED_ACROSS_PROCESSES`].
const PROCESSES: usize = 5;

/// Every seed of [`REPLAYED_ACROSS_PROCESSES`] prints the same trace in every process.
#[test]
fn seeds_replay_across_processes() -> anyhow::Result<()> {
    let mut failures = Vec::new();
    for &(ctl, seed, found) in REPLAYED_ACROSS_PROCESSES {
        let first = traced(ctl, seed)?;
        for run in 2..=PROCESSES {
            if let Some(diff) = first_difference(&first, &traced(ctl, seed)?) {
                failures.push(format!(
                    "{} seed {seed} ({found}): process {run} of {PROCESSES} ran differently from \
                     the first, {diff}\n  ({})",
                    ctl.name(),
                    replay_hint(ctl, seed)
                ));
                break;
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

/// The code the simulation runs never leaves a choice to tokio's random generator, which the
/// seed does not fix (tokio seeds it only under `--cfg tokio_unstable`): `select!` is always
/// `biased` (a tie between ready branches goes to the first), and no `tokio::sync::watch`
/// (it wakes its waiters in a random order; the informers use `cache::signal` instead).
#[test]
fn simulated_code_leaves_no_choice_to_tokio() -> anyhow::Result<()> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<_> = [
        "runtime",
        "replicaset",
        "deployment",
        "statefulset",
        "daemonset",
        "job",
        "cronjob",
        "podgc",
        "ttlafterfinished",
    ]
    .iter()
    .map(|c| root.join("controllers").join(c).join("src"))
    .collect();
    dirs.push(root.join("controllers/testkit/src/sim"));
    dirs.push(root.join("sim/src"));
    let mut found = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            let code: Vec<(usize, &str)> = text
                .lines()
                .enumerate()
                .map(|(i, l)| (i + 1, l.trim()))
                .filter(|(_, l)| !l.is_empty() && !l.starts_with("//"))
                .collect();
            for (k, &(n, line)) in code.iter().enumerate() {
                let unbiased = line.ends_with("select! {")
                    && code.get(k + 1).is_none_or(|(_, next)| *next != "biased;");
                if unbiased || line.contains("sync::watch") {
                    let shown = path.strip_prefix(&root).unwrap_or(&path).display();
                    found.push(format!("{shown}:{n}: {line}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a choice left to tokio's unseeded generator:\n{}",
        found.join("\n")
    );
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
    // never rolled out (NotConvergedAfterFaults; upstream kubernetes/kubernetes#102551).
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
    // The StatefulSet stuck-rollout recovery deleted a second pod while one it had recovered
    // was still terminating on a dead node (StatefulSetRecoveryUnsafe); and a pod left
    // alone while its node was unreachable was never judged again once the node came back
    // (NotConvergedAfterFaults). Fixed: none while a pod of the set is terminating; a pod
    // left for its node is judged again every 30 s.
    (Ctl::StatefulSet, 48, "recovery: two pods at once"),
    (Ctl::StatefulSet, 120, "recovery: two pods at once"),
    (Ctl::StatefulSet, 125, "recovery: two pods at once"),
    (Ctl::StatefulSet, 101, "recovery: node came back, no sync"),
    // The opted-in rollback on progress deadline returned to the revision the failed rollout
    // started from, which a person had left before it ever worked (a broken template): it
    // then stayed there, as its rule says for a rollback's own result (NotConvergedAfterFaults).
    // Fixed: the target is the newest old revision with available pods.
    (
        Ctl::DeploymentRollback,
        130,
        "rollback to a revision that never worked",
    ),
    (
        Ctl::DeploymentRollback,
        221,
        "rollback to a revision that never worked",
    ),
    // A person's template, set before the rollback's own revision was assigned, got that
    // number and was taken for the rollback's result, never to be rolled back. Fixed: the
    // rollback's result is its target's reused ReplicaSet.
    (
        Ctl::DeploymentRollback,
        326,
        "person's rollout taken for the rollback",
    ),
    // The status write with NewReplicaSetCreated was lost; the next sync kept the previous
    // rollout's NewReplicaSetAvailable, which never times out, so a broken rollout never
    // passed its deadline (upstream's Deployment controller does the same). Fixed:
    // FoundNewReplicaSet replaces a NewReplicaSetAvailable about another ReplicaSet.
    (
        Ctl::DeploymentRollback,
        117,
        "previous rollout's condition kept",
    ),
    // A conflict scaling an old ReplicaSet down (a cache seconds behind) was swallowed, as
    // upstream does, and the status's progress re-check near the deadline requeued at the
    // queue's base delay after each successful sync: a PUT every 5 ms (WriteRetryStorm).
    // Fixed: the conflict fails the sync, which backs off.
    (
        Ctl::DeploymentRollback,
        151,
        "old ReplicaSet scale-down conflict retried every 5 ms",
    ),
    // A scale-up answered 504 after it landed; the next sync, on a cache ten seconds behind,
    // sized a new ReplicaSet as if the write had not happened (DeploymentAboveSurge).
    // Fixed: after a ReplicaSet write that may have landed or met a newer version, the
    // controller reads the ReplicaSet and the stale-cache guard waits for that version.
    (Ctl::DeploymentRollback, 66, "scale-up landed behind a 504"),
    // Not a controller defect: the simulated server dropped the metadata of a status update,
    // which the real one keeps for workload resources, so the Deployment's revision
    // annotation (written with its status, as upstream does) never landed and every sync
    // wrote the status again (WriteRetryStorm under conflicts). Fixed in the simulator.
    (
        Ctl::DeploymentRollback,
        224,
        "revision annotation written with the status",
    ),
    // Not a controller defect: a failing Job counted as failed (and deleted) a pod its lagging
    // cache still showed running though it had just succeeded, as upstream does; the checker
    // now allows for it (JobCountAboveTerminatedPods).
    (
        Ctl::TtlAfterFinished,
        607,
        "checker: succeeded pod deleted by a failing Job",
    ),
    // A ReplicaSet's pod created and deleted before the replica's pod cache saw it (a
    // handover relisted every cache meanwhile) left its expectations unmet; they expired
    // after 5 minutes, but no event came to sync the ReplicaSet again (NotConvergedAfterFaults).
    // The ReplicaSet controller now looks again when held expectations expire.
    (Ctl::Sharded2, 287, "expectations held past their expiry"),
    (Ctl::Sharded3, 264, "expectations held past their expiry"),
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

/// The sharded scenarios (named only, so not in the set above): seeds 0..15 of two and of
/// three replicas pass, and a seed replays exactly, in this process and in a fresh one.
#[test]
fn sharded_seeds_pass_and_replay() -> anyhow::Result<()> {
    for ctl in Ctl::NAMED_ONLY {
        if let Some(report) = simulate(&["--controller", ctl.name(), "--seeds", "15"])? {
            panic!("{report}");
        }
        let (a, b) = (run(ctl, 3)?, run(ctl, 3)?);
        assert!(a.trace.len() > 20, "{} seed 3: trace too short", ctl.name());
        assert_eq!(
            a.digest(),
            b.digest(),
            "{} seed 3 ran differently twice ({})",
            ctl.name(),
            replay_hint(ctl, 3)
        );
        let (first, second) = (traced(ctl, 7)?, traced(ctl, 7)?);
        if let Some(diff) = first_difference(&first, &second) {
            panic!(
                "{} seed 7 ran differently in two processes: {diff} ({})",
                ctl.name(),
                replay_hint(ctl, 7)
            );
        }
    }
    Ok(())
}

/// The sharded mutant is caught at seed 3 by the lease-term check, which seed 3 passes
/// without it (a stalled holder's session runs out under it there first).
#[test]
fn sharded_mutant_is_caught_by_the_lease_term_check() -> anyhow::Result<()> {
    let args = [
        "--controller",
        "sharded-2",
        "--seed",
        "3",
        "--mutant",
        "shard-range-without-lease",
        "--expect",
        "ShardWriteOutsideLeaseTerm",
    ];
    let report = simulate(&args)?.unwrap_or_default();
    assert!(
        report.contains("ShardWriteOutsideLeaseTerm"),
        "mutant not caught: {report}"
    );
    assert!(
        simulate(&["--controller", "sharded-2", "--seed", "3"])?.is_none(),
        "seed 3 fails without the mutant"
    );
    Ok(())
}

/// The member-session fence: without it a late renewal of a session someone took ranges
/// from keeps the session's holder on them (sharded-3 seed 4; seed 1 before the replicas
/// listed the namespaces for their first takes, seed 6 before sessions were renewed every
/// 5 s instead of every round), which seed 4 passes.
#[test]
fn taking_without_the_fence_is_caught_by_the_lease_term_check() -> anyhow::Result<()> {
    let args = [
        "--controller",
        "sharded-3",
        "--seed",
        "4",
        "--mutant",
        "shard-take-without-fence",
        "--expect",
        "ShardLeaseTermsOverlap",
    ];
    let report = simulate(&args)?.unwrap_or_default();
    assert!(
        report.contains("ShardLeaseTermsOverlap"),
        "mutant not caught: {report}"
    );
    assert!(
        simulate(&["--controller", "sharded-3", "--seed", "4"])?.is_none(),
        "seed 4 fails without the mutant"
    );
    Ok(())
}

/// The fault model answers a create that landed with a 504 (the client cannot tell it
/// happened) in the scenarios without the ReplicaSet controller: a Job seed's trace shows one
/// for a pod create, and the seed still passes.
#[test]
fn a_create_that_landed_can_time_out() -> anyhow::Result<()> {
    let out = run(Ctl::Job, 12)?;
    assert!(
        out.trace
            .iter()
            .any(|l| l.contains("sim 504 after job-controller POST pods")),
        "no 504 after a landed pod create ({})",
        replay_hint(Ctl::Job, 12)
    );
    assert!(
        out.passed(),
        "{:?} ({})",
        out.broken,
        replay_hint(Ctl::Job, 12)
    );
    Ok(())
}

/// `--mutant` switches one deliberate bug on, and `--expect` fails a seed only when that
/// invariant broke: the DaemonSet mutant is caught by the DaemonSet check at seed 0, and a
/// name the registry does not know is refused.
#[test]
fn mutants_are_chosen_at_run_time() -> anyhow::Result<()> {
    let args = [
        "--controller",
        "daemonset",
        "--seed",
        "0",
        "--mutant",
        "daemonset-replace-terminating",
        "--expect",
        "DaemonSetTwoLivePodsOnNode",
    ];
    let report = simulate(&args)?.unwrap_or_default();
    assert!(
        report.contains("DaemonSetTwoLivePodsOnNode"),
        "mutant not caught: {report}"
    );
    assert!(
        simulate(&["--controller", "daemonset", "--seed", "0"])?.is_none(),
        "seed 0 fails without the mutant"
    );
    assert!(simulate(&["--seed", "0", "--mutant", "no-such-mutant"])?.is_some());
    Ok(())
}
