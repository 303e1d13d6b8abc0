//! `/flagz` and `/statusz`, behind the beta gates `ComponentFlagz` and `ComponentStatusz` (on
//! by default), as kube-controller-manager serves them (cmd/kube-controller-manager/app/
//! controllermanager.go installs k8s.io/apiserver `pkg/server/flagz` and `pkg/server/statusz`
//! on the mux behind `BuildHandlerChain`): authenticated and authorized like `/metrics` (a
//! `get` of the path), GET only.
//!
//! - No `Accept` header, `text/plain` or `*/*`: upstream's text page, a header line
//!   `<component> flagz|statusz` and its warning that the page is not machine parseable, then
//!   one line per flag (sorted) or status field; the delimiter between name and value is
//!   picked at random from upstream's four (once per process for `/flagz`, whose text
//!   upstream caches; per request for `/statusz`), so nobody parses it.
//! - `application/json` or `application/yaml` with `;as=Flagz|Statusz;g=config.k8s.io;
//!   v=v1beta1` (or the deprecated `v1alpha1`, answered with upstream's `Warning` header): the
//!   `config.k8s.io` object; pretty-printed for `?pretty=true` or `curl`/`Wget`/browser user
//!   agents, as the apiserver's negotiation does.
//! - Anything else: 406 with upstream's `NotAcceptable` Status (CBOR is not offered: upstream
//!   offers it only with `CBORServingAndStorage`, off by default).
//!
//! The component is named `rkcm`; the binary version is rkcm's, the emulation version the
//! Kubernetes minor whose flags and gates rkcm follows, and `goVersion` holds the Rust
//! toolchain (as `kubernetes_build_info`'s `go_version` label does).

use std::collections::BTreeMap;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use http::{HeaderMap, Method, StatusCode, header};
use serde::Serialize;

/// The component name on both pages.
pub const COMPONENT: &str = "rkcm";
/// The Kubernetes minor whose flags and feature gates rkcm follows.
pub const EMULATION_VERSION: &str = "1.37";
const FLAGZ: &str = "/flagz";
const STATUSZ: &str = "/statusz";
const GROUP: &str = "config.k8s.io";
const PLAIN: &str = "text/plain; charset=utf-8";
/// Upstream's delimiters between a name and its value on the text pages.
const DELIMITERS: [&str; 4] = [":", ": ", "=", " "];
const WARNING: &str = "Warning: This endpoint is not meant to be machine parseable, has no \
                       formatting compatibility guarantees and is for debugging purposes only.";
/// What upstream offers, in its order (the 406 message lists them).
const OFFERED: [&str; 3] = ["application/json", "application/yaml", "text/plain"];

static PROCESS_START: LazyLock<SystemTime> = LazyLock::new(SystemTime::now);

/// Records the process's start for `/statusz`; call first thing in `main`.
pub fn mark_process_start() {
    LazyLock::force(&PROCESS_START);
}

/// One answer, for the server to send with its usual headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub status: StatusCode,
    pub content_type: String,
    pub body: String,
    /// A `Warning` header (the deprecated `v1alpha1`).
    pub warning: Option<String>,
}

fn text(status: StatusCode, content_type: &str, body: String) -> Page {
    Page {
        status,
        content_type: content_type.to_owned(),
        body,
        warning: None,
    }
}

/// The two pages, each present when its gate is on.
#[derive(Clone, Debug, Default)]
pub struct Zpages {
    flagz: Option<Flagz>,
    statusz: Option<Statusz>,
}

#[derive(Clone, Debug)]
struct Flagz {
    flags: BTreeMap<String, String>,
    /// The text page, built once with one delimiter, as upstream caches it.
    text: String,
}

#[derive(Clone, Debug)]
struct Statusz {
    started: SystemTime,
    go_version: String,
    binary_version: String,
    paths: Vec<String>,
}

/// What a request negotiated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    Text,
    Structured {
        yaml: bool,
        version: &'static str,
        pretty: bool,
    },
}

