//! The sharded scenarios' run: several replicas of a sharded manager (`--rkcm-shards`) at
//! once, each with its own shard holder over the simulated server's Leases, its own informers
//! (only the held ranges' namespaces), its own workers and its controllers' clients behind the
//! write fence (PodGC's aside: it gates its writes itself), over a workload spread across
//! namespaces. Besides the server's faults (watch delays, stale lists, conflicts, 500s and
//! 504s, crashes at a write), the fault phase hits single replicas: a crash (restarted after
//! 1–15 s under the same identity, as a StatefulSet's pod would be), a clean leave (it hands
//! its ranges over and exits; it joins again 5–30 s later), a cut-off while it keeps running
//! (its requests refused, or hanging and then failing, for 5–30 s) and a stall of its lease
//! renewals (its Lease requests held back 12–40 s and then landing, while its workers run on:
//! its lease expires under it).

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rkcm_runtime::shard::{Ring, ShardConfig};
use rkcm_testkit::sim::nodes::{KubeletConfig, NodeModel};
use rkcm_testkit::sim::server::{Cut, Faults};
use rkcm_testkit::sim::{SimApi, World};

use crate::checks::Checks;
use crate::checks::shards::Terms;
use crate::common::{Outcome, SETTLE, STEP, draw_faults, dump};
use crate::manager::{self, Ctl, Manager};
use crate::scenario::{SHARD_RANGES, Scenario};

/// Where the range Leases live, and their name prefix.
pub const SHARD_NAMESPACE: &str = "kube-system";
pub const SHARD_PREFIX: &str = "rkcm-shard";
/// The leader election's defaults (upstream's kube-controller-manager).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// How long a leaving replica may take to hand over before its process is gone anyway.
const LEAVE_LIMIT_MS: u64 = 30_000;

/// What happens to one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    Crash,
    Leave,
    Cut(Cut),
}

/// One replica slot: a stable identity, the incarnation running under it (if any), and
/// when it starts again.
struct Slot {
    identity: String,
    mgr: Option<Manager>,
    leaving_since: Option<u64>,
    start_at: Option<u64>,
}

fn config(ring: Ring, identity: &str) -> ShardConfig {
    ShardConfig {
        ring,
        namespace: SHARD_NAMESPACE.to_owned(),
        prefix: SHARD_PREFIX.to_owned(),
        identity: identity.to_owned(),
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
        server_selector: true,
    }
}

/// The replica faults of a seed: when, and what (the replica is drawn when it comes).
fn draw_hits(rng: &mut StdRng, fault_ms: u64) -> Vec<(u64, Hit)> {
    let mut hits: Vec<(u64, Hit)> = (0..rng.random_range(2..=6))
        .map(|_| {
            let at = rng.random_range(5_000..fault_ms);
            let hit = match rng.random_range(0..5) {
                0 => Hit::Crash,
                1 => Hit::Leave,
                2 => Hit::Cut(Cut::Refused),
                3 => Hit::Cut(Cut::Hang),
                _ => Hit::Cut(Cut::SlowLeases),
            };
            (at, hit)
        })
        .collect();
    hits.sort_by_key(|(at, _)| *at);
    hits
}

