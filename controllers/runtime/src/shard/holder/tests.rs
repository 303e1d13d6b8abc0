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

/// Steps time (checking `replicas` as [`run_checking`] does) until `s` renews its member
/// Lease: a crash right after that is a lease duration from the last renewal, which is what
/// other replicas wait out (a member renews every half renew deadline, so a crash at any
/// moment could be up to that much later).
async fn just_renewed(api: &SimApi, s: &Arc<Shards>, replicas: &[&Arc<Shards>]) {
    let member = format!("kube-system/{}", s.config().member_lease());
    drop(api.world().drain_changes());
    let start = tokio::time::Instant::now();
    loop {
        run_checking(Duration::from_millis(100), replicas).await;
        let changes = api.world().drain_changes();
        if changes
            .iter()
            .any(|c| c.key == member && c.kind == "MODIFIED")
        {
            return;
        }
        assert!(
            start.elapsed() < RENEW,
            "{} did not renew its session",
            s.config().identity
        );
    }
}

#[tokio::test(start_paused = true)]
async fn replicas_split_the_ring_and_a_leaver_hands_over_at_once() {
    let api = SimApi::new(1, base());
    let (a, b) = (replica("a", 8), replica("b", 8));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = start_as(&api, 1, &a, &cancel_a);
    run_checking(Duration::from_secs(5), &[&a, &b]).await;
    assert_eq!(a.held().len(), 8, "alone, a holds the whole ring");
    let _task_b = start_as(&api, 2, &b, &cancel_b);
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
    api.world().drain_changes();
    cancel_a.cancel();
    task_a.await.expect("a stops");
    let leaving: Vec<String> = api
        .world()
        .drain_changes()
        .into_iter()
        .filter(|c| c.epoch == 1)
        .map(|c| c.key)
        .collect();
    assert_eq!(
        leaving,
        vec![format!("kube-system/{}", a.config().member_lease())],
        "a leaves with one write: its member Lease released frees its four ranges"
    );
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
    just_renewed(&api, &a, &[&a, &b]).await;
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

/// Two survivors take a crashed replica's ranges as its session lapses, both in the same
/// moment: not at their next round after the lapse, and the one whose fence lost to the other's
/// not a round later (the member Lease it failed to fence shows it fenced, so the ranges are
/// free at once).
#[tokio::test(start_paused = true)]
async fn survivors_take_a_crashed_replica_s_ranges_as_its_session_lapses() {
    let api = SimApi::new(4, base());
    let (a, b, c) = (replica("a", 6), replica("b", 6), replica("c", 6));
    let cancel = CancellationToken::new();
    // a's rounds come at even seconds, b's and c's at odd ones.
    let task_a = start(&api, &a, &cancel);
    run_checking(Duration::from_secs(1), &[&a, &b, &c]).await;
    let _task_b = start(&api, &b, &cancel);
    let _task_c = start(&api, &c, &cancel);
    run_checking(Duration::from_millis(20_500), &[&a, &b, &c]).await;
    assert_eq!((a.held().len(), b.held().len(), c.held().len()), (2, 2, 2));
    // a crashes 1.5 s after its last renewal (at 20 s), which b and c saw at their round
    // 1 s after it: its session lapses for them 14.5 s after the crash, between two of their
    // rounds.
    task_a.abort();
    let crashed = tokio::time::Instant::now();
    let lapse = LEASE - Duration::from_millis(500);
    let (mut b_took, mut c_took) = (None, None);
    while b_took.is_none() || c_took.is_none() {
        run_checking(Duration::from_millis(100), &[&a, &b, &c]).await;
        if b_took.is_none() && b.held().len() > 2 {
            b_took = Some(crashed.elapsed());
        }
        if c_took.is_none() && c.held().len() > 2 {
            c_took = Some(crashed.elapsed());
        }
        assert!(
            crashed.elapsed() < LEASE + 4 * RETRY,
            "the survivors never took a's ranges (b at {b_took:?}, c at {c_took:?})"
        );
    }
    let (b_took, c_took) = (b_took.unwrap_or_default(), c_took.unwrap_or_default());
    for took in [b_took, c_took] {
        assert!(
            took >= lapse && took <= lapse + Duration::from_millis(200),
            "b took a range {b_took:?} after the crash, c {c_took:?}: the session lapsed \
             {lapse:?} after it"
        );
    }
    assert_eq!(b.held().len() + c.held().len(), 6);
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
    just_renewed(&api, &b, &[&b, &c]).await;
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

/// Lease writes per key over `span` of time stepped at 100 ms, checking every step that
/// `a` keeps `ranges` ranges.
async fn writes_while_holding(
    api: &SimApi,
    a: &Arc<Shards>,
    ranges: usize,
    span: Duration,
) -> std::collections::BTreeMap<String, usize> {
    drop(api.world().drain_changes());
    let step = Duration::from_millis(100);
    let mut t = Duration::ZERO;
    while t < span {
        tokio::time::sleep(step).await;
        t += step;
        assert_eq!(a.held().len(), ranges, "a range's window closed at {t:?}");
    }
    let mut writes = std::collections::BTreeMap::<String, usize>::new();
    for change in api.world().drain_changes() {
        if change.resource == "leases" && change.kind == "MODIFIED" {
            *writes.entry(change.key).or_default() += 1;
        }
    }
    writes
}

/// A holder renews its member Lease every half renew deadline (5 s) and writes no range Lease
/// at all while it holds its ranges: the ring costs one write per replica every 5 s, not one
/// per range, nor one every round (2 s).
#[tokio::test(start_paused = true)]
async fn a_holder_renews_its_session_only() {
    let api = SimApi::new(4, base());
    let a = replica("a", 8);
    let cancel = CancellationToken::new();
    let _task = start(&api, &a, &cancel);
    run_checking(Duration::from_secs(10), &[&a]).await;
    assert_eq!(a.held().len(), 8);
    let span = Duration::from_secs(60);
    let writes = writes_while_holding(&api, &a, 8, span).await;
    let member = format!("kube-system/{}", a.config().member_lease());
    let n = writes.get(&member).copied().unwrap_or(0);
    // Every 5 s: 12 in 60 s.
    assert_eq!(a.config().renew_interval(), Duration::from_secs(5));
    assert!(
        (11..=13).contains(&n),
        "member Lease renewed {n} times in {span:?}"
    );
    assert_eq!(
        writes.len(),
        1,
        "only the member Lease is written while holding: {writes:?}"
    );
}

/// A holder reads the ring from its watch: over a minute of holding, its requests are its
/// member Lease's renewals and nothing else, no list of the ring every round.
#[tokio::test(start_paused = true)]
async fn a_holder_reads_the_ring_from_its_watch() {
    let api = SimApi::new(6, base());
    let a = replica("a", 8);
    let cancel = CancellationToken::new();
    let _task = start(&api, &a, &cancel);
    run_checking(Duration::from_secs(10), &[&a]).await;
    assert_eq!(a.held().len(), 8);
    let before = api.world().requests;
    let span = Duration::from_secs(60);
    let writes = writes_while_holding(&api, &a, 8, span).await;
    let renewals: usize = writes.values().sum();
    let requests = api.world().requests - before;
    // Watches the simulated server ends on its own come back as one request each.
    assert!(
        requests <= u64::try_from(renewals).unwrap_or(u64::MAX) + 3,
        "{requests} requests in {span:?} for {renewals} renewals"
    );
}

/// A Lease write that meets a conflict reads the Lease again: a renewal that met a write its
/// watch has not delivered yet (the watch runs 12 s late here) succeeds at the next round,
/// instead of failing on the old version until the watch catches up, by which time the
/// session's windows would have closed.
#[tokio::test(start_paused = true)]
async fn a_conflict_reads_the_lease_again() {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::{Api, PostParams};

    let api = SimApi::new(7, base());
    let a = replica("a", 4);
    let cancel = CancellationToken::new();
    let _task = start(&api, &a, &cancel);
    run_checking(Duration::from_secs(10), &[&a]).await;
    assert_eq!(a.held().len(), 4);
    api.world().faults.watch_delay_ms = (12_000, 12_000);
    // Someone writes a's member Lease (a label of their own; the session is untouched).
    let other: Api<Lease> = Api::namespaced(api.client(0, "someone"), "kube-system");
    let name = a.config().member_lease();
    let mut lease = other.get(&name).await.expect("member Lease");
    lease
        .metadata
        .labels
        .get_or_insert_with(Default::default)
        .insert("team".to_owned(), "x".to_owned());
    other
        .replace(&name, &PostParams::default(), &lease)
        .await
        .expect("rewrite");
    let step = Duration::from_millis(100);
    for i in 0..150 {
        tokio::time::sleep(step).await;
        assert_eq!(
            a.held().len(),
            4,
            "a's windows closed {:?} after the rewrite",
            step * (i + 1)
        );
    }
}

/// A replica whose session renewals stall (held back, then landing) is fenced by the other
/// once its session ran a lease duration without change: its late renewal fails, it learns
/// its session ended and starts a new one, and the ranges were never held twice.
#[tokio::test(start_paused = true)]
async fn a_stalled_session_is_fenced_and_its_late_renewal_fails() {
    let api = SimApi::new(5, base());
    let (a, b) = (replica("a", 4), replica("b", 4));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let _task_a = start_as(&api, 1, &a, &cancel_a);
    let _task_b = start_as(&api, 2, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    assert_eq!((a.held().len(), b.held().len()), (2, 2));
    drop(api.world().drain_changes());
    // b's Lease requests are held back 30 s, then land: b's session looks dead to a.
    api.world().cut_off(
        2,
        rkcm_testkit::sim::Cut::SlowLeases,
        Duration::from_secs(30),
    );
    run_checking(Duration::from_secs(25), &[&a, &b]).await;
    assert_eq!(
        a.held().len(),
        4,
        "a fenced b's session and took its ranges"
    );
    assert!(b.held().is_empty(), "b's windows closed");
    let fenced = api.world().drain_changes().into_iter().any(|c| {
        c.resource == "leases"
            && c.key.ends_with(&b.config().member_lease())
            && c.obj["metadata"]["annotations"][super::ANNOTATION_FENCED_BY] == "a"
    });
    assert!(fenced, "a fenced b's member Lease before taking");
    // b's requests land again: its renewals fail on the fence, it starts a new session and
    // the two split the ring again.
    run_checking(Duration::from_secs(40), &[&a, &b]).await;
    assert_eq!((a.held().len(), b.held().len()), (2, 2));
}

/// A replica that restarts under the same identity does not resume its previous process's
/// session: it starts a new one only once the old one ran a lease duration without change
/// (its own update is the fence), and meanwhile the other replica may take the old session's
/// ranges only after fencing it.
#[tokio::test(start_paused = true)]
async fn a_restarted_replica_starts_a_new_session_after_the_old_one_lapsed() {
    let api = SimApi::new(6, base());
    let (a, b) = (replica("a", 4), replica("b", 4));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let task_a = start_as(&api, 1, &a, &cancel_a);
    let _task_b = start_as(&api, 2, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    assert_eq!((a.held().len(), b.held().len()), (2, 2));
    just_renewed(&api, &a, &[&a, &b]).await;
    task_a.abort();
    let crashed = tokio::time::Instant::now();
    let a2 = replica("a", 4);
    let _task_a2 = start_as(&api, 3, &a2, &CancellationToken::new());
    run_checking(LEASE - RETRY, &[&a, &a2, &b]).await;
    assert!(
        a2.held().is_empty(),
        "the restarted replica took nothing while its old session might run"
    );
    assert_eq!(b.held().len(), 2, "nor did b");
    while a2.held().len() + b.held().len() < 4 {
        run_checking(Duration::from_millis(100), &[&a, &a2, &b]).await;
        assert!(
            crashed.elapsed() < LEASE + 3 * RETRY,
            "the old session's ranges were never taken again"
        );
    }
    run_checking(Duration::from_secs(20), &[&a, &a2, &b]).await;
    assert_eq!((a2.held().len(), b.held().len()), (2, 2));
}

/// The next round: a retry period on, sooner when the member session is due for renewal, and
/// never at once when the renewal is overdue (it failed: retried a retry period later; at once
/// would spin on a server that refuses it).
#[test]
fn the_next_round_comes_at_the_renewal_but_never_at_once() {
    use super::Round;
    let cfg = ShardConfig::with_defaults(Ring::new(4).expect("ring"), "kube-system", "a");
    let now = tokio::time::Instant::now() + Duration::from_secs(60);
    let secs = Duration::from_secs;
    for (renewed_ago, next_in) in [
        (None, RETRY),
        (Some(secs(0)), RETRY),
        (Some(secs(4)), secs(1)),
        (Some(secs(5)), RETRY),
        (Some(secs(9)), RETRY),
    ] {
        let round = Round {
            session: renewed_ago.map(|_| "1-1".to_owned()),
            renewed: renewed_ago.map(|ago| now - ago),
            ..Round::default()
        };
        assert_eq!(
            round.next_round(&cfg, now) - now,
            next_in,
            "renewed {renewed_ago:?} ago"
        );
    }
}

/// A Lease this session took is held while it is in the held set, the global Lease as well as
/// a range, and free to take again (a take whose answer was lost) when it is not.
#[test]
fn a_lease_of_this_session_is_held_while_in_the_held_set() {
    use super::{ANNOTATION_SESSION, Claim, GLOBAL, Held, Round};
    let cfg = ShardConfig::with_defaults(Ring::new(4).expect("ring"), "kube-system", "a");
    let now = tokio::time::Instant::now();
    let lease = |name: &str| -> k8s_openapi::api::coordination::v1::Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "annotations": {ANNOTATION_SESSION: "1-1"}},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
        }))
        .expect("lease")
    };
    let mut round = Round {
        session: Some("1-1".into()),
        ..Round::default()
    };
    round.observe_one(lease("rkcm-shard-global"), now);
    round.observe_one(lease("rkcm-shard-2"), now);
    let until = now + RENEW;
    let held: Held = [(GLOBAL, until), (2, until)].into();
    for name in ["rkcm-shard-global", "rkcm-shard-2"] {
        assert_eq!(round.claim(&cfg, name, now, &held), Claim::Held, "{name}");
        assert_eq!(
            round.claim(&cfg, name, now, &Held::new()),
            Claim::Free,
            "{name}"
        );
    }
}