impl Zpages {
    /// `flags` are the effective flags (name, value); `flagz`/`statusz` the gates.
    pub fn new(flagz: bool, statusz: bool, flags: &[(String, String)]) -> Self {
        let flags: BTreeMap<String, String> = flags.iter().cloned().collect();
        let build = super::metrics::build_info();
        Self {
            flagz: flagz.then(|| Flagz {
                text: flagz_text(&flags, random_delimiter()),
                flags,
            }),
            statusz: statusz.then(|| Statusz {
                started: *PROCESS_START,
                go_version: build.rustc_version,
                binary_version: env!("CARGO_PKG_VERSION").to_owned(),
                paths: listed_paths(flagz),
            }),
        }
    }

    /// The answer to `path`, or `None` when it is not one of the pages (or its gate is off).
    pub fn answer(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
    ) -> Option<Page> {
        if method != Method::GET && method != Method::HEAD {
            return None;
        }
        let kind = match path {
            FLAGZ if self.flagz.is_some() => "Flagz",
            STATUSZ if self.statusz.is_some() => "Statusz",
            _ => return None,
        };
        let header = |name| headers.get(name).and_then(|v| v.to_str().ok());
        let format = negotiate(
            header(header::ACCEPT).unwrap_or(""),
            kind,
            query,
            header(header::USER_AGENT).unwrap_or(""),
        );
        let Some(format) = format else {
            return Some(not_acceptable(is_pretty(
                query,
                header(header::USER_AGENT).unwrap_or(""),
            )));
        };
        Some(match (&self.flagz, &self.statusz, kind) {
            (Some(f), _, "Flagz") => respond_flagz(f, format),
            (_, Some(s), _) => respond_statusz(s, format, SystemTime::now()),
            _ => return None,
        })
    }
}

/// The top-level paths rkcm lists (upstream lists its mux's non-prefix paths, folded to their
/// first segment, before `/statusz` itself is installed).
fn listed_paths(flagz: bool) -> Vec<String> {
    let mut paths = vec!["/configz", "/healthz", "/livez", "/metrics", "/readyz"];
    if flagz {
        paths.push(FLAGZ);
    }
    paths.sort_unstable();
    paths.into_iter().map(str::to_owned).collect()
}

fn random_delimiter() -> &'static str {
    DELIMITERS[rand::random_range(0..DELIMITERS.len())]
}

fn header_lines(page: &str) -> String {
    format!("\n{COMPONENT} {page}\n{WARNING}\n")
}

/// Upstream's `flagzTextSerializer`: the header, then `name<delim>value` per flag, sorted.
fn flagz_text(flags: &BTreeMap<String, String>, delim: &str) -> String {
    let mut out = header_lines("flagz");
    for (name, value) in flags {
        out.push_str(&format!("{name}{delim}{value}\n"));
    }
    out
}

/// Upstream's `statuszTextSerializer` (its values HTML-escaped, as there).
fn statusz_text(s: &Statusz, now: SystemTime, delim: &str) -> String {
    let started = jiff::Timestamp::try_from(s.started)
        .map(|t| {
            t.to_zoned(jiff::tz::TimeZone::system())
                .strftime("%a %b %e %H:%M:%S %Z %Y")
                .to_string()
        })
        .unwrap_or_default();
    let paths = if s.paths.is_empty() {
        String::new()
    } else {
        format!("Paths{delim} {}", escape(&s.paths.join(" ")))
    };
    format!(
        "{}\nStarted{delim} {}\nUp{delim} {}\nGo version{delim} {}\nBinary version{delim} {}\n\
         Emulation version{delim} {}\n{paths}\n",
        header_lines("statusz"),
        escape(&started),
        uptime(up_seconds(s.started, now)),
        escape(&s.go_version),
        escape(&s.binary_version),
        escape(EMULATION_VERSION),
    )
}

