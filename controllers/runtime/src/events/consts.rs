//! Upstream constants (client-go `tools/record`).

/// Buffer between recorders and the writer task (`maxQueuedEvents`).
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// Write attempts per event (`maxTriesPerEvent`).
pub const MAX_TRIES_PER_EVENT: u32 = 12;
/// Pause between write attempts (`defaultSleepDuration`).
pub const SLEEP_BETWEEN_TRIES: std::time::Duration = std::time::Duration::from_secs(10);
/// Size of each correlation LRU cache (`maxLruCacheEntries`).
pub const LRU_CACHE_ENTRIES: usize = 4096;
/// Similar events (differing only in message) before aggregation (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// Window of the aggregation (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL_SECONDS: i64 = 600;
/// How often the correlator drops entries that can no longer change an outcome (rkcm's
/// own; upstream relies on the LRU alone).
pub const SWEEP_EVERY_SECONDS: i64 = 60;
/// Spam filter bucket size per source+object (`defaultSpamBurst`).
pub const SPAM_BURST: f64 = 25.0;
/// Spam filter refill, tokens per second (`defaultSpamQPS`).
pub const SPAM_QPS: f64 = 1.0 / 300.0;
/// Prefix of aggregated messages (`EventAggregatorByReasonMessageFunc`).
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";
/// Namespace of events about cluster-scoped objects (`metav1.NamespaceDefault`).
pub const DEFAULT_NAMESPACE: &str = "default";
