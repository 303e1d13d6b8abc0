//! What every run shares, one manager or sharded replicas: the time step and settle bound,
//! the outcome, the seed's faults, the end-state dump.

use std::time::Duration;

use rand::Rng;
use rand::rngs::StdRng;
use rkcm_testkit::sim::server::Faults;

use crate::checks::Broken;
use crate::manager::Ctl;

/// The virtual time between two steps.
pub const STEP: Duration = Duration::from_millis(250);
/// After faults stop, every object must converge within this much virtual time: more than
/// the Job controller's longest pod-failure backoff (6 minutes, upstream's
/// `MaxJobPodFailureBackOff`), which a Job with several failed pods waits out.
pub const SETTLE: Duration = Duration::from_secs(420);

/// What one run found.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub ctl: Ctl,
    pub seed: u64,
    pub broken: Vec<Broken>,
    /// The step-by-step trace: every write with its author, every fault and operation.
    pub trace: Vec<String>,
    pub virtual_ms: u64,
    pub requests: u64,
    pub crashes: u32,
    pub restarts: u32,
    /// Virtual time from the end of faults to convergence (`None`: did not converge).
    pub settled_ms: Option<u64>,
    /// The objects at the end, one line each (pods, workloads, nodes), for `--dump`.
    pub dump: Vec<String>,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.broken.is_empty()
    }

    /// A digest of everything a run produced (trace, end state, findings): equal for two runs
    /// of one seed unless something outside the seed (a hash order, the wall clock, a thread)
    /// leaked into the schedule. FNV-1a, so it is the same on every machine and build.
    pub fn digest(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let broken = self.broken.iter().map(ToString::to_string);
        for line in self
            .trace
            .iter()
            .cloned()
            .chain(self.dump.iter().cloned())
            .chain(broken)
        {
            for b in line.bytes().chain(std::iter::once(b'\n')) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }
}

/// The faults of a seed: each knob drawn from a few levels, so that some seeds are calm in
/// one dimension and harsh in another.
pub(crate) fn draw_faults(rng: &mut StdRng) -> Faults {
    let pick = |rng: &mut StdRng, levels: &[f64]| levels[rng.random_range(0..levels.len())];
    Faults {
        watch_delay_ms: (0, [20u64, 500, 3_000, 10_000][rng.random_range(0..4)]),
        stale_list: pick(rng, &[0.0, 0.3, 0.7]),
        stale_window: Duration::from_secs(10),
        conflict: pick(rng, &[0.0, 0.05, 0.2]),
        crash_on_write: pick(rng, &[0.0, 0.01, 0.04]),
        crash_budget: rng.random_range(0..=4),
        reject_create: pick(rng, &[0.0, 0.05]),
        server_error: pick(rng, &[0.0, 0.02]),
        timeout_creates: false,
    }
}

/// One line per object at the end of a run.
pub(crate) fn dump(w: &rkcm_testkit::sim::World) -> Vec<String> {
    use crate::scenario::{is_ready, is_terminating, s};
    let mut out = Vec::new();
    for r in [
        "nodes",
        "replicasets",
        "deployments",
        "statefulsets",
        "daemonsets",
        "jobs",
        "cronjobs",
        "pods",
    ] {
        for o in w.list(r) {
            let mut line = format!(
                "{r} {}/{} uid={} rv={}",
                s(&o, &["metadata", "namespace"]),
                s(&o, &["metadata", "name"]),
                s(&o, &["metadata", "uid"]),
                s(&o, &["metadata", "resourceVersion"])
            );
            if r == "pods" {
                line += &format!(
                    " node={} phase={} ready={} terminating={} finalizers={} owner={}",
                    s(&o, &["spec", "nodeName"]),
                    s(&o, &["status", "phase"]),
                    is_ready(&o),
                    is_terminating(&o),
                    o["metadata"]["finalizers"],
                    crate::scenario::controller_of(&o)
                        .map(|c| c.1)
                        .unwrap_or_default()
                );
            } else {
                line += &format!(
                    " annotations={} spec={} status={}",
                    o["metadata"]["annotations"], o["spec"], o["status"]
                );
            }
            out.push(line);
        }
    }
    out
}
