//! The envelope's workload: what clusterloader2's load test puts in a namespace, scaled to
//! the pods a namespace holds, and the deterministic choices the phases make (new sizes,
//! order, probe targets). Pure: table-tested without a plane.

use std::time::{Duration, Instant};

/// Pods of the big, medium and small groups (clusterloader2's load test: 250, 30, 5).
pub const BIG: usize = 250;
pub const MEDIUM: usize = 30;
pub const SMALL: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
}

impl Kind {
    /// The name prefix of the kind's objects; the latency analysis tells a pod's owner
    /// kind by it (a Deployment's pods belong to its ReplicaSet `deploy-…-<hash>`).
    pub fn prefix(self) -> &'static str {
        match self {
            Kind::Deployment => "deploy",
            Kind::StatefulSet => "sts",
            Kind::DaemonSet => "ds",
            Kind::Job => "job",
            Kind::CronJob => "cron",
        }
    }
}

/// The controller that answers a change to a pod whose owner is named `owner` (see
/// [`Kind::prefix`]): `None` for an owner of none of the run's kinds.
pub fn classify_owner(owner: &str) -> Option<&'static str> {
    let prefix = owner.split('-').next()?;
    Some(match prefix {
        "deploy" => "replicaset",
        "sts" => "statefulset",
        "ds" => "daemonset",
        "job" => "job",
        _ => return None,
    })
}

/// One object of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub kind: Kind,
    /// Index of its namespace in the run (`<index>-<run namespace>`).
    pub ns: usize,
    pub name: String,
    /// Replicas (Deployment, StatefulSet), completions = parallelism (Job), 1 (CronJob's
    /// Jobs); for the DaemonSet the nodes of the run.
    pub pods: usize,
}

impl Workload {
    /// A one-pod Job in the run's first namespace (the probes' and the churn's).
    pub fn one_pod_job(name: String) -> Self {
        Self {
            kind: Kind::Job,
            ns: 0,
            name,
            pods: 1,
        }
    }
}

/// The objects of `namespaces` namespaces of `pods_per_ns` pods each, plus one DaemonSet
/// over `nodes` nodes (in namespace 0). Per namespace, as the load test splits it: a quarter
/// of the pods each in big, medium and small Deployments; a tenth in StatefulSets and a tenth
/// in Jobs (half medium, half small, each); two CronJobs every minute. A group whose share is
/// smaller than one object of its size has none.
pub fn plan(namespaces: usize, pods_per_ns: usize, nodes: usize) -> Vec<Workload> {
    let groups: [(Kind, &str, usize, usize); 7] = [
        (Kind::Deployment, "big", BIG, pods_per_ns / 4),
        (Kind::Deployment, "medium", MEDIUM, pods_per_ns / 4),
        (Kind::Deployment, "small", SMALL, pods_per_ns / 4),
        (Kind::StatefulSet, "medium", MEDIUM, pods_per_ns / 20),
        (Kind::StatefulSet, "small", SMALL, pods_per_ns / 20),
        (Kind::Job, "medium", MEDIUM, pods_per_ns / 20),
        (Kind::Job, "small", SMALL, pods_per_ns / 20),
    ];
    let mut out = Vec::new();
    for ns in 0..namespaces {
        for (kind, size, pods, share) in groups {
            for i in 0..share / pods {
                out.push(Workload {
                    kind,
                    ns,
                    name: format!("{}-{size}-{i}", kind.prefix()),
                    pods,
                });
            }
        }
        for i in 0..2 {
            out.push(Workload {
                kind: Kind::CronJob,
                ns,
                name: format!("{}-{i}", Kind::CronJob.prefix()),
                pods: 1,
            });
        }
    }
    if nodes > 0 {
        out.push(Workload {
            kind: Kind::DaemonSet,
            ns: 0,
            name: format!("{}-0", Kind::DaemonSet.prefix()),
            pods: nodes,
        });
    }
    out
}

/// Pods the workloads of `plan` run at once once created (CronJobs' short Jobs left out).
pub fn steady_pods(plan: &[Workload]) -> usize {
    plan.iter()
        .filter(|w| w.kind != Kind::CronJob)
        .map(|w| w.pods)
        .sum()
}

/// splitmix64: the phases' choices are the same in every run and for both managers.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

/// The size a workload of `pods` is scaled to: between half and one and a half times it,
/// never the same and never 0 (the load test's scale phase).
pub fn scaled(pods: usize, rng: &mut Rng) -> usize {
    let low = pods.div_ceil(2).max(1);
    let high = pods + pods / 2;
    let span = high - low + 1;
    let n = low + rng.below(span);
    if n == pods {
        if n < high { n + 1 } else { n - 1 }.max(1)
    } else {
        n
    }
}

