//! The process-wide Prometheus registry and the one way to register a metric in it. Every rkcm
//! metric registers here with its upstream name; `/metrics` renders it. Process metrics
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, ...) come from the
//! prometheus crate's process collector.
//!
//! How a module defines its metrics:
//!
//! ```ignore
//! struct Metrics { total: IntCounterVec }
//!
//! impl Metrics {
//!     fn build() -> prometheus::Result<Self> {
//!         Ok(Self {
//!             total: metrics::register(IntCounterVec::new(Opts::new(NAME, HELP), LABELS)?),
//!         })
//!     }
//! }
//!
//! fn get() -> Option<&'static Metrics> {
//!     static METRICS: OnceLock<Option<Metrics>> = OnceLock::new();
//!     metrics::get_or_register(&METRICS, "my metrics", Metrics::build)
//! }
//! ```
//!
//! Guarantees:
//! - [`get_or_register`] builds and registers a set of metrics once per process, on first use;
//!   every later call returns the same instances.
//! - A definition that cannot be built (only an invalid constant name, help or bucket list can
//!   cause that, and each module's unit test renders its metrics) gives `None`, logged once:
//!   losing a metric never stops a controller, never panics.
//! - [`register`] tolerates a second registration of the same family (tests building a
//!   second instance): the first one stays exported, nothing is logged above debug. A name
//!   clash with a *different* definition is logged as a warning.

use std::sync::OnceLock;

use prometheus::core::Collector;
use prometheus::{Encoder, Registry, TextEncoder};

/// The registry every metric of this process registers with.
pub fn registry() -> &'static Registry {
    prometheus::default_registry()
}

/// Registers `metric` in the process registry and returns it, so it can be stored where it is
/// updated. Registration problems are logged, never returned: the metric keeps counting even
/// when it cannot be exported.
pub fn register<C: Collector + Clone + 'static>(metric: C) -> C {
    if let Err(error) = registry().register(Box::new(metric.clone())) {
        let names: Vec<&str> = metric
            .desc()
            .iter()
            .map(|desc| desc.fq_name.as_str())
            .collect();
        match error {
            // Registered before (tests build several instances): the first one is exported.
            prometheus::Error::AlreadyReg => {
                tracing::debug!(?names, "metric already registered");
            }
            error => tracing::warn!(?names, %error, "cannot register metric"),
        }
    }
    metric
}

/// The process-wide instance of a set of metrics held in `cell`: built (and registered, with
/// [`register`]) by `build` on the first call. `None` if `build` failed, logged once with
/// `what`.
pub fn get_or_register<T>(
    cell: &'static OnceLock<Option<T>>,
    what: &str,
    build: impl FnOnce() -> prometheus::Result<T>,
) -> Option<&'static T> {
    cell.get_or_init(|| match build() {
        Ok(metrics) => Some(metrics),
        Err(error) => {
            tracing::error!(metrics = what, %error, "cannot build metrics");
            None
        }
    })
    .as_ref()
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

#[cfg(test)]
mod tests {
    use prometheus::{IntCounter, IntCounterVec, Opts};

    use super::*;

    #[test]
    fn registers_once_and_tolerates_a_second_registration() {
        let first =
            register(IntCounter::new("rkcm_test_metrics_once_total", "help").expect("valid"));
        first.inc();
        // Same definition again (a second instance in a test): not exported, no panic.
        let second =
            register(IntCounter::new("rkcm_test_metrics_once_total", "help").expect("valid"));
        second.inc_by(5);
        let text = render();
        assert!(text.contains("rkcm_test_metrics_once_total 1\n"), "{text}");
        // A clash with a different definition is refused, also without a panic.
        let clash = register(
            IntCounterVec::new(Opts::new("rkcm_test_metrics_once_total", "other"), &["x"])
                .expect("valid"),
        );
        clash.with_label_values(&["a"]).inc();
        assert_eq!(
            render()
                .matches("# TYPE rkcm_test_metrics_once_total")
                .count(),
            1
        );
    }

    #[test]
    fn get_or_register_builds_once() {
        static CELL: OnceLock<Option<IntCounter>> = OnceLock::new();
        let mut builds = 0;
        let a = get_or_register(&CELL, "test", || {
            builds += 1;
            Ok(register(IntCounter::new(
                "rkcm_test_get_or_register_total",
                "help",
            )?))
        })
        .expect("built");
        let b =
            get_or_register(&CELL, "test", || unreachable!("built once")).expect("same instance");
        assert!(std::ptr::eq(a, b));
        assert_eq!(builds, 1);
    }

    #[test]
    fn an_invalid_definition_gives_none() {
        static CELL: OnceLock<Option<IntCounter>> = OnceLock::new();
        let got = get_or_register(&CELL, "test", || {
            Ok(register(IntCounter::new("not a valid name", "help")?))
        });
        assert!(got.is_none());
        assert!(get_or_register(&CELL, "test", || unreachable!("failure is remembered")).is_none());
    }
}
