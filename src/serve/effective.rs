//! `/debug/rkcm/config`: the running manager's effective configuration for planning, so that
//! `rkcm explain --manager URL` plans with it rather than with built-in defaults. Served
//! behind the same authentication and authorization as `/metrics` (a `get` of the path).
//!
//! The answer is JSON `{"flags": [...], "localTimeZone": "..."}`: the flags that reproduce what
//! the controllers' plans depend on, as the manager took them: `--feature-gates` (the values
//! given), every `--rkcm-*` flag and `--terminated-pod-gc-threshold`, each `--NAME=VALUE` with
//! its effective value, which `rkcm explain` parses with the manager's own flag parser; and the
//! manager's local time zone, in which a CronJob without `spec.timeZone` is scheduled (its
//! IANA name; absent when the system's zone has none).

use std::sync::OnceLock;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde::{Deserialize, Serialize};

use crate::cli::Cli;

/// The path served.
pub const PATH: &str = "/debug/rkcm/config";

/// What the endpoint answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effective {
    /// `--NAME=VALUE` for each flag the plans depend on.
    pub flags: Vec<String>,
    /// The IANA name of the manager's local time zone (older managers send none).
    #[serde(
        default,
        rename = "localTimeZone",
        skip_serializing_if = "Option::is_none"
    )]
    pub local_time_zone: Option<String>,
}

/// Whether the flag `name` (long, without dashes) changes a plan.
pub fn plans_with(name: &str) -> bool {
    name == "feature-gates"
        || name == "terminated-pod-gc-threshold"
        // Where sharded mode's Leases are, to name the replica that owns an object.
        || name == "leader-elect-resource-namespace"
        || name.starts_with("rkcm-")
}

/// The planning flags of `cli`, from its effective flags.
pub fn of(cli: &Cli) -> Effective {
    Effective {
        flags: cli
            .effective_flags
            .iter()
            .filter(|(name, value)| {
                plans_with(name) && !(name == "feature-gates" && value.is_empty())
            })
            .map(|(name, value)| format!("--{name}={value}"))
            .collect(),
        local_time_zone: jiff::tz::TimeZone::system().iana_name().map(str::to_owned),
    }
}

static PUBLISHED: OnceLock<String> = OnceLock::new();

/// Makes `cli`'s planning configuration the endpoint's answer (once, at startup).
pub fn publish(cli: &Cli) {
    if let Ok(body) = serde_json::to_string(&of(cli)) {
        let _ = PUBLISHED.set(body);
    }
}

/// The endpoint's answer: the published configuration, or 503 before it is published.
pub fn answer() -> Response<Full<Bytes>> {
    let (status, body) = match PUBLISHED.get() {
        Some(body) => (StatusCode::OK, body.clone()),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            "{\"error\":\"the configuration is not published yet\"}".to_owned(),
        ),
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cli(args: &[&str]) -> Cli {
        let argv = std::iter::once("rkcm").chain(args.iter().copied());
        match crate::cli::parse::parse(argv) {
            Ok(crate::cli::Invocation::Run(cli)) => *cli,
            other => panic!("{args:?}: {other:?}"),
        }
    }

    #[test]
    fn publishes_the_gates_given_and_every_planning_flag() {
        let e = of(&cli(&[
            "--feature-gates=MaxUnavailableStatefulSet=false",
            "--rkcm-daemonset-rollout-skip-not-ready-nodes",
            "--terminated-pod-gc-threshold=7",
            "--concurrent-job-syncs=9",
        ]));
        assert!(
            e.flags
                .contains(&"--feature-gates=MaxUnavailableStatefulSet=false".to_owned()),
            "{e:?}"
        );
        assert!(
            e.flags
                .contains(&"--rkcm-daemonset-rollout-skip-not-ready-nodes=true".to_owned()),
            "{e:?}"
        );
        assert!(
            e.flags
                .contains(&"--terminated-pod-gc-threshold=7".to_owned()),
            "{e:?}"
        );
        assert!(!e.flags.iter().any(|f| f.contains("concurrent")), "{e:?}");
        // Every `--rkcm-*` flag of the command is published.
        let rkcm = crate::cli::parse::command()
            .get_arguments()
            .filter_map(|a| a.get_long().map(str::to_owned))
            .filter(|l| l.starts_with("rkcm-"))
            .count();
        assert_eq!(
            e.flags.iter().filter(|f| f.starts_with("--rkcm-")).count(),
            rkcm
        );
        // The CronJob controller's local zone is the process's.
        assert_eq!(
            e.local_time_zone.as_deref(),
            jiff::tz::TimeZone::system().iana_name()
        );
        // Defaults: no gates given, none published.
        let d = of(&cli(&[]));
        assert!(
            !d.flags.iter().any(|f| f.starts_with("--feature-gates")),
            "{d:?}"
        );
    }

    #[test]
    fn answers_json_once_published() {
        let before = answer();
        assert!(
            before.status() == StatusCode::SERVICE_UNAVAILABLE || before.status() == StatusCode::OK
        );
        publish(&cli(&["--terminated-pod-gc-threshold=3"]));
        let r = answer();
        assert_eq!(r.status(), StatusCode::OK);
    }
}
