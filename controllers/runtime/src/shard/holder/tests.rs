//! The holder against the simulated API server, on paused time: replicas split the ring,
//! never hold one range in overlapping windows, and take a crashed replica's ranges only once
//! its lease ran out.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use rkcm_testkit::sim::SimApi;
use tokio::task::JoinHandle;

use super::{ShardConfig, Shards};
use crate::CancellationToken;
use crate::clock::Clock;
use crate::shard::Ring;

const LEASE: Duration = Duration::from_secs(15);
const RENEW: Duration = Duration::from_secs(10);
const RETRY: Duration = Duration::from_secs(2);

fn base() -> jiff::Timestamp {
    "2030-01-01T00:00:00Z".parse().expect("timestamp")
}

/// A wall clock that moves with tokio's paused time, so that every renewal writes a new
/// `renewTime` (with a frozen wall clock a renewal would look like no change at all, and
/// other replicas would judge the lease expired).
struct Following {
    start: tokio::time::Instant,
}

impl Clock for Following {
    fn wall(&self) -> jiff::Timestamp {
        let elapsed = jiff::SignedDuration::try_from(self.start.elapsed()).unwrap_or_default();
        base().checked_add(elapsed).unwrap_or(base())
    }
}

fn replica(identity: &str, ranges: u32) -> Arc<Shards> {
    let cfg = ShardConfig {
        lease_duration: LEASE,
        renew_deadline: RENEW,
        retry_period: RETRY,
        ..ShardConfig::with_defaults(Ring::new(ranges).expect("ring"), "kube-system", identity)
    };
    let start = tokio::time::Instant::now();
    Shards::new(cfg, Arc::new(Following { start }))
}

fn start(api: &SimApi, s: &Arc<Shards>, cancel: &CancellationToken) -> JoinHandle<()> {
    start_as(api, 1, s, cancel)
}

/// Starts a holder on a client of manager incarnation `epoch` (cut off on its own).
fn start_as(
    api: &SimApi,
    epoch: u64,
    s: &Arc<Shards>,
    cancel: &CancellationToken,
) -> JoinHandle<()> {
    let client = api.client(epoch, "rkcm");
    tokio::spawn(s.clone().run(client, cancel.clone()))
}

/// Steps time by 100 ms for `span`, asserting at every step that no range is held by two
/// replicas at once.
async fn run_checking(span: Duration, replicas: &[&Arc<Shards>]) {
    let step = Duration::from_millis(100);
    let mut t = Duration::ZERO;
    while t < span {
        tokio::time::sleep(step).await;
        t += step;
        let mut seen = BTreeSet::new();
        for r in replicas {
            for range in r.held() {
                assert!(
                    seen.insert(range),
                    "range {range} held twice at {t:?} (by {})",
                    r.config().identity
                );
            }
        }
    }
}

