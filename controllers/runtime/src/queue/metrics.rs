//! The upstream `workqueue_*` metrics (client-go `util/workqueue/metrics.go`): the families,
//! registered once per process, and one queue's labelled children.

use std::sync::OnceLock;

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts,
};

use crate::metrics::register;

/// The metric families, registered once per process; queues take their labelled children.
pub(super) struct Families {
    pub(super) depth: IntGaugeVec,
    pub(super) adds: IntCounterVec,
    pub(super) queue_duration: HistogramVec,
    pub(super) work_duration: HistogramVec,
    pub(super) unfinished_work: GaugeVec,
    pub(super) longest_running: GaugeVec,
    pub(super) retries: IntCounterVec,
}

impl Families {
    fn build() -> prometheus::Result<Self> {
        let label = &["name"];
        let buckets = prometheus::exponential_buckets(1e-8, 10.0, 10)?;
        let families = Self {
            depth: register(IntGaugeVec::new(
                Opts::new("workqueue_depth", "Current depth of workqueue"),
                label,
            )?),
            adds: register(IntCounterVec::new(
                Opts::new(
                    "workqueue_adds_total",
                    "Total number of adds handled by workqueue",
                ),
                label,
            )?),
            queue_duration: register(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_queue_duration_seconds",
                    "How long in seconds an item stays in workqueue before being requested.",
                )
                .buckets(buckets.clone()),
                label,
            )?),
            work_duration: register(HistogramVec::new(
                HistogramOpts::new(
                    "workqueue_work_duration_seconds",
                    "How long in seconds processing an item from workqueue takes.",
                )
                .buckets(buckets),
                label,
            )?),
            unfinished_work: register(GaugeVec::new(
                Opts::new(
                    "workqueue_unfinished_work_seconds",
                    "How many seconds of work has done that is in progress and hasn't been \
                     observed by work_duration. Large values indicate stuck threads. One can \
                     deduce the number of stuck threads by observing the rate at which this \
                     increases.",
                ),
                label,
            )?),
            longest_running: register(GaugeVec::new(
                Opts::new(
                    "workqueue_longest_running_processor_seconds",
                    "How many seconds has the longest running processor for workqueue been \
                     running.",
                ),
                label,
            )?),
            retries: register(IntCounterVec::new(
                Opts::new(
                    "workqueue_retries_total",
                    "Total number of retries handled by workqueue",
                ),
                label,
            )?),
        };
        Ok(families)
    }

    pub(super) fn for_queue(&self, name: &str) -> QueueMetrics {
        let label = &[name];
        QueueMetrics {
            depth: self.depth.with_label_values(label),
            adds: self.adds.with_label_values(label),
            queue_duration: self.queue_duration.with_label_values(label),
            work_duration: self.work_duration.with_label_values(label),
            unfinished_work: self.unfinished_work.with_label_values(label),
            longest_running: self.longest_running.with_label_values(label),
            retries: self.retries.with_label_values(label),
        }
    }
}

pub(super) fn families() -> Option<&'static Families> {
    static FAMILIES: OnceLock<Option<Families>> = OnceLock::new();
    crate::metrics::get_or_register(&FAMILIES, "workqueue", Families::build)
}

/// One queue's labelled metric children.
pub(super) struct QueueMetrics {
    pub(super) depth: IntGauge,
    pub(super) adds: IntCounter,
    pub(super) queue_duration: Histogram,
    pub(super) work_duration: Histogram,
    pub(super) unfinished_work: Gauge,
    pub(super) longest_running: Gauge,
    pub(super) retries: IntCounter,
}