/// Paces a phase at a fixed pod throughput: each step waits until the pods handed out so far
/// are due at `rate` a second since the pace began.
pub struct Pace {
    rate: f64,
    start: Instant,
    spent: f64,
}

impl Pace {
    pub fn new(rate: f64) -> Self {
        Self {
            rate: rate.max(0.001),
            start: Instant::now(),
            spent: 0.0,
        }
    }

    /// When the next `pods` may go (the pace's account is charged now).
    pub fn due(&mut self, pods: usize) -> Instant {
        let at = self.start + Duration::from_secs_f64(self.spent / self.rate);
        self.spent += pods as f64;
        at
    }

    pub async fn take(&mut self, pods: usize) {
        tokio::time::sleep_until(self.due(pods).into()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(plan: &[Workload], kind: Kind, pods: usize) -> usize {
        plan.iter()
            .filter(|w| w.kind == kind && w.pods == pods)
            .count()
    }

    #[test]
    fn a_namespace_of_3000_pods_holds_the_load_tests_mix() {
        let p = plan(1, 3_000, 100);
        assert_eq!(count(&p, Kind::Deployment, 250), 3);
        assert_eq!(count(&p, Kind::Deployment, 30), 25);
        assert_eq!(count(&p, Kind::Deployment, 5), 150);
        assert_eq!(count(&p, Kind::StatefulSet, 30), 5);
        assert_eq!(count(&p, Kind::StatefulSet, 5), 30);
        assert_eq!(count(&p, Kind::Job, 30), 5);
        assert_eq!(count(&p, Kind::Job, 5), 30);
        assert_eq!(count(&p, Kind::CronJob, 1), 2);
        assert_eq!(count(&p, Kind::DaemonSet, 100), 1);
        // 750 × 3 + 150 × 4 + 100 daemon pods.
        assert_eq!(steady_pods(&p), 2_950);
    }

    #[test]
    fn names_are_unique_per_namespace_and_groups_too_small_are_left_out() {
        let p = plan(2, 600, 0);
        assert_eq!(count(&p, Kind::Deployment, 250), 0);
        assert_eq!(count(&p, Kind::Deployment, 30), 2 * 5);
        assert_eq!(count(&p, Kind::StatefulSet, 30), 2);
        assert_eq!(count(&p, Kind::DaemonSet, 0), 0);
        let mut keys: Vec<(usize, &str)> = p.iter().map(|w| (w.ns, w.name.as_str())).collect();
        let n = keys.len();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), n);
        assert!(p.iter().any(|w| w.name == "deploy-medium-4" && w.ns == 1));
    }

    #[test]
    fn owners_are_classified_by_their_prefix() {
        assert_eq!(
            classify_owner("deploy-small-3-6d4cf56db6"),
            Some("replicaset")
        );
        assert_eq!(classify_owner("sts-medium-0"), Some("statefulset"));
        assert_eq!(classify_owner("ds-0"), Some("daemonset"));
        assert_eq!(classify_owner("job-small-1"), Some("job"));
        assert_eq!(classify_owner("cron-0-29123"), None);
        assert_eq!(classify_owner("web"), None);
    }

    #[test]
    fn scaled_sizes_stay_within_half_and_one_and_a_half() {
        let mut rng = Rng::new(7);
        for pods in [1, 2, 5, 30, 250] {
            for _ in 0..200 {
                let n = scaled(pods, &mut rng);
                assert!(n >= pods.div_ceil(2).max(1), "{pods} -> {n}");
                assert!(n <= (pods + pods / 2).max(2), "{pods} -> {n}");
                assert!(n != pods || pods == 1 && n == 1, "{pods} -> {n}");
            }
        }
    }

    #[test]
    fn the_same_seed_makes_the_same_choices() {
        let (mut a, mut b) = (Rng::new(41), Rng::new(41));
        let mut x: Vec<u32> = (0..50).collect();
        let mut y = x.clone();
        a.shuffle(&mut x);
        b.shuffle(&mut y);
        assert_eq!(x, y);
        assert_ne!(x, (0..50).collect::<Vec<u32>>());
    }

    #[test]
    fn pace_hands_out_pods_at_its_rate() {
        let mut pace = Pace::new(20.0);
        let start = pace.start;
        assert_eq!(pace.due(250), start);
        // 250 pods at 20 a second: the next step is due 12.5 s after the start.
        assert_eq!(pace.due(5), start + Duration::from_millis(12_500));
        assert_eq!(pace.due(5), start + Duration::from_millis(12_750));
    }
}
