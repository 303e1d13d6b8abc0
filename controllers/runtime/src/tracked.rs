//! The sizes of the maps a controller keeps per object beside the informer caches
//! (expectations, backoff records, the last status written, work queue retries, ...), exported
//! as the gauge `rkcm_tracked_entries{controller, map, bound}`.
//!
//! Every entry of such a map names one object. When the objects go, their entries must go too,
//! or a manager whose objects come and go grows for as long as it runs. With every object a
//! controller handled deleted, each map it registered here reads zero again — except the
//! [`Bound`] ones, which forget by time or by capacity and say which. The rkcm binary's
//! real-plane test deletes a workload of every kind and waits for exactly that.
//!
//! Guarantees:
//! - Registering costs the owner nothing on its hot paths: the sizes are read when `/metrics`
//!   is scraped (or [`snapshot`] is called), never counted as the maps change.
//! - A registration does not keep its owner alive: it holds a weak reference and is dropped at
//!   the first read after the owner is gone.
//! - Two live owners with the same `controller` and `map` (tests build several) add up.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{IntGaugeVec, Opts};

use crate::metrics;

/// Name of the gauge.
pub const METRIC: &str = "rkcm_tracked_entries";

/// How a map forgets an entry once its object is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bound {
    /// When the controller sees the object deleted (or finds it gone at its next sync): the
    /// map is empty once every object it named is deleted.
    Object,
    /// When a time passes (a delayed work-queue key fires at its due time, then the sync finds
    /// the object gone): empty after the longest delay the controller set.
    Time,
    /// Least recently used beyond a fixed capacity (the event correlation caches, 4 096
    /// entries each, as upstream's): never empty, never larger than its capacity.
    Capacity,
}

impl Bound {
    /// The `bound` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Object => "object",
            Bound::Time => "time",
            Bound::Capacity => "capacity",
        }
    }
}

/// One map's size, as an owner reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size {
    pub map: &'static str,
    pub bound: Bound,
    pub entries: usize,
}

impl Size {
    /// A map emptied when its objects are deleted.
    pub fn object(map: &'static str, entries: usize) -> Self {
        Self {
            map,
            bound: Bound::Object,
            entries,
        }
    }

    /// A map emptied when the delays it holds are over.
    pub fn time(map: &'static str, entries: usize) -> Self {
        Self {
            map,
            bound: Bound::Time,
            entries,
        }
    }

    /// A map of fixed capacity.
    pub fn capacity(map: &'static str, entries: usize) -> Self {
        Self {
            map,
            bound: Bound::Capacity,
            entries,
        }
    }
}

/// Reads one owner's sizes; `false` once the owner is gone.
type Reader = Box<dyn Fn(&mut Vec<Size>) -> bool + Send + Sync>;

struct Registration {
    controller: String,
    read: Reader,
}

fn registrations() -> &'static Mutex<Vec<Registration>> {
    static ALL: OnceLock<Mutex<Vec<Registration>>> = OnceLock::new();
    ALL.get_or_init(|| Mutex::new(Vec::new()))
}

/// Registers the maps of `owner` under `controller`: `sizes` pushes one [`Size`] per map and is
/// called at each read for as long as `owner` lives.
pub fn track<T: Send + Sync + 'static>(
    controller: &str,
    owner: &Arc<T>,
    sizes: fn(&T, &mut Vec<Size>),
) {
    let weak: Weak<T> = Arc::downgrade(owner);
    let read: Reader = Box::new(move |out| match weak.upgrade() {
        Some(owner) => {
            sizes(&owner, out);
            true
        }
        None => false,
    });
    registrations().lock().push(Registration {
        controller: controller.to_owned(),
        read,
    });
    ensure_exported();
}

/// The entries of every registered map of live owners, by `(controller, map)`, with its
/// bound. Drops the registrations of owners that are gone.
pub fn snapshot() -> BTreeMap<(String, &'static str), (Bound, usize)> {
    let mut all = registrations().lock();
    let mut out = BTreeMap::new();
    let mut sizes = Vec::new();
    all.retain(|r| {
        sizes.clear();
        if !(r.read)(&mut sizes) {
            return false;
        }
        for s in &sizes {
            let entry = out
                .entry((r.controller.clone(), s.map))
                .or_insert((s.bound, 0));
            entry.1 += s.entries;
        }
        true
    });
    out
}