#[allow(clippy::too_many_lines)] // the simulation loop: one step of every part per tick
pub async fn run_async(ctl: Ctl, seed: u64) -> Outcome {
    rkcm_runtime::jitter::seed_thread(Some(seed));
    let base: jiff::Timestamp = jiff::Timestamp::from_second(1_893_456_000).unwrap_or_default();
    let api = SimApi::new(seed, base);
    let start = api.world().start;
    let clock = manager::clock(start, base);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = NodeModel::new(KubeletConfig::default());
    let mut scenario = Scenario::new(ctl);
    let ring = match Ring::new(SHARD_RANGES) {
        Ok(ring) => ring,
        Err(e) => unreachable!("{e}"),
    };
    let mut checks =
        Checks::new(base).with_shard_terms(Terms::new(ring, SHARD_NAMESPACE, SHARD_PREFIX));
    let faults = draw_faults(&mut rng);
    let fault_ms = scenario.fault_secs() * 1000;
    let hits = draw_hits(&mut rng, fault_ms);
    let watch_drops = [0.0, 0.01, 0.04][rng.random_range(0..3)];
    {
        let mut w = api.world();
        w.trace_epochs = true;
        w.trace_line(format!(
            "sim seed {seed} controller {} faults {faults:?} replica faults {hits:?}, watch drops {watch_drops}/step",
            ctl.name()
        ));
        scenario.setup(&mut w, &mut model, &mut rng);
        w.faults = faults;
    }
    let ctls = ctl.with_helpers();
    let mut epochs = 0u64;
    let mut slots: Vec<Slot> = (0..ctl.replicas())
        .map(|i| Slot {
            identity: format!("rkcm-{i}"),
            mgr: None,
            leaving_since: None,
            start_at: Some(0),
        })
        .collect();
    let slots_at_start = u64::try_from(slots.len()).unwrap_or(u64::MAX);
    let mut restarts = 0u32;
    let mut next_hit = 0usize;
    let mut next_op = rng.random_range(1_000..8_000);
    let mut calm = false;
    let mut settled_ms = None;
    let bound = fault_ms + u64::try_from(SETTLE.as_millis()).unwrap_or(u64::MAX);
    let mut last_bookmark = 0;
    loop {
        let now = api.world().now_ms();
        // Replicas due to start (at 0, after a crash, or joining again after a leave).
        for slot in &mut slots {
            if slot.start_at.is_some_and(|at| now >= at) {
                slot.start_at = None;
                epochs += 1;
                if epochs > slots_at_start {
                    restarts += 1;
                }
                api.world().trace_line(format!(
                    "sim replica {} starts as epoch {epochs}",
                    slot.identity
                ));
                slot.mgr = Some(manager::start_with(
                    &api,
                    &clock,
                    &ctls,
                    epochs,
                    Some(config(ring, &slot.identity)),
                ));
            }
        }
        tokio::time::sleep(STEP).await;
        let mut w = api.world();
        let now = w.now_ms();
        model.step(&mut w);
        if now < fault_ms {
            scenario.tick(&mut w, &mut model);
            if now >= next_op {
                scenario.op(&mut w, &mut model, &mut rng);
                next_op = now + rng.random_range(1_000..12_000);
            }
            if watch_drops > 0.0 && rng.random_bool(watch_drops) {
                let resources = ["pods", "replicasets", "deployments", "nodes"];
                let r = resources[rng.random_range(0..resources.len())];
                let expire = rng.random_bool(0.3);
                w.drop_watches(Some(r), expire);
            }
            while let Some(&(at, hit)) = hits.get(next_hit)
                && at <= now
            {
                next_hit += 1;
                hit_replica(&mut w, &mut slots, hit, &mut rng);
            }
        } else if !calm {
            calm = true;
            w.faults = Faults {
                watch_delay_ms: (0, 20),
                ..Faults::default()
            };
            w.trace_line("sim faults stop".into());
            scenario.calm(&mut w, &mut model);
        }
        if now >= last_bookmark + 10_000 {
            last_bookmark = now;
            w.bookmarks();
        }
        for slot in &mut slots {
            tend(&mut w, slot, now, &mut rng);
        }
        let changes = w.drain_changes();
        checks.step(&w, &model, &changes);
        let all_up = slots
            .iter()
            .all(|s| s.mgr.is_some() && s.leaving_since.is_none());
        if calm && all_up && now % 1000 < 250 && scenario.converged(&w, &model).is_ok() {
            settled_ms = Some(now - fault_ms);
            w.trace_line("sim converged".into());
            break;
        }
        if now >= bound {
            let why = scenario
                .converged(&w, &model)
                .err()
                .unwrap_or_else(|| "a replica never came back after the faults stopped".to_owned());
            drop(w);
            checks.liveness(now, why);
            break;
        }
    }
    for slot in &slots {
        if let Some(m) = &slot.mgr {
            m.shutdown.cancel();
        }
    }
    let w = api.world();
    Outcome {
        dump: dump(&w),
        ctl,
        seed,
        broken: checks.broken(),
        trace: w.trace.clone(),
        virtual_ms: w.now_ms(),
        requests: w.requests,
        crashes: w.crashes,
        restarts,
        settled_ms,
    }
}

/// Hits one running replica (drawn by `rng`) with `hit`.
fn hit_replica(w: &mut World, slots: &mut [Slot], hit: Hit, rng: &mut StdRng) {
    let running: Vec<usize> = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.leaving_since.is_none() && s.mgr.as_ref().is_some_and(|m| !w.is_dead(m.epoch))
        })
        .map(|(i, _)| i)
        .collect();
    if running.is_empty() {
        return;
    }
    let slot = &mut slots[running[rng.random_range(0..running.len())]];
    let Some(mgr) = &slot.mgr else {
        return;
    };
    let epoch = mgr.epoch;
    match hit {
        Hit::Crash => {
            w.trace_line(format!(
                "sim replica {} (epoch {epoch}) crashes",
                slot.identity
            ));
            w.kill(epoch);
        }
        Hit::Leave => {
            w.trace_line(format!(
                "sim replica {} (epoch {epoch}) leaves",
                slot.identity
            ));
            mgr.shutdown.cancel();
            slot.leaving_since = Some(w.now_ms());
        }
        Hit::Cut(how) => {
            let span = match how {
                Cut::SlowLeases => rng.random_range(12_000..40_000),
                _ => rng.random_range(5_000..30_000),
            };
            w.cut_off(epoch, how, Duration::from_millis(span));
        }
    }
}

/// Follows one slot's incarnation: a leaving one exits once its holder handed over (or after
/// [`LEAVE_LIMIT_MS`]) and joins again later; a dead one (crashed) is shut down and restarts.
fn tend(w: &mut World, slot: &mut Slot, now: u64, rng: &mut StdRng) {
    let Some(mgr) = &slot.mgr else {
        return;
    };
    let epoch = mgr.epoch;
    if let Some(since) = slot.leaving_since {
        let handed_over = mgr.shards.as_ref().is_none_or(|(_, h)| h.is_finished());
        if handed_over || now >= since + LEAVE_LIMIT_MS {
            // The process exits: whatever it still had in flight is gone with it.
            w.kill(epoch);
            w.trace_line(format!(
                "sim replica {} (epoch {epoch}) left{}",
                slot.identity,
                if handed_over {
                    ""
                } else {
                    " before handing over"
                }
            ));
            slot.mgr = None;
            slot.leaving_since = None;
            slot.start_at = Some(now + rng.random_range(5_000..30_000));
        }
        return;
    }
    if w.is_dead(epoch) {
        mgr.shutdown.cancel();
        slot.mgr = None;
        slot.start_at = Some(now + rng.random_range(1_000..15_000));
    }
}
