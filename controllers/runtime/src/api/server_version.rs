//! The API server's version: read from `/version` (kube's `Client::apiserver_version`) at start
//! and again while running, so that an upgrade to another minor is noticed; logged and
//! exported as `rkcm_apiserver_version_info{git_version,minor}` (upstream has no such metric:
//! a kube-controller-manager assumes the server of its own minor). The binary decides what a
//! minor means (which feature-gate registry applies); this module only reads and classifies.
//!
//! The minor is the server's *emulated* minor when it reports one (`emulationMinor`, an API
//! server started with `--emulated-version`): that is the API it serves.

use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::version::Info;
use prometheus::{IntGaugeVec, Opts};
use tokio_util::sync::CancellationToken;

use crate::metrics::{get_or_register, register};

/// What rkcm keeps of `/version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerVersion {
    /// `gitVersion`, e.g. `v1.34.4` or `v1.34.4-gke.1`.
    pub git_version: String,
    pub major: u32,
    /// The minor whose API the server serves (emulated if it emulates one).
    pub minor: u32,
}

impl std::fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (minor {})", self.git_version, self.minor)
    }
}

/// The leading digits of a `/version` number field: providers append `+` (`"34+"`).
fn number(field: &str) -> Option<u32> {
    let digits: String = field
        .trim()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `major.minor` from `v1.34.4-gke.1`, for servers whose `major`/`minor` fields are empty.
fn from_git_version(git: &str) -> Option<(u32, u32)> {
    let mut parts = git.trim_start_matches('v').split('.');
    Some((number(parts.next()?)?, number(parts.next()?)?))
}

/// Reads the version out of `/version`'s answer.
pub fn parse(info: &Info) -> Result<ServerVersion, String> {
    let emulated = info
        .emulation_major
        .as_deref()
        .and_then(number)
        .zip(info.emulation_minor.as_deref().and_then(number));
    let reported = number(&info.major).zip(number(&info.minor));
    let (major, minor) = emulated
        .or(reported)
        .or_else(|| from_git_version(&info.git_version))
        .ok_or_else(|| {
            format!(
                "cannot read a Kubernetes version from /version: major {:?}, minor {:?}, \
                 gitVersion {:?}",
                info.major, info.minor, info.git_version
            )
        })?;
    Ok(ServerVersion {
        git_version: info.git_version.clone(),
        major,
        minor,
    })
}

/// Where a server's minor stands against the minors the binary supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Supported: that minor's defaults apply.
    Supported(u32),
    /// Newer than the newest supported: the newest minor's defaults apply (as a
    /// kube-controller-manager one minor older than its API server), with a warning.
    Newer { newest: u32 },
    /// Older than the oldest supported (or not major 1): refused.
    Unsupported,
}

impl Fit {
    /// The minor whose defaults apply, if any.
    pub fn minor(self) -> Option<u32> {
        match self {
            Fit::Supported(m) | Fit::Newer { newest: m } => Some(m),
            Fit::Unsupported => None,
        }
    }
}

/// Classifies `version` against the supported minors `oldest..=newest`.
pub fn fit(version: &ServerVersion, oldest: u32, newest: u32) -> Fit {
    match (version.major, version.minor) {
        (1, m) if (oldest..=newest).contains(&m) => Fit::Supported(m),
        (1, m) if m > newest => Fit::Newer { newest },
        _ => Fit::Unsupported,
    }
}

/// `GET /version`.
pub async fn read(client: &kube::Client) -> Result<ServerVersion, String> {
    let info = client
        .apiserver_version()
        .await
        .map_err(|e| format!("reading the API server's /version: {e}"))?;
    parse(&info)
}

/// `rkcm_apiserver_version_info{git_version,minor} 1` for the server last read; the series of
/// a version read before is removed.
pub fn export(version: &ServerVersion) {
    static GAUGE: OnceLock<Option<IntGaugeVec>> = OnceLock::new();
    let Some(gauge) = get_or_register(&GAUGE, "rkcm_apiserver_version_info", || {
        Ok(register(IntGaugeVec::new(
            Opts::new(
                "rkcm_apiserver_version_info",
                "The API server's version as last read from /version (always 1); minor is the \
                 one whose manager defaults rkcm follows the server by.",
            ),
            &["git_version", "minor"],
        )?))
    }) else {
        return;
    };
    gauge.reset();
    gauge
        .with_label_values(&[version.git_version.as_str(), &version.minor.to_string()])
        .set(1);
}

/// Reads `/version` every `every` until the minor whose defaults apply (`fit(...).minor()`)
/// differs from `current`; returns the new version then, `None` on shutdown. A failed read
/// (server down during an upgrade) is logged at debug and retried at the next tick; every
/// version read is exported.
pub async fn wait_for_other_minor(
    client: &kube::Client,
    current: u32,
    supported: (u32, u32),
    every: Duration,
    shutdown: &CancellationToken,
) -> Option<ServerVersion> {
    let mut last_git = String::new();
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return None,
            () = tokio::time::sleep(every) => {}
        }
        let version = match read(client).await {
            Ok(v) => v,
            Err(error) => {
                tracing::debug!(%error, "reading the API server's version");
                continue;
            }
        };
        if version.git_version != last_git {
            export(&version);
            last_git.clone_from(&version.git_version);
        }
        if fit(&version, supported.0, supported.1).minor() != Some(current) {
            return Some(version);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(major: &str, minor: &str, git: &str) -> Info {
        Info {
            major: major.into(),
            minor: minor.into(),
            git_version: git.into(),
            ..Info::default()
        }
    }

    #[test]
    fn parses_what_servers_report() {
        let cases = [
            (info("1", "34", "v1.34.4"), Some((1, 34))),
            // Providers append "+" to the minor.
            (info("1", "35+", "v1.35.4-gke.1200"), Some((1, 35))),
            // Empty fields: the git version says it.
            (info("", "", "v1.36.3-eks-abc"), Some((1, 36))),
            (info("", "", "unknown"), None),
        ];
        for (info, want) in cases {
            let got = parse(&info).ok().map(|v| (v.major, v.minor));
            assert_eq!(got, want, "{info:?}");
        }
        let mut emulating = info("1", "37", "v1.37.1");
        emulating.emulation_major = Some("1".into());
        emulating.emulation_minor = Some("36".into());
        assert_eq!(parse(&emulating).map(|v| v.minor), Ok(36), "emulated minor");
    }

    #[test]
    fn fits_the_supported_minors() {
        let v = |major, minor| ServerVersion {
            git_version: format!("v{major}.{minor}.0"),
            major,
            minor,
        };
        assert_eq!(fit(&v(1, 34), 34, 37), Fit::Supported(34));
        assert_eq!(fit(&v(1, 37), 34, 37), Fit::Supported(37));
        assert_eq!(fit(&v(1, 38), 34, 37), Fit::Newer { newest: 37 });
        assert_eq!(fit(&v(1, 38), 34, 37).minor(), Some(37));
        assert_eq!(fit(&v(1, 33), 34, 37), Fit::Unsupported);
        assert_eq!(fit(&v(2, 0), 34, 37), Fit::Unsupported);
        assert_eq!(fit(&v(1, 33), 34, 37).minor(), None);
    }
}