fn up_seconds(started: SystemTime, now: SystemTime) -> u64 {
    now.duration_since(started)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

/// `%d hr %02d min %02d sec`.
fn uptime(secs: u64) -> String {
    format!(
        "{} hr {:02} min {:02} sec",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// Go's `html.EscapeString`.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('\'', "&#39;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&#34;")
}

/// One clause of an `Accept` header (goautoneg): type, subtype, q and the other parameters.
struct Clause<'a> {
    kind: &'a str,
    sub: &'a str,
    q: f32,
    params: Vec<(&'a str, &'a str)>,
}

fn parse_accept(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';').map(str::trim);
            let media = pieces.next().filter(|m| !m.is_empty())?;
            let (kind, sub) = media.split_once('/').unwrap_or((media, "*"));
            let mut clause = Clause {
                kind,
                sub,
                q: 1.0,
                params: Vec::new(),
            };
            for p in pieces {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                let (k, v) = (k.trim(), v.trim());
                if k == "q" {
                    clause.q = v.parse().unwrap_or(0.0);
                } else {
                    clause.params.push((k, v));
                }
            }
            Some(clause)
        })
        .collect();
    // Highest q first; a concrete type before a wildcard at equal q.
    clauses.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.sub == "*").cmp(&(b.sub == "*")))
    });
    clauses
}

/// The apiserver's `isPrettyPrint`: `?pretty=<true>` or a curl, Wget or browser user agent.
fn is_pretty(query: Option<&str>, user_agent: &str) -> bool {
    let by_query = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("pretty="))
        .filter(|v| !v.is_empty());
    if let Some(v) = by_query {
        return matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True");
    }
    ["curl", "Wget", "Mozilla/5.0"]
        .iter()
        .any(|p| user_agent.starts_with(p))
}

/// Upstream's negotiation for these pages (`NegotiateMediaTypeOptions` with the endpoints'
/// restrictions): the first clause, best first, that an offered type matches and whose
/// conversion the page allows. `None` is 406.
fn negotiate(accept: &str, kind: &str, query: Option<&str>, user_agent: &str) -> Option<Format> {
    if accept.trim().is_empty() {
        return Some(Format::Text);
    }
    for clause in parse_accept(accept) {
        for offered in OFFERED {
            let (t, s) = offered.split_once('/').unwrap_or((offered, ""));
            let matches = (clause.kind == t && (clause.sub == s || clause.sub == "*"))
                || (clause.kind == "*" && clause.sub == "*");
            if matches && let Some(f) = accept_clause(&clause, offered, kind, query, user_agent) {
                return Some(f);
            }
        }
    }
    None
}

/// `acceptMediaTypeOptions` + `AllowsMediaTypeTransform` for one offered type.
fn accept_clause(
    clause: &Clause<'_>,
    offered: &str,
    kind: &str,
    query: Option<&str>,
    user_agent: &str,
) -> Option<Format> {
    let (mut g, mut v, mut as_kind, mut convert, mut pretty) = ("", "", "", false, false);
    for &(k, val) in &clause.params {
        match k {
            "as" => (as_kind, convert) = (val, true),
            "g" => (g, convert) = (val, true),
            "v" => (v, convert) = (val, true),
            // No stream serializer and no server-version conversion on these pages.
            "stream" | "sv" if !val.is_empty() => return None,
            "pretty" => pretty = val == "1",
            _ => {}
        }
    }
    if offered == "text/plain" {
        return (!convert).then_some(Format::Text);
    }
    let version = match v {
        "v1beta1" => "v1beta1",
        "v1alpha1" => "v1alpha1",
        _ => return None,
    };
    (g == GROUP && as_kind == kind).then_some(Format::Structured {
        yaml: offered == "application/yaml",
        version,
        pretty: pretty || is_pretty(query, user_agent),
    })
}

