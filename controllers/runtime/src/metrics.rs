//! The process-wide Prometheus registry. Every rkcm metric registers here with its upstream
//! name; `/metrics` renders it. Process metrics (`process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, ...) come from the prometheus crate's process collector.

use prometheus::{Encoder, Registry, TextEncoder};

/// The registry every metric of this process registers with.
pub fn registry() -> &'static Registry {
    prometheus::default_registry()
}

/// Renders every registered metric in the Prometheus text format.
pub fn render() -> String {
    let mut buf = Vec::new();
    let families = registry().gather();
    if TextEncoder::new().encode(&families, &mut buf).is_err() {
        return String::new();
    }
    String::from_utf8(buf).unwrap_or_default()
}