/// What the watch shows never takes the view back: a Lease this replica wrote at a version
/// the watch has not reached is kept (updated or missing there), one the watch shows newer is
/// taken, and a Lease missing from it at a version it has passed is gone. A list is taken as
/// it comes.
#[test]
fn the_watch_never_takes_the_view_back() {
    use super::{Round, Source};
    let cfg = ShardConfig::with_defaults(Ring::new(4).expect("ring"), "kube-system", "a");
    let now = tokio::time::Instant::now();
    let lease = |name: &str, rv: &str, holder: &str| -> k8s_openapi::api::coordination::v1::Lease {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}
        }))
        .expect("lease")
    };
    let holder = |round: &Round, name: &str| round.leases.get(name).map(|s| s.holder().to_owned());
    let mut round = Round::default();
    // Written by this replica: the answers of its writes.
    round.observe_one(lease("rkcm-shard-0", "20", "a"), now);
    round.observe_one(lease("rkcm-shard-1", "21", "a"), now);
    round.observe_one(lease("rkcm-shard-2", "5", "a"), now);
    round.observe_one(lease("rkcm-shard-3", "6", "a"), now);
    // The watch has reached version 12: range 0 at an older version, range 1 not yet, range 2
    // deleted since, range 3 taken by b since.
    round.observe(
        &cfg,
        vec![
            lease("rkcm-shard-0", "10", "b").into(),
            lease("rkcm-shard-3", "11", "b").into(),
        ],
        Source::Watch(Some("12")),
        now,
    );
    assert_eq!(
        holder(&round, "rkcm-shard-0").as_deref(),
        Some("a"),
        "kept: newer than the watch's"
    );
    assert_eq!(
        holder(&round, "rkcm-shard-1").as_deref(),
        Some("a"),
        "kept: the watch has not reached it"
    );
    assert_eq!(
        holder(&round, "rkcm-shard-2"),
        None,
        "gone: the watch passed its version"
    );
    assert_eq!(
        holder(&round, "rkcm-shard-3").as_deref(),
        Some("b"),
        "the watch's is newer"
    );
    // A list is every Lease there is.
    round.observe(
        &cfg,
        vec![lease("rkcm-shard-0", "10", "b").into()],
        Source::List,
        now,
    );
    assert_eq!(holder(&round, "rkcm-shard-0").as_deref(), Some("b"));
    assert_eq!(round.leases.len(), 1);
}