#[derive(Serialize)]
struct Meta {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlagzObject<'a> {
    kind: &'static str,
    api_version: String,
    metadata: Meta,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    flags: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatuszObject<'a> {
    kind: &'static str,
    api_version: String,
    metadata: Meta,
    start_time: String,
    uptime_seconds: u64,
    go_version: &'a str,
    binary_version: &'a str,
    emulation_version: &'static str,
    paths: &'a [String],
}

fn respond_flagz(f: &Flagz, format: Format) -> Page {
    match format {
        Format::Text => text(StatusCode::OK, PLAIN, f.text.clone()),
        Format::Structured { version, .. } => structured(
            "Flagz",
            format,
            &FlagzObject {
                kind: "Flagz",
                api_version: format!("{GROUP}/{version}"),
                metadata: Meta { name: COMPONENT },
                flags: &f.flags,
            },
        ),
    }
}

fn respond_statusz(s: &Statusz, format: Format, now: SystemTime) -> Page {
    match format {
        Format::Text => text(
            StatusCode::OK,
            PLAIN,
            statusz_text(s, now, random_delimiter()),
        ),
        Format::Structured { version, .. } => {
            let start_time = jiff::Timestamp::try_from(s.started)
                .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
                .unwrap_or_default();
            structured(
                "Statusz",
                format,
                &StatuszObject {
                    kind: "Statusz",
                    api_version: format!("{GROUP}/{version}"),
                    metadata: Meta { name: COMPONENT },
                    start_time,
                    uptime_seconds: up_seconds(s.started, now),
                    go_version: &s.go_version,
                    binary_version: &s.binary_version,
                    emulation_version: EMULATION_VERSION,
                    paths: &s.paths,
                },
            )
        }
    }
}

/// A `config.k8s.io` object as JSON or YAML, with the negotiated content type and, for the
/// deprecated version, upstream's warning.
fn structured(kind: &str, format: Format, obj: &impl Serialize) -> Page {
    let Format::Structured {
        yaml,
        version,
        pretty,
    } = format
    else {
        return text(StatusCode::INTERNAL_SERVER_ERROR, PLAIN, String::new());
    };
    let body = if yaml {
        serde_yaml::to_string(&serde_json::to_value(obj).unwrap_or_default())
            .map_err(|e| e.to_string())
    } else {
        encode_json(obj, pretty)
    };
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                PLAIN,
                format!("encoding {kind}: {e}\n"),
            );
        }
    };
    let media = if yaml {
        "application/yaml"
    } else {
        "application/json"
    };
    let mut resp = text(
        StatusCode::OK,
        &format!("{media};g={GROUP};v={version};as={kind}"),
        body,
    );
    if version == "v1alpha1" {
        resp.warning = Some(format!(
            "299 - \"This version of the {} endpoint is deprecated. Please use a newer \
             version.\"",
            kind.to_ascii_lowercase()
        ));
    }
    resp
}

/// Go's JSON serializer: compact with a final newline, or indented by two spaces without.
fn encode_json(obj: &impl Serialize, pretty: bool) -> Result<String, String> {
    if pretty {
        serde_json::to_string_pretty(obj).map_err(|e| e.to_string())
    } else {
        serde_json::to_string(obj)
            .map(|s| s + "\n")
            .map_err(|e| e.to_string())
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    kind: &'static str,
    api_version: &'static str,
    metadata: BTreeMap<String, String>,
    status: &'static str,
    message: String,
    reason: &'static str,
    code: u16,
}

/// Upstream's 406: `NotAcceptable`, listing what the page offers.
fn not_acceptable(pretty: bool) -> Page {
    let status = Status {
        kind: "Status",
        api_version: "v1",
        metadata: BTreeMap::new(),
        status: "Failure",
        message: format!(
            "only the following media types are accepted: {}",
            OFFERED.join(", ")
        ),
        reason: "NotAcceptable",
        code: 406,
    };
    let body = encode_json(&status, pretty).unwrap_or_default();
    text(StatusCode::NOT_ACCEPTABLE, "application/json", body)
}

#[cfg(test)]
#[path = "zpages_tests.rs"]
mod tests;