#[tokio::test(start_paused = true)]
async fn replicas_split_the_ring_and_a_leaver_hands_over_at_once() {
    let api = SimApi::new(1, base());
    let (a, b) = (replica("a", 8), replica("b", 8));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = start(&api, &a, &cancel_a);
    run_checking(Duration::from_secs(5), &[&a, &b]).await;
    assert_eq!(a.held().len(), 8, "alone, a holds the whole ring");
    let _task_b = start(&api, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    assert_eq!(
        (a.held().len(), b.held().len()),
        (4, 4),
        "two replicas split it"
    );
    let range = a.config().ring.range_of("default");
    assert!(a.held().contains(&range) != b.held().contains(&range));
    assert!(
        !a.owns("default") && !b.owns("default"),
        "no cache has listed the range: nobody acts on it"
    );
    // A graceful leave: b owns everything within a couple of rounds, not a lease later.
    cancel_a.cancel();
    task_a.await.expect("a stops");
    run_checking(2 * RETRY + Duration::from_millis(500), &[&a, &b]).await;
    assert_eq!(b.held().len(), 8, "b took the released ranges at once");
}

#[tokio::test(start_paused = true)]
async fn a_crashed_replica_s_ranges_wait_out_its_lease() {
    let api = SimApi::new(2, base());
    let (a, b) = (replica("a", 6), replica("b", 6));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = start(&api, &a, &cancel_a);
    let _task_b = start(&api, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    assert_eq!((a.held().len(), b.held().len()), (3, 3));
    // A crash: no release, no more renewals. Its windows close by the renew deadline; b
    // must not take a range before a whole lease duration passed without change.
    task_a.abort();
    let crashed = tokio::time::Instant::now();
    let mut took_at = None;
    while took_at.is_none() {
        run_checking(Duration::from_millis(100), &[&a, &b]).await;
        if b.held().len() == 6 {
            took_at = Some(crashed.elapsed());
        }
        assert!(
            crashed.elapsed() < LEASE + 3 * RETRY,
            "b never took a's ranges"
        );
    }
    let took = took_at.unwrap_or_default();
    assert!(took >= LEASE - RETRY, "b took a's ranges after {took:?}");
}

/// Exactly one replica holds the global Lease at a time; a graceful leaver hands it over
/// within a round or two, a crashed holder's only after its lease ran out. It never counts as
/// a range.
#[tokio::test(start_paused = true)]
async fn one_replica_holds_the_global_lease() {
    let api = SimApi::new(3, base());
    let (a, b) = (replica("a", 4), replica("b", 4));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = start(&api, &a, &cancel_a);
    run_checking(Duration::from_secs(3), &[&a, &b]).await;
    assert!(a.owns_global(), "alone, a takes the global lease");
    assert_eq!(a.held().len(), 4, "the global lease is not a range");
    assert_eq!(a.held_ranges(), (0..4).collect::<BTreeSet<u32>>());
    let task_b = start(&api, &b, &cancel_b);
    for _ in 0..200 {
        run_checking(Duration::from_millis(100), &[&a, &b]).await;
        assert!(
            !(a.owns_global() && b.owns_global()),
            "both hold the global lease"
        );
    }
    assert!(
        a.owns_global() && !b.owns_global(),
        "a keeps it while it renews"
    );
    // A graceful leave hands it over at once.
    cancel_a.cancel();
    task_a.await.expect("a stops");
    run_checking(2 * RETRY + Duration::from_millis(500), &[&a, &b]).await;
    assert!(b.owns_global(), "b took the released global lease");
    // A crash: a new replica c waits out b's lease.
    let c = replica("c", 4);
    let _task_c = start(&api, &c, &CancellationToken::new());
    run_checking(Duration::from_secs(5), &[&b, &c]).await;
    task_b.abort();
    let crashed = tokio::time::Instant::now();
    while !c.owns_global() {
        run_checking(Duration::from_millis(100), &[&b, &c]).await;
        assert!(
            crashed.elapsed() < LEASE + 3 * RETRY,
            "c never took the global lease"
        );
    }
    assert!(
        crashed.elapsed() >= LEASE - RETRY,
        "c took the global lease {:?} after b crashed",
        crashed.elapsed()
    );
}

/// A sync of a range just taken waits for the caches to list it, instead of being dropped;
/// one of a range not held returns at once; the wait ends at the renew deadline.
#[tokio::test(start_paused = true)]
async fn a_sync_waits_for_its_range_to_be_cached() {
    let s = replica("a", 4);
    let range = s.config().ring.range_of("default");
    let other = (range + 1) % 4;
    let until = tokio::time::Instant::now() + Duration::from_secs(3600);
    s.set_held([(range, until)].into());
    assert!(!s.owns("default"), "held, not cached: not owned yet");
    let waiting = tokio::spawn({
        let s = s.clone();
        async move { s.begin_when_cached("default").await.is_some() }
    });
    let mut waiting = waiting;
    assert!(
        tokio::time::timeout(Duration::from_secs(1), &mut waiting)
            .await
            .is_err(),
        "it waits while the range is not cached"
    );
    s.set_cached([range].into());
    assert!(
        waiting.await.expect("join"),
        "it runs once the range is cached"
    );

    // Not held: at once.
    let ns_other = (0..200)
        .map(|i| format!("{i}-namespace"))
        .find(|ns| s.config().ring.range_of(ns) == other)
        .expect("a namespace in the other range");
    let started = tokio::time::Instant::now();
    assert!(s.begin_when_cached(&ns_other).await.is_none());
    assert_eq!(started.elapsed(), Duration::ZERO);
    // Held, never cached: gives up at the renew deadline.
    s.set_held([(range, until)].into());
    s.set_cached(Default::default());
    let started = tokio::time::Instant::now();
    assert!(s.begin_when_cached("default").await.is_none());
    assert_eq!(started.elapsed(), RENEW);
}

/// A replica whose Lease requests stall (answered 25 s late) must not take the ranges of a
/// replica that renewed meanwhile: the leases it lists are judged from when the answer came,
/// not from when the list was sent (found by the simulator, sharded-2 seed 0).
#[tokio::test(start_paused = true)]
async fn a_late_list_answer_does_not_make_valid_leases_look_expired() {
    let api = SimApi::new(3, base());
    let (a, b) = (replica("a", 4), replica("b", 4));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let _task_a = start_as(&api, 1, &a, &cancel_a);
    let _task_b = start_as(&api, 2, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    assert_eq!((a.held().len(), b.held().len()), (2, 2));
    api.world().cut_off(
        2,
        rkcm_testkit::sim::Cut::SlowLeases,
        Duration::from_secs(25),
    );
    run_checking(Duration::from_secs(40), &[&a, &b]).await;
    assert_eq!(a.held().len(), 2, "a kept its ranges");
    assert_eq!(b.held().len(), 2, "b holds its own again");
}

/// The renewal margin: the renew deadline less two retry periods (three rounds to get a
/// renewal through), every round when that is shorter than two retry periods.
#[test]
fn renew_margin_leaves_three_rounds() {
    let cfg = |renew: u64, retry: u64| ShardConfig {
        renew_deadline: Duration::from_secs(renew),
        retry_period: Duration::from_secs(retry),
        ..ShardConfig::with_defaults(Ring::new(4).expect("ring"), "kube-system", "a")
    };
    for (renew, retry, margin) in [(10, 2, 6), (20, 4, 12), (8, 2, 4), (7, 2, 7), (3, 2, 3)] {
        assert_eq!(
            cfg(renew, retry).renew_margin(),
            Duration::from_secs(margin),
            "renew deadline {renew} s, retry period {retry} s"
        );
    }
    let now = tokio::time::Instant::now();
    let six = Duration::from_secs(6);
    for (left_ms, due) in [
        (8_000, false),
        (6_001, false),
        (6_000, true),
        (100, true),
        (0, true),
    ] {
        let until = now + Duration::from_millis(left_ms);
        assert_eq!(
            super::renewal_due(until, now, six),
            due,
            "{left_ms} ms left"
        );
    }
    assert!(
        super::renewal_due(now, now + RETRY, six),
        "a closed window is due"
    );
}

/// A replica renews each range about every other round, not every round (a ring of 64
/// ranges would write 32 Leases a second), and keeps every range held meanwhile.
#[tokio::test(start_paused = true)]
async fn ranges_are_renewed_every_other_round() {
    let api = SimApi::new(4, base());
    let a = replica("a", 8);
    let cancel = CancellationToken::new();
    let _task = start(&api, &a, &cancel);
    run_checking(Duration::from_secs(10), &[&a]).await;
    assert_eq!(a.held().len(), 8);
    drop(api.world().drain_changes());
    let span = Duration::from_secs(60);
    let step = Duration::from_millis(100);
    let mut t = Duration::ZERO;
    while t < span {
        tokio::time::sleep(step).await;
        t += step;
        assert_eq!(a.held().len(), 8, "a range's window closed at {t:?}");
    }
    let mut writes = std::collections::BTreeMap::<String, usize>::new();
    for change in api.world().drain_changes() {
        if change.resource == "leases" && change.kind == "MODIFIED" {
            *writes.entry(change.key).or_default() += 1;
        }
    }
    let range_writes: Vec<(String, usize)> = writes
        .into_iter()
        .filter(|(key, _)| key.ends_with(|c: char| c.is_ascii_digit()) && !key.contains("member"))
        .collect();
    assert_eq!(
        range_writes.len(),
        8,
        "every range renewed: {range_writes:?}"
    );
    // Rounds every retry period (2 s) and a bit: 30 in 60 s. Every other one renews.
    for (key, n) in &range_writes {
        assert!(
            (10..=17).contains(n),
            "{key} renewed {n} times in {span:?} (every round would be about 30)"
        );
    }
}