/// A range Lease naming a session its holder's member Lease does not show is free only when
/// that member Lease is the newer record: read again after a conflict, a range may name a
/// session started after the member Lease was last seen, and taking it then would overlap
/// that session's term (found by the simulator, sharded-2 seed 43).
#[test]
fn a_range_newer_than_its_member_lease_stays_held() {
    use super::{ANNOTATION_SESSION, Claim, Held, Round};
    let cfg = ShardConfig::with_defaults(Ring::new(4).expect("ring"), "kube-system", "a");
    let now = tokio::time::Instant::now();
    let lease = |name: &str, rv: &str, holder: &str, session: &str| {
        serde_json::from_value::<k8s_openapi::api::coordination::v1::Lease>(serde_json::json!({
            "metadata": {"name": name, "resourceVersion": rv,
                         "annotations": {ANNOTATION_SESSION: session}},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}
        }))
        .expect("lease")
    };
    let member = cfg.member_lease_of("b");
    let mut round = Round::default();
    // The range names b's session 2; b's member Lease was last seen in session 1.
    round.observe_one(lease(&member, "10", "b", "1-1"), now);
    round.observe_one(lease("rkcm-shard-2", "20", "b", "2-2"), now);
    assert_eq!(
        round.claim(&cfg, "rkcm-shard-2", now, &Held::new()),
        Claim::Held,
        "the member Lease is older than the range: session 2 may run"
    );
    // b's member Lease seen later, released: session 2 is over.
    round.observe_one(lease(&member, "30", "", "2-2"), now);
    assert_eq!(
        round.claim(&cfg, "rkcm-shard-2", now, &Held::new()),
        Claim::Free
    );
}

