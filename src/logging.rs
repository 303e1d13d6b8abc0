//! Process logging: `tracing` to stderr (where klog writes), as text or JSON
//! (`--logging-format`), with klog-style verbosity (`-v`) mapped onto tracing levels.
//!
//! `-v` 0–1 → info, 2–4 → debug, ≥5 → trace for rkcm's own crates. Dependencies (kube,
//! hyper, rustls, ...) stay one step quieter so `-v=2` shows controller decisions rather
//! than every HTTP exchange; at `-v>=5` they log at debug. `RUST_LOG`, when set, replaces
//! the whole filter.

use std::io::IsTerminal as _;

use tracing_subscriber::EnvFilter;

/// Log output format, `--logging-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

impl Format {
    /// Parses the flag value; the CLI already restricts it to `text`/`json`.
    pub fn from_flag(s: &str) -> Self {
        if s == "json" {
            Format::Json
        } else {
            Format::Text
        }
    }
}

/// The crates whose verbosity `-v` controls directly.
const OWN_CRATES: &[&str] = &["rkcm", "rkcm_runtime", "rkcm_podgc"];

/// The filter directives for verbosity `v` (exposed for tests).
pub fn directives(v: i32) -> String {
    let (own, deps) = match v {
        i32::MIN..=1 => ("info", "info"),
        2..=4 => ("debug", "info"),
        _ => ("trace", "debug"),
    };
    let mut out = deps.to_string();
    for c in OWN_CRATES {
        out.push_str(&format!(",{c}={own}"));
    }
    out
}

/// Installs the global subscriber. Fails only if one is already installed or `RUST_LOG` is
/// malformed.
pub fn init(format: Format, v: i32) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => {
            EnvFilter::try_new(&spec).map_err(|e| format!("invalid RUST_LOG {spec:?}: {e}"))?
        }
        _ => EnvFilter::try_new(directives(v)).map_err(|e| e.to_string())?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(true)
        // The fallback for a failed write is `eprintln!`, which panics when stderr is a
        // closed pipe; a lost log line must never take the manager down.
        .log_internal_errors(false);
    let result = match format {
        Format::Json => builder.json().flatten_event(true).try_init(),
        Format::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
    };
    result.map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels() {
        assert!(directives(0).starts_with("info,") && directives(0).contains("rkcm=info"));
        assert!(directives(1).contains("rkcm_podgc=info"));
        assert!(directives(2).starts_with("info,") && directives(2).contains("rkcm=debug"));
        assert!(directives(4).contains("rkcm_runtime=debug"));
        assert!(directives(5).starts_with("debug,") && directives(5).contains("rkcm=trace"));
        assert!(directives(-1).contains("rkcm=info"));
        for v in [0, 2, 9] {
            EnvFilter::try_new(directives(v)).expect("valid directives");
        }
    }

    #[test]
    fn format_from_flag() {
        assert_eq!(Format::from_flag("json"), Format::Json);
        assert_eq!(Format::from_flag("text"), Format::Text);
    }
}
