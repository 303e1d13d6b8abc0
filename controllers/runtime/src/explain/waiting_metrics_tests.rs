use std::time::{Duration, SystemTime};

use prometheus::Encoder as _;

use super::*;
use crate::explain::decisions::{Decisions, Note, Outcome};

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000 + secs)
}

fn waits(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn row(controller: &str, reason: &str, objects: usize, oldest: u64) -> Summary {
    Summary {
        controller: controller.into(),
        reason: reason.into(),
        objects,
        oldest: Duration::from_secs(oldest),
    }
}

#[test]
fn reason_codes_are_plain_codes_or_other() {
    let cases = [
        ("NewPodsUnavailable: 1 of 3 new pods", "NewPodsUnavailable"),
        ("Paused", "Paused"),
        ("  PodNotReady : ordinal 2", "PodNotReady"),
        ("pod web-1 is not ready: because", OTHER),
        (": nothing", OTHER),
        ("", OTHER),
        ("Reason-With-Dash: x", OTHER),
    ];
    for (wait, want) in cases {
        assert_eq!(reason_code(wait), want, "{wait:?}");
    }
    let long = "A".repeat(65);
    assert_eq!(reason_code(&long), OTHER);
}

#[test]
fn counts_objects_per_reason_and_keeps_each_wait_start() {
    let mut t = Tracker::default();
    let d = "deployment-controller";
    t.observe(d, "ns/a", &waits(&["NewPodsUnavailable: 1 of 3"]), at(0));
    t.observe(
        d,
        "ns/b",
        &waits(&["NewPodsUnavailable: 2 of 3", "NewPodsUnavailable: again"]),
        at(60),
    );
    // a is still waiting on the same reason with a new message: its start stays at 0.
    t.observe(d, "ns/a", &waits(&["NewPodsUnavailable: 2 of 3"]), at(100));
    t.observe(
        d,
        "ns/c",
        &waits(&["ProgressDeadlineExceeded: no progress"]),
        at(120),
    );
    assert_eq!(
        t.summary(at(840)),
        [
            row(d, "NewPodsUnavailable", 2, 840),
            row(d, "ProgressDeadlineExceeded", 1, 720)
        ]
    );
    // a moves on to another reason: that wait starts now, the old one ends.
    t.observe(
        d,
        "ns/a",
        &waits(&["ProgressDeadlineExceeded: no progress"]),
        at(900),
    );
    assert_eq!(
        t.summary(at(1000)),
        [
            row(d, "NewPodsUnavailable", 1, 940),
            row(d, "ProgressDeadlineExceeded", 2, 880)
        ]
    );
    // A decision without waits ends them; so does the object going away.
    t.observe(d, "ns/b", &[], at(1000));
    t.forget(d, "ns/c");
    assert_eq!(
        t.summary(at(1000)),
        [row(d, "ProgressDeadlineExceeded", 1, 100)]
    );
    t.forget(d, "ns/a");
    assert_eq!(t.summary(at(1000)), []);
}

#[test]
fn controllers_and_keys_are_separate() {
    let mut t = Tracker::default();
    t.observe(
        "replicaset-controller",
        "ns/a",
        &waits(&["PodsUnavailable: 1"]),
        at(0),
    );
    t.observe(
        "daemonset-controller",
        "ns/a",
        &waits(&["PodsUnavailable: 1"]),
        at(10),
    );
    t.forget("daemonset-controller", "ns/a");
    assert_eq!(
        t.summary(at(30)),
        [row("replicaset-controller", "PodsUnavailable", 1, 30)]
    );
}

#[test]
fn the_store_feeds_the_tracker_and_forgets_gone_and_evicted_keys() {
    let store = Decisions::new(2);
    let waiting = |w: &[&str]| Note {
        waiting: waits(w),
        ..Note::default()
    };
    let failed = Outcome::Failed {
        error: "denied".into(),
    };
    store.record(
        "c",
        "ns/a",
        Outcome::Synced,
        waiting(&["PodsUnavailable: 1"]),
        "t".into(),
    );
    store.record(
        "c",
        "ns/b",
        failed,
        waiting(&["AdmissionDenied: denied"]),
        "t".into(),
    );
    let summary = |store: &Decisions| {
        let mut got = Vec::new();
        store.with_tracker(&mut |t| {
            got = t
                .summary(SystemTime::now())
                .into_iter()
                .map(|s| (s.reason, s.objects))
                .collect();
        });
        got
    };
    assert_eq!(
        summary(&store),
        [
            ("AdmissionDenied".to_owned(), 1),
            ("PodsUnavailable".to_owned(), 1)
        ]
    );
    // a's object is gone; then c and d push b (the oldest) out past the capacity of 2.
    let gone = Note {
        gone: true,
        ..Note::default()
    };
    store.record("c", "ns/a", Outcome::Synced, gone, "t".into());
    store.record(
        "c",
        "ns/c",
        Outcome::Synced,
        waiting(&["Paused"]),
        "t".into(),
    );
    store.record(
        "c",
        "ns/d",
        Outcome::Synced,
        waiting(&["Paused"]),
        "t".into(),
    );
    assert_eq!(summary(&store), [("Paused".to_owned(), 2)]);
    let mut syncs = BTreeMap::new();
    store.with_tracker(&mut |t| syncs = t.syncs().clone());
    assert_eq!(syncs.get("c"), Some(&[4, 1]));
}

#[test]
fn the_collector_exports_the_summary_without_stale_series() {
    let tracker = std::sync::Arc::new(std::sync::Mutex::new(Tracker::default()));
    let read = tracker.clone();
    let collector = WaitingCollector::new(move |f| f(&read.lock().expect("lock"))).expect("valid");
    {
        let mut t = tracker.lock().expect("lock");
        t.observe("deployment-controller", "ns/a", &waits(&["Paused"]), at(0));
        t.count_sync("deployment-controller", false);
    }
    let text = |families: Vec<MetricFamily>| {
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&families, &mut buf)
            .expect("encode");
        String::from_utf8(buf).expect("utf-8")
    };
    let first = text(collector.families(at(90)));
    for line in [
        "rkcm_objects_waiting{controller=\"deployment-controller\",reason=\"Paused\"} 1\n",
        "rkcm_objects_waiting_oldest_seconds{controller=\"deployment-controller\",reason=\"Paused\"} 90\n",
        "rkcm_syncs_total{controller=\"deployment-controller\",result=\"success\"} 1\n",
        "rkcm_syncs_total{controller=\"deployment-controller\",result=\"error\"} 0\n",
    ] {
        assert!(first.contains(line), "{line} in {first}");
    }
    tracker
        .lock()
        .expect("lock")
        .forget("deployment-controller", "ns/a");
    let second = text(collector.families(at(95)));
    assert!(!second.contains("reason=\"Paused\""), "{second}");
    assert!(second.contains("result=\"success\"} 1\n"), "{second}");
    assert_eq!(collector.desc().len(), 3);
}