/// The ring balances by the objects the replicas publish: two heavy ranges of one replica
/// are split between the two, the released one's Lease keeps its count, and its taker
/// publishes that count until its own caches have counted the range.
#[tokio::test(start_paused = true)]
async fn replicas_balance_by_the_objects_they_publish() {
    use k8s_openapi::api::coordination::v1::Lease;

    let api = SimApi::new(5, base());
    let (a, b) = (replica("a", 8), replica("b", 8));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let _task_a = start(&api, &a, &cancel_a);
    let _task_b = start(&api, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    let held_a = a.held();
    assert_eq!((held_a.len(), b.held().len()), (4, 4));
    // a's caches count 5 000 objects in two of its ranges.
    let heavy: Vec<u32> = held_a.iter().take(2).copied().collect();
    a.set_objects(
        held_a
            .iter()
            .map(|r| (*r, if heavy.contains(r) { 5_000 } else { 0 }))
            .collect(),
    );
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    let (after_a, after_b) = (a.held(), b.held());
    let moved: Vec<u32> = heavy
        .iter()
        .filter(|r| after_b.contains(r))
        .copied()
        .collect();
    assert_eq!(
        moved.len(),
        1,
        "one heavy range moved to b: a {after_a:?}, b {after_b:?}"
    );
    assert_eq!(after_a.len() + after_b.len(), 8);

    let leases: kube::Api<Lease> = kube::Api::namespaced(api.client(1, "check"), "kube-system");
    let annotation = |lease: &Lease| {
        lease
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(crate::shard::balance::ANNOTATION_OBJECTS))
            .cloned()
            .unwrap_or_default()
    };
    let range = leases
        .get(&a.config().range_lease(moved[0]))
        .await
        .expect("the moved range's Lease");
    assert_eq!(annotation(&range), "5000", "the release kept the count");
    let annotations = range.metadata.annotations.clone().unwrap_or_default();
    assert!(
        !annotations.contains_key(crate::shard::balance::ANNOTATION_NEXT),
        "the take cleared the member the range was handed to: {annotations:?}"
    );
    let member_b = leases
        .get(&b.config().member_lease())
        .await
        .expect("b's member Lease");
    let published = crate::shard::balance::parse_objects(&annotation(&member_b));
    // b's caches counted nothing: it publishes the count it took over and nothing for its
    // own ranges (the balance estimates those).
    assert_eq!(
        published,
        [(moved[0], 5_000)].into(),
        "b publishes {published:?}"
    );
}