/// The collector behind `/metrics`: reads [`snapshot`] at each scrape.
#[derive(Clone)]
struct Exporter {
    desc: Vec<Desc>,
}

fn opts() -> Opts {
    Opts::new(
        METRIC,
        "Entries of the maps a controller keeps per object beside its informer caches; \
         bound says when an entry goes: object (with its object), time (after a delay), \
         capacity (least recently used beyond a fixed size)",
    )
}

const LABELS: [&str; 3] = ["controller", "map", "bound"];

impl Exporter {
    fn build() -> prometheus::Result<Self> {
        let gauges = IntGaugeVec::new(opts(), &LABELS)?;
        let desc = gauges.desc().into_iter().cloned().collect();
        Ok(Self { desc })
    }
}

impl Collector for Exporter {
    fn desc(&self) -> Vec<&Desc> {
        self.desc.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let Ok(gauges) = IntGaugeVec::new(opts(), &LABELS) else {
            return Vec::new();
        };
        for ((controller, map), (bound, entries)) in snapshot() {
            gauges
                .with_label_values(&[controller.as_str(), map, bound.as_str()])
                .set(i64::try_from(entries).unwrap_or(i64::MAX));
        }
        gauges.collect()
    }
}

fn ensure_exported() {
    static EXPORTER: OnceLock<Option<Exporter>> = OnceLock::new();
    metrics::get_or_register(&EXPORTER, "tracked entries", || {
        Ok(metrics::register(Exporter::build()?))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Owner {
        a: Mutex<Vec<u32>>,
        b: usize,
    }

    fn sizes(o: &Owner, out: &mut Vec<Size>) {
        out.push(Size::object("a", o.a.lock().len()));
        out.push(Size::capacity("b", o.b));
    }

    fn entries(controller: &str, map: &str) -> Option<(Bound, usize)> {
        snapshot()
            .into_iter()
            .find(|((c, m), _)| c == controller && *m == map)
            .map(|(_, v)| v)
    }

    #[test]
    fn reads_live_sizes_adds_up_owners_and_forgets_dropped_ones() {
        let first = Arc::new(Owner {
            a: Mutex::new(vec![1, 2]),
            b: 7,
        });
        track("tracked-test-one", &first, sizes);
        assert_eq!(entries("tracked-test-one", "a"), Some((Bound::Object, 2)));
        assert_eq!(entries("tracked-test-one", "b"), Some((Bound::Capacity, 7)));
        // Read at each snapshot, not when registered.
        first.a.lock().push(3);
        assert_eq!(entries("tracked-test-one", "a"), Some((Bound::Object, 3)));

        let second = Arc::new(Owner {
            a: Mutex::new(vec![9]),
            b: 0,
        });
        track("tracked-test-one", &second, sizes);
        assert_eq!(entries("tracked-test-one", "a"), Some((Bound::Object, 4)));

        // The registration does not keep the owner alive, and goes with it.
        let weak = Arc::downgrade(&first);
        drop(first);
        assert!(weak.upgrade().is_none());
        assert_eq!(entries("tracked-test-one", "a"), Some((Bound::Object, 1)));
        drop(second);
        assert_eq!(entries("tracked-test-one", "a"), None);
    }

    #[test]
    fn exported_as_a_gauge_with_controller_map_and_bound() {
        let owner = Arc::new(Owner {
            a: Mutex::new(vec![1, 2, 3, 4, 5]),
            b: 0,
        });
        track("tracked-test-two", &owner, sizes);
        let text = metrics::render();
        assert!(
            text.contains(
                "rkcm_tracked_entries{bound=\"object\",controller=\"tracked-test-two\",map=\"a\"} 5\n"
            ),
            "{text}"
        );
        assert!(text.contains("# TYPE rkcm_tracked_entries gauge"), "{text}");
        drop(owner);
        assert!(
            !metrics::render().contains("controller=\"tracked-test-two\""),
            "a dropped owner is no longer exported"
        );
    }
}
