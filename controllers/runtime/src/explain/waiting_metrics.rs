//! The last decisions ([`super::decisions`]) as low-cardinality metrics: how many objects each
//! controller's last sync left waiting on each reason, since when the oldest of them waits,
//! and how many syncs ended in success or error. No object name is a label, so the series are
//! bounded by controllers × reason codes.
//!
//! - `rkcm_objects_waiting{controller,reason}`: objects whose last decision waits on `reason`
//!   (each object counted once per reason, however many waits of that reason it noted).
//! - `rkcm_objects_waiting_oldest_seconds{controller,reason}`: how long the longest of them has
//!   waited on `reason` without a break, at scrape time. A key keeps the instant it STARTED
//!   waiting on a reason for as long as every consecutive decision of it still names the
//!   reason; a decision without it, or the object gone, ends that wait.
//! - `rkcm_syncs_total{controller,result}`: recorded syncs, `result` `success` or `error`
//!   (both series exist from a controller's first sync on, so an error rate reads 0, not
//!   nothing).
//!
//! A (controller, reason) pair with no waiting object left is not exported (no stale zero
//! series). Reasons are the controllers' fixed codes (`rkcm explain`); a noted reason that is not
//! a plain code (letters and digits) is counted as `Other`, so a message can never become a
//! label. Upstream has no such metrics: its controllers' waits are only visible in conditions
//! and events.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntCounterVec, IntGaugeVec, Opts};

pub const WAITING: &str = "rkcm_objects_waiting";
pub const OLDEST: &str = "rkcm_objects_waiting_oldest_seconds";
pub const SYNCS: &str = "rkcm_syncs_total";

/// The `reason` label of a noted wait that is not a plain reason code.
pub const OTHER: &str = "Other";

/// The reason code of a noted wait (`Reason: message`), or [`OTHER`].
pub fn reason_code(wait: &str) -> &str {
    let code = wait.split_once(':').map_or(wait, |(code, _)| code).trim();
    let plain =
        !code.is_empty() && code.len() <= 64 && code.chars().all(|c| c.is_ascii_alphanumeric());
    if plain { code } else { OTHER }
}

/// Per key, the reasons it waits on and since when; per controller, its sync counts.
#[derive(Debug, Default)]
pub struct Tracker {
    waits: HashMap<(String, String), BTreeMap<String, SystemTime>>,
    syncs: BTreeMap<String, [u64; 2]>,
}

/// One exported (controller, reason) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    pub controller: String,
    pub reason: String,
    pub objects: usize,
    pub oldest: Duration,
}

impl Tracker {
    /// A decision of `controller` for `key` at `now` waiting on `waiting`: reasons it named
    /// before keep their start, new ones start now, the others end.
    pub fn observe(&mut self, controller: &str, key: &str, waiting: &[String], now: SystemTime) {
        let id = (controller.to_owned(), key.to_owned());
        let reasons: BTreeSet<&str> = waiting.iter().map(|w| reason_code(w)).collect();
        if reasons.is_empty() {
            self.waits.remove(&id);
            return;
        }
        let before = self.waits.remove(&id).unwrap_or_default();
        let now_waiting = reasons
            .into_iter()
            .map(|r| (r.to_owned(), before.get(r).copied().unwrap_or(now)))
            .collect();
        self.waits.insert(id, now_waiting);
    }

    /// Counts one sync of `controller`, `failed` or not.
    pub fn count_sync(&mut self, controller: &str, failed: bool) {
        let counts = self.syncs.entry(controller.to_owned()).or_default();
        counts[usize::from(failed)] += 1;
    }

    /// The object is gone (or its record dropped): its waits end.
    pub fn forget(&mut self, controller: &str, key: &str) {
        self.waits.remove(&(controller.to_owned(), key.to_owned()));
    }

    /// Objects and the oldest wait per (controller, reason) at `now`, sorted.
    pub fn summary(&self, now: SystemTime) -> Vec<Summary> {
        let mut by: BTreeMap<(&str, &str), (usize, SystemTime)> = BTreeMap::new();
        for ((controller, _), reasons) in &self.waits {
            for (reason, since) in reasons {
                let e = by.entry((controller, reason)).or_insert((0, *since));
                e.0 += 1;
                e.1 = e.1.min(*since);
            }
        }
        by.into_iter()
            .map(|((controller, reason), (objects, since))| Summary {
                controller: controller.to_owned(),
                reason: reason.to_owned(),
                objects,
                oldest: now.duration_since(since).unwrap_or_default(),
            })
            .collect()
    }