/// On a ring nobody has counted, the replicas list the namespaces before their first takes
/// and split them: four namespaces in the ranges that the split by number gives `a` (0, 2,
/// 4, 6) end up two a replica.
#[tokio::test(start_paused = true)]
async fn the_first_takes_split_the_namespaces() {
    use k8s_openapi::api::core::v1::Namespace;

    let api = SimApi::new(5, base());
    let ring = Ring::new(8).expect("ring");
    let mut names: Vec<String> = Vec::new();
    for want in [0, 2, 4, 6] {
        let name = (0..10_000)
            .map(|i| format!("ns-{i}"))
            .find(|n| ring.range_of(n) == want)
            .expect("a name in the range");
        names.push(name);
    }
    let namespaces: kube::Api<Namespace> = kube::Api::all(api.client(1, "setup"));
    for name in &names {
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
        }))
        .expect("namespace");
        namespaces
            .create(&kube::api::PostParams::default(), &ns)
            .await
            .expect("create the namespace");
    }
    let (a, b) = (replica("a", 8), replica("b", 8));
    let (cancel_a, cancel_b) = (CancellationToken::new(), CancellationToken::new());
    let _task_a = start(&api, &a, &cancel_a);
    let _task_b = start(&api, &b, &cancel_b);
    run_checking(Duration::from_secs(20), &[&a, &b]).await;
    let holding = |s: &Arc<Shards>| {
        let held = s.held();
        names
            .iter()
            .filter(|n| held.contains(&ring.range_of(n)))
            .count()
    };
    assert_eq!(
        (holding(&a), holding(&b)),
        (2, 2),
        "a holds {:?}, b {:?}",
        a.held(),
        b.held()
    );
    assert_eq!((a.held().len(), b.held().len()), (4, 4));
}
