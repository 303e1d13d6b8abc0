//! Counts a manager's API requests from the apiserver audit log (`AUDIT=1` plane: metadata
//! of every request, JSON lines, blocking mode, so a request's line is written before its
//! response returns). Each manager uses its own client certificate, so `.user.username`
//! tells them apart. A request is counted once, at its `ResponseComplete` stage; watches
//! complete when the manager is stopped, which is why runs are counted after the stop.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::Path;

use anyhow::Context;
use serde::{Deserialize, Serialize};

/// Requests of one user in one stretch of the log.
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct Counts {
    pub total: u64,
    /// By verb (`list`, `watch`, `delete`, `patch`, ...).
    pub by_verb: BTreeMap<String, u64>,
    /// By `verb resource[/subresource]`, e.g. `delete pods`, `patch pods/status`.
    pub by_request: BTreeMap<String, u64>,
    /// Responses with status code >= 400 (404 of a repeated delete, 409, 429 ...).
    pub errors: u64,
    /// Responses with status 429 (apiserver priority-and-fairness throttling).
    pub throttled: u64,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow)]
    stage: &'a str,
    #[serde(borrow)]
    verb: &'a str,
    #[serde(borrow)]
    user: User<'a>,
    #[serde(default, rename = "objectRef")]
    object_ref: Option<ObjectRef>,
    #[serde(default, rename = "responseStatus")]
    response_status: Option<ResponseStatus>,
}

#[derive(Deserialize)]
struct User<'a> {
    #[serde(borrow, default)]
    username: &'a str,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    subresource: Option<String>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// The current size of the log: where a run starts counting.
pub fn offset(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| {
            format!(
                "audit log {} (is the plane up with AUDIT=1?)",
                path.display()
            )
        })?
        .len())
}

/// Hands `each` every complete line (without its newline) between byte `from` and byte `to`
/// (`None`: end of file) with the byte it starts at; a line still being written at the end is
/// left out. Returns the offset just after the last complete line read, where the next
/// stretch should start.
pub fn each_line(
    path: &Path,
    from: u64,
    to: Option<u64>,
    mut each: impl FnMut(u64, &[u8]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    file.seek(SeekFrom::Start(from))
        .with_context(|| format!("seeking to byte {from} of {}", path.display()))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut pos = from;
    let mut buf = Vec::with_capacity(4096);
    loop {
        if to.is_some_and(|to| pos >= to) {
            break;
        }
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("reading {} at byte {pos}", path.display()))?;
        if n == 0 || buf.last() != Some(&b'\n') {
            break; // end of file, or a line still being written
        }
        each(pos, &buf[..n - 1])?;
        pos += n as u64;
    }
    Ok(pos)
}

/// Counts `user`'s completed requests in the complete lines between byte `from` and byte
/// `to` (`None`: end of file). Returns the counts and the offset just after the last
/// complete line read, where the next stretch should start.
pub fn count(path: &Path, user: &str, from: u64, to: Option<u64>) -> anyhow::Result<(Counts, u64)> {
    let needle = format!("\"username\":\"{user}\"");
    let mut counts = Counts::default();
    let pos = each_line(path, from, to, |_, line| {
        if !contains(line, needle.as_bytes()) {
            return Ok(());
        }
        let Ok(ev) = serde_json::from_slice::<Line>(line) else {
            return Ok(());
        };
        if ev.stage != "ResponseComplete" || ev.user.username != user {
            return Ok(());
        }
        counts.total += 1;
        *counts.by_verb.entry(ev.verb.to_string()).or_default() += 1;
        let what = match &ev.object_ref {
            Some(ObjectRef {
                resource: Some(r),
                subresource,
            }) => match subresource {
                Some(s) => format!("{} {r}/{s}", ev.verb),
                None => format!("{} {r}", ev.verb),
            },
            _ => format!("{} (non-resource)", ev.verb),
        };
        *counts.by_request.entry(what).or_default() += 1;
        let code = ev.response_status.map_or(0, |s| s.code);
        if code >= 400 {
            counts.errors += 1;
        }
        if code == 429 {
            counts.throttled += 1;
        }
        Ok(())
    })?;
    Ok((counts, pos))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_completed_requests_of_one_user() {
        let dir = std::env::temp_dir().join(format!("rkcm-bench-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let line = |stage: &str, verb: &str, user: &str, obj: &str, code: u16| {
            format!(
                r#"{{"kind":"Event","stage":"{stage}","verb":"{verb}","user":{{"username":"{user}","groups":["system:masters"]}},{obj}"responseStatus":{{"metadata":{{}},"code":{code}}}}}"#
            )
        };
        let pods =
            r#""objectRef":{"resource":"pods","namespace":"x","name":"p","apiVersion":"v1"},"#;
        let status = r#""objectRef":{"resource":"pods","subresource":"status","apiVersion":"v1"},"#;
        let text = [
            line("ResponseStarted", "watch", "kcm", pods, 200),
            line("ResponseComplete", "delete", "kcm", pods, 200),
            line("ResponseComplete", "delete", "kcm", pods, 404),
            line("ResponseComplete", "patch", "kcm", status, 200),
            line("ResponseComplete", "delete", "rkcm", pods, 200),
            line("ResponseComplete", "get", "kcm", "", 200),
        ]
        .join("\n")
            + "\n{\"partial";
        std::fs::write(&path, text).unwrap();
        let (c, end) = count(&path, "kcm", 0, None).unwrap();
        assert_eq!(c.total, 4);
        assert_eq!(c.by_request["delete pods"], 2);
        assert_eq!(c.by_request["patch pods/status"], 1);
        assert_eq!(c.by_request["get (non-resource)"], 1);
        assert_eq!(c.errors, 1);
        let full = std::fs::metadata(&path).unwrap().len();
        assert_eq!(end, full - "{\"partial".len() as u64);
        let (r, _) = count(&path, "rkcm", 0, None).unwrap();
        assert_eq!(r.total, 1);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