    /// Successful and failed syncs per controller.
    pub fn syncs(&self) -> &BTreeMap<String, [u64; 2]> {
        &self.syncs
    }
}

/// Lends a tracker to the function it is given (under the tracker's lock).
type Lender = Box<dyn Fn(&mut dyn FnMut(&Tracker)) + Send + Sync>;

/// The collector of these metrics: reads a tracker at every scrape.
pub struct WaitingCollector {
    read: Lender,
    waiting: IntGaugeVec,
    oldest: prometheus::GaugeVec,
    syncs: IntCounterVec,
    descs: Vec<Desc>,
    /// One scrape at a time rebuilds the vectors.
    scrape: std::sync::Mutex<()>,
}

impl std::fmt::Debug for WaitingCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitingCollector").finish_non_exhaustive()
    }
}

impl WaitingCollector {
    /// A collector of the tracker `read` lends out (under its lock) at each scrape.
    pub fn new(
        read: impl Fn(&mut dyn FnMut(&Tracker)) + Send + Sync + 'static,
    ) -> prometheus::Result<Self> {
        let waiting = IntGaugeVec::new(
            Opts::new(
                WAITING,
                "Objects whose controller's last sync waits on reason (the rkcm explain reason codes).",
            ),
            &["controller", "reason"],
        )?;
        let oldest = prometheus::GaugeVec::new(
            Opts::new(
                OLDEST,
                "Seconds the longest-waiting of those objects has waited on reason without a break.",
            ),
            &["controller", "reason"],
        )?;
        let syncs = IntCounterVec::new(
            Opts::new(
                SYNCS,
                "Syncs of a controller's main queue by result (success or error).",
            ),
            &["controller", "result"],
        )?;
        let descs = [waiting.desc(), oldest.desc(), syncs.desc()]
            .concat()
            .into_iter()
            .cloned()
            .collect();
        Ok(Self {
            read: Box::new(read),
            waiting,
            oldest,
            syncs,
            descs,
            scrape: std::sync::Mutex::default(),
        })
    }

    fn families(&self, now: SystemTime) -> Vec<MetricFamily> {
        let _one = self
            .scrape
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.waiting.reset();
        self.oldest.reset();
        self.syncs.reset();
        (self.read)(&mut |t: &Tracker| {
            for s in t.summary(now) {
                let labels = [s.controller.as_str(), s.reason.as_str()];
                self.waiting
                    .with_label_values(&labels)
                    .set(i64::try_from(s.objects).unwrap_or(i64::MAX));
                self.oldest
                    .with_label_values(&labels)
                    .set(s.oldest.as_secs_f64().floor());
            }
            for (controller, [ok, failed]) in t.syncs() {
                self.syncs
                    .with_label_values(&[controller, "success"])
                    .inc_by(*ok);
                self.syncs
                    .with_label_values(&[controller, "error"])
                    .inc_by(*failed);
            }
        });
        // A family without series is left out: the text format has no empty family.
        [
            self.waiting.collect(),
            self.oldest.collect(),
            self.syncs.collect(),
        ]
        .concat()
        .into_iter()
        .filter(|f| !f.get_metric().is_empty())
        .collect()
    }
}

impl Collector for WaitingCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.families(SystemTime::now())
    }
}

/// Registers, once per process, the collector of the tracker `read` lends (the process's
/// last-decision store, [`super::decisions::global`]).
pub fn register_once(read: impl Fn(&mut dyn FnMut(&Tracker)) + Send + Sync + 'static) {
    static DONE: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    DONE.get_or_init(|| {
        let collector = match WaitingCollector::new(read) {
            Ok(c) => c,
            Err(error) => {
                tracing::error!(metrics = "waiting reasons", %error, "cannot build metrics");
                return;
            }
        };
        if let Err(error) = crate::metrics::registry().register(Box::new(collector)) {
            tracing::warn!(metrics = "waiting reasons", %error, "cannot register metrics");
        }
    });
}

#[cfg(test)]
#[path = "waiting_metrics_tests.rs"]
mod tests;
