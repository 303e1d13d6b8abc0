//! Controller reaction latency from the apiserver audit log: for every object change a
//! controller must act on, the time from the change to the manager's first write for it.
//!
//! The changes are the bench's own writes (its client sends the [`BENCH_AGENT`] user agent)
//! to the workloads of a run, plus the ReplicaSets the manager's Deployment controller
//! creates (the ReplicaSet controller must then create their pods). A manager write
//! answers a change when it names the changed object, a child named after it
//! (`<owner>-<suffix>`: ReplicaSets, pods, ControllerRevisions), or, for a pod created by
//! `generateName`, when the pod's controller owner reference names it. A daemon pod's
//! delete is timed from the pod's removal, which is what the DaemonSet controller acts on.
//! Latencies run from the change's completion (the end of the apiserver's response); the
//! watch event goes out before that, so a write received while the change's request was
//! still open answers it, at 0 s.
//! Kwok, the scheduler and the apiserver write too; they are neither bench nor manager and
//! are ignored.
//!
//! Reading is separate from the rules: [`read`] turns the log into [`Record`]s, and
//! [`reactions`] and [`summarize`] are pure functions of them.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use anyhow::Context;
use jiff::Timestamp;
use serde::Deserialize;

use crate::k8s::BENCH_AGENT;

/// The verbs that change objects; [`read`] keeps only requests with one of them.
const WRITE_VERBS: [&str; 5] = ["create", "update", "patch", "delete", "deletecollection"];

/// Resources whose objects are named `<owner>-<suffix>` after the object they serve.
const CHILD_RESOURCES: [&str; 3] = ["replicasets", "pods", "controllerrevisions"];

/// One completed write request of the audit log.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// When the apiserver received the request.
    pub received: Timestamp,
    /// When the apiserver finished its response.
    pub completed: Timestamp,
    pub user: String,
    pub agent: String,
    pub verb: String,
    pub namespace: String,
    pub resource: String,
    /// `status`, `scale`, `binding` ...; empty for the object itself.
    pub subresource: String,
    /// Empty for a create by `generateName` and for a deletecollection.
    pub name: String,
    /// For a pod create logged with its request body: the name of the pod's controller
    /// owner reference. Empty otherwise.
    pub owner: String,
    /// The response status code.
    pub code: u16,
}

/// One change a controller had to act on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// The controller that must react: `deployment`, `replicaset`, `statefulset`,
    /// `daemonset`, `job`.
    pub controller: &'static str,
    /// When the change completed.
    pub at: Timestamp,
    /// Seconds from the change to the manager's first write for it (0 when that write came
    /// before the change's response was complete); `None` when the manager never wrote for
    /// it afterwards.
    pub latency: Option<f64>,
}

/// The samples of one controller. The latency figures are over the answered changes only,
/// in seconds, and NaN when no change was answered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    pub changes: usize,
    pub unanswered: usize,
    /// Median, by nearest rank.
    pub p50: f64,
    /// 99th percentile, by nearest rank.
    pub p99: f64,
    pub max: f64,
}

#[derive(Deserialize)]
struct Line<'a> {
    #[serde(borrow, default)]
    stage: Cow<'a, str>,
    #[serde(borrow, default)]
    verb: Cow<'a, str>,
    #[serde(borrow, default)]
    user: User<'a>,
    #[serde(borrow, default, rename = "userAgent")]
    user_agent: Cow<'a, str>,
    #[serde(borrow, default, rename = "objectRef")]
    object_ref: Option<ObjectRef<'a>>,
    #[serde(default, rename = "responseStatus")]
    response_status: Option<ResponseStatus>,
    #[serde(borrow, default, rename = "requestReceivedTimestamp")]
    received: Cow<'a, str>,
    #[serde(borrow, default, rename = "stageTimestamp")]
    completed: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
struct User<'a> {
    #[serde(borrow, default)]
    username: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ObjectRef<'a> {
    #[serde(borrow, default)]
    resource: Cow<'a, str>,
    #[serde(borrow, default)]
    subresource: Cow<'a, str>,
    #[serde(borrow, default)]
    namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    name: Cow<'a, str>,
}

#[derive(Deserialize)]
struct ResponseStatus {
    #[serde(default)]
    code: u16,
}

/// The body of a pod create, read in a second pass so that a body of another shape
/// (a patch, say) never costs the line.
#[derive(Deserialize)]
struct WithRequest<'a> {
    #[serde(borrow, default, rename = "requestObject")]
    request_object: Option<RequestObject<'a>>,
}

#[derive(Deserialize)]
struct RequestObject<'a> {
    #[serde(borrow, default)]
    metadata: Option<Metadata<'a>>,
}

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(borrow, default, rename = "ownerReferences")]
    owner_references: Option<Vec<OwnerReference<'a>>>,
}

#[derive(Deserialize)]
struct OwnerReference<'a> {
    #[serde(borrow, default)]
    name: Cow<'a, str>,
    #[serde(default)]
    controller: Option<bool>,
}

/// The completed write requests in the complete lines between byte `from` and byte `to`
/// (`None`: end of file), in log order. A line still being written at the end is left
/// out; lines that are not audit events are skipped.
pub fn read(path: &Path, from: u64, to: Option<u64>) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    crate::audit::each_line(path, from, to, |at, line| {
        if !is_write(line) {
            return Ok(());
        }
        if let Some(record) =
            parse(line).with_context(|| format!("{} at byte {at}", path.display()))?
        {
            records.push(record);
        }
        Ok(())
    })?;
    Ok(records)
}

/// A cheap look at the request's verb before parsing the line: the event's `verb` comes
/// before any request body.
fn is_write(line: &[u8]) -> bool {
    const KEY: &[u8] = b"\"verb\":\"";
    let Some(i) = find(line, KEY) else {
        return false;
    };
    let rest = &line[i + KEY.len()..];
    WRITE_VERBS.iter().any(|verb| {
        rest.strip_prefix(verb.as_bytes())
            .is_some_and(|r| r.first() == Some(&b'"'))
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The record of one line: `None` for other stages, reads, non-resource requests and
/// lines that are not audit events.
fn parse(line: &[u8]) -> anyhow::Result<Option<Record>> {
    let Ok(ev) = serde_json::from_slice::<Line>(line) else {
        return Ok(None);
    };
    if ev.stage != "ResponseComplete" || !WRITE_VERBS.contains(&ev.verb.as_ref()) {
        return Ok(None);
    }
    let Some(obj) = ev.object_ref else {
        return Ok(None);
    };
    let received = ev
        .received
        .parse::<Timestamp>()
        .with_context(|| format!("requestReceivedTimestamp {:?}", ev.received))?;
    let completed = ev
        .completed
        .parse::<Timestamp>()
        .with_context(|| format!("stageTimestamp {:?}", ev.completed))?;
    let owner = if ev.verb == "create" && obj.resource == "pods" && obj.subresource.is_empty() {
        controller_owner(line)
    } else {
        String::new()
    };
    Ok(Some(Record {
        received,
        completed,
        user: ev.user.username.into_owned(),
        agent: ev.user_agent.into_owned(),
        verb: ev.verb.into_owned(),
        namespace: obj.namespace.into_owned(),
        resource: obj.resource.into_owned(),
        subresource: obj.subresource.into_owned(),
        name: obj.name.into_owned(),
        owner,
        code: ev.response_status.map_or(0, |s| s.code),
    }))
}

/// The controller owner reference's name in the line's request body, or empty.
fn controller_owner(line: &[u8]) -> String {
    if find(line, b"\"requestObject\"").is_none() {
        return String::new();
    }
    serde_json::from_slice::<WithRequest>(line)
        .ok()
        .and_then(|w| w.request_object?.metadata?.owner_references)
        .and_then(|refs| refs.into_iter().find(|r| r.controller == Some(true)))
        .map(|r| r.name.into_owned())
        .unwrap_or_default()
}

/// A namespace and a name.
type Key<'a> = (&'a str, &'a str);

/// `name` without its last `-segment` (`web-7d9f` → `web`), if it has one.
fn parent(name: &str) -> Option<&str> {
    name.rsplit_once('-')
        .map(|(p, _)| p)
        .filter(|p| !p.is_empty())
}

/// The change a record makes, if a controller must act on it.
struct Change<'r> {
    controller: &'static str,
    /// The object whose writes answer it.
    answered_by: Key<'r>,
    /// A daemon pod's delete: the DaemonSet controller acts on the pod's removal, not on the
    /// delete that marks it terminating (upstream, like rkcm, never runs a second daemon pod
    /// beside a terminating one), so the change is timed from the removal.
    on_removal: Option<Key<'r>>,
}

/// Reads `r` as a change a controller must act on; `None` when no controller must.
fn change<'r>(
    r: &'r Record,
    manager_user: &str,
    classify: &impl Fn(&str) -> Option<&'static str>,
) -> Option<Change<'r>> {
    if r.code >= 400 || r.name.is_empty() {
        return None;
    }
    let ns = r.namespace.as_str();
    if r.user == manager_user {
        // The Deployment controller's new ReplicaSet, for the ReplicaSet controller.
        return (r.verb == "create" && r.resource == "replicasets" && r.subresource.is_empty())
            .then_some(Change {
                controller: "replicaset",
                answered_by: (ns, r.name.as_str()),
                on_removal: None,
            });
    }
    if !r.agent.starts_with(BENCH_AGENT) {
        return None;
    }
    let edit = matches!(r.verb.as_str(), "create" | "update" | "patch");
    let own_or_scale = r.subresource.is_empty() || r.subresource == "scale";
    let controller = match r.resource.as_str() {
        "deployments" if edit && own_or_scale => "deployment",
        "statefulsets" if edit && own_or_scale => "statefulset",
        "daemonsets" if edit && r.subresource.is_empty() => "daemonset",
        "jobs" if r.verb == "create" && r.subresource.is_empty() => "job",
        "pods" if r.verb == "delete" && r.subresource.is_empty() => {
            let owner = parent(&r.name)?;
            let controller = classify(owner)?;
            return Some(Change {
                controller,
                answered_by: (ns, owner),
                on_removal: (controller == "daemonset").then_some((ns, r.name.as_str())),
            });
        }
        _ => return None,
    };
    Some(Change {
        controller,
        answered_by: (ns, r.name.as_str()),
        on_removal: None,
    })
}

/// When each pod was removed: its last successful delete by anyone but the manager (kwok's,
/// after a graceful delete; the bench's own when it removed the pod at once), as that
/// request's (received, completed) times.
fn removals<'r>(
    records: &'r [Record],
    manager_user: &str,
) -> HashMap<Key<'r>, (Timestamp, Timestamp)> {
    let mut removed: HashMap<Key, (Timestamp, Timestamp)> = HashMap::new();
    for r in records.iter().filter(|r| {
        r.user != manager_user
            && r.verb == "delete"
            && r.resource == "pods"
            && r.subresource.is_empty()
            && !r.name.is_empty()
            && r.code < 400
    }) {
        let at = removed
            .entry((r.namespace.as_str(), r.name.as_str()))
            .or_insert((r.received, r.completed));
        if r.completed > at.1 {
            *at = (r.received, r.completed);
        }
    }
    removed
}

/// The names a manager write answers for, in its namespace (repeats possible).
fn answered(r: &Record) -> [Option<&str>; 3] {
    let name = Some(r.name.as_str()).filter(|n| !n.is_empty());
    let child = if CHILD_RESOURCES.contains(&r.resource.as_str()) {
        parent(&r.name)
    } else {
        None
    };
    let owner = Some(r.owner.as_str()).filter(|o| !o.is_empty());
    [name, child, owner]
}

/// One sample per change in `records` (the output of [`read`], any order), sorted by the
/// change's time. `manager_user` is the user name of the manager under test; `classify`
/// names the controller of a pod's owner (the pod's name without its last `-segment`),
/// `None` for pods of no workload of the run.
pub fn reactions(
    records: &[Record],
    manager_user: &str,
    classify: impl Fn(&str) -> Option<&'static str>,
) -> Vec<Sample> {
    // When the manager's writes for each key arrived, in time order.
    let mut writes: HashMap<Key, Vec<Timestamp>> = HashMap::new();
    for r in records.iter().filter(|r| r.user == manager_user) {
        let names = answered(r);
        for (i, name) in names.iter().enumerate() {
            let Some(name) = *name else { continue };
            if names[..i].contains(&Some(name)) {
                continue;
            }
            writes
                .entry((r.namespace.as_str(), name))
                .or_default()
                .push(r.received);
        }
    }
    for times in writes.values_mut() {
        times.sort_unstable();
    }
    let removed = removals(records, manager_user);
    let mut samples: Vec<Sample> = records
        .iter()
        .filter_map(|r| {
            let c = change(r, manager_user, &classify)?;
            // The request that made the change: the removal's for a daemon pod. The
            // manager's own change (a ReplicaSet it created) is not answered by itself.
            let (sent, at) = c
                .on_removal
                .and_then(|pod| removed.get(&pod).copied())
                .filter(|(_, gone)| *gone > r.completed)
                .unwrap_or(if r.user == manager_user {
                    (r.completed, r.completed)
                } else {
                    (r.received, r.completed)
                });
            // The apiserver sends the watch event before it finishes the response, so a
            // manager can answer while the change's request is still open: its first write
            // received after the request was is the answer, and one received before the
            // completion counts as 0 s (latencies are measured from the completion).
            let latency = writes.get(&c.answered_by).and_then(|times| {
                let first = times.partition_point(|t| *t < sent);
                times.get(first).map(|t| {
                    if *t < at {
                        0.0
                    } else {
                        t.duration_since(at).as_secs_f64()
                    }
                })
            });
            Some(Sample {
                controller: c.controller,
                at,
                latency,
            })
        })
        .collect();
    samples.sort_by_key(|s| s.at);
    samples
}

/// The CronJob controller's runs in `records`: each Job the manager created for a scheduled
/// time, named `<cronjob>-<minutes since the epoch>` as upstream names them, gives a sample of
/// controller `cronjob` from the scheduled time to the create request (its lateness: the
/// change a CronJob acts on is the clock). `is_cronjob` tells the run's CronJob names; a
/// create answered 409 (the Job existed already) is not a run.
pub fn cron_runs(
    records: &[Record],
    manager_user: &str,
    is_cronjob: impl Fn(&str) -> bool,
) -> Vec<Sample> {
    let mut samples: Vec<Sample> = records
        .iter()
        .filter(|r| {
            r.user == manager_user
                && r.verb == "create"
                && r.resource == "jobs"
                && r.subresource.is_empty()
                && r.code < 400
        })
        .filter_map(|r| {
            let (cronjob, minutes) = r.name.rsplit_once('-')?;
            if !is_cronjob(cronjob) {
                return None;
            }
            let minutes: i64 = minutes.parse().ok()?;
            let scheduled = Timestamp::from_second(minutes.checked_mul(60)?).ok()?;
            Some(Sample {
                controller: "cronjob",
                at: scheduled,
                latency: Some(r.received.duration_since(scheduled).as_secs_f64()),
            })
        })
        .collect();
    samples.sort_by_key(|s| s.at);
    samples
}

/// The samples' summary per controller.
pub fn summarize<'a>(
    samples: impl IntoIterator<Item = &'a Sample>,
) -> BTreeMap<&'static str, Summary> {
    let mut by: BTreeMap<&'static str, (usize, Vec<f64>)> = BTreeMap::new();
    for s in samples {
        let (changes, latencies) = by.entry(s.controller).or_default();
        *changes += 1;
        latencies.extend(s.latency);
    }
    by.into_iter()
        .map(|(controller, (changes, mut latencies))| {
            latencies.sort_unstable_by(f64::total_cmp);
            let summary = Summary {
                changes,
                unanswered: changes - latencies.len(),
                p50: nearest_rank(&latencies, 50),
                p99: nearest_rank(&latencies, 99),
                max: latencies.last().copied().unwrap_or(f64::NAN),
            };
            (controller, summary)
        })
        .collect()
}

/// The `percent` percentile of ascending `sorted` by nearest rank; NaN when empty.
fn nearest_rank(sorted: &[f64], percent: usize) -> f64 {
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_runs_are_late_from_their_scheduled_minute() {
        // 29 934 724 minutes since the epoch = 2026-12-01T00:04:00Z.
        let scheduled: Timestamp = "2026-12-01T00:04:00Z".parse().unwrap();
        assert_eq!(scheduled.as_second(), 29_934_724 * 60);
        let create = |name: &str, after_ms: i64, code: u16, user: &str| Record {
            received: Timestamp::from_millisecond(scheduled.as_millisecond() + after_ms).unwrap(),
            completed: Timestamp::from_millisecond(scheduled.as_millisecond() + after_ms + 5)
                .unwrap(),
            user: user.into(),
            agent: String::new(),
            verb: "create".into(),
            namespace: "t1".into(),
            resource: "jobs".into(),
            subresource: String::new(),
            name: name.into(),
            owner: String::new(),
            code,
        };
        let records = [
            create("cron-0-29934724", 120, 201, MANAGER),
            create("cron-1-29934724", 1_500, 201, MANAGER),
            // Already there: not a run.
            create("cron-1-29934724", 1_700, 409, MANAGER),
            // Not a CronJob of the run, not the manager, not a scheduled name.
            create("job-small-0", 10, 201, MANAGER),
            create("cron-0-29934725", 10, 201, "kcm"),
            create("cron-0-x", 10, 201, MANAGER),
        ];
        let runs = cron_runs(&records, MANAGER, |n| n.starts_with("cron-"));
        let got: Vec<(&str, Timestamp, Option<f64>)> = runs
            .iter()
            .map(|s| (s.controller, s.at, s.latency))
            .collect();
        assert_eq!(
            got,
            [
                ("cronjob", scheduled, Some(0.12)),
                ("cronjob", scheduled, Some(1.5))
            ]
        );
    }

    const MANAGER: &str = "rkcm";
    const BASE: &str = "2026-11-29T04:06:20Z";

    fn t(ms: i64) -> Timestamp {
        let base: Timestamp = BASE.parse().unwrap();
        Timestamp::from_millisecond(base.as_millisecond() + ms).unwrap()
    }

    /// A write of the bench taking 10 ms, received at `ms` after the base time.
    fn bench(ms: i64, verb: &str, resource: &str, name: &str) -> Record {
        Record {
            received: t(ms - 10),
            completed: t(ms),
            user: "rkcm-e2e-admin".into(),
            agent: "rkcm-bench".into(),
            verb: verb.into(),
            namespace: "t1".into(),
            resource: resource.into(),
            subresource: String::new(),
            name: name.into(),
            owner: String::new(),
            code: 201,
        }
    }

    /// A write of the manager received at `ms`, completing 10 ms later.
    fn manager(ms: i64, verb: &str, resource: &str, name: &str) -> Record {
        Record {
            received: t(ms),
            completed: t(ms + 10),
            user: MANAGER.into(),
            agent: "rkcm/v0.1".into(),
            ..bench(0, verb, resource, name)
        }
    }

    fn with(mut r: Record, f: impl FnOnce(&mut Record)) -> Record {
        f(&mut r);
        r
    }

    fn classify(owner: &str) -> Option<&'static str> {
        match owner.split('-').next()? {
            "deploy" => Some("replicaset"),
            "sts" => Some("statefulset"),
            "ds" => Some("daemonset"),
            "job" => Some("job"),
            _ => None,
        }
    }

    /// A sample wanted: controller, change time (ms after the base), latency.
    type Want = (&'static str, i64, Option<f64>);

    #[test]
    #[allow(clippy::too_many_lines)] // one table
    fn reactions_pair_changes_with_first_manager_writes() {
        let cases: Vec<(&str, Vec<Record>, Vec<Want>)> = vec![
            (
                "deployment patch answered by its ReplicaSet create",
                vec![
                    bench(1000, "patch", "deployments", "deploy-a"),
                    manager(1250, "create", "replicasets", "deploy-a-5d8f"),
                ],
                vec![("deployment", 1000, Some(0.25)), ("replicaset", 1260, None)],
            ),
            (
                "earlier manager write and other namespace do not count",
                vec![
                    manager(900, "update", "deployments", "deploy-a"),
                    with(manager(950, "patch", "deployments", "deploy-a"), |r| {
                        r.subresource = "status".into();
                    }),
                    with(bench(1000, "patch", "deployments", "deploy-a"), |r| {
                        r.subresource = "scale".into();
                    }),
                    with(manager(1100, "patch", "deployments", "deploy-a"), |r| {
                        r.namespace = "t2".into();
                    }),
                    with(manager(1400, "patch", "deployments", "deploy-a"), |r| {
                        r.subresource = "status".into();
                    }),
                ],
                vec![("deployment", 1000, Some(0.4))],
            ),
            (
                "statefulset answered by its pod create",
                vec![
                    bench(1000, "create", "statefulsets", "sts-a"),
                    manager(1100, "create", "pods", "sts-a-0"),
                ],
                vec![("statefulset", 1000, Some(0.1))],
            ),
            (
                "statefulset answered by its revision, job by its status",
                vec![
                    bench(1000, "update", "statefulsets", "sts-a"),
                    bench(1000, "create", "jobs", "job-a"),
                    manager(1020, "create", "controllerrevisions", "sts-a-6c4b9"),
                    with(manager(1070, "update", "jobs", "job-a"), |r| {
                        r.subresource = "status".into();
                    }),
                ],
                vec![("statefulset", 1000, Some(0.02)), ("job", 1000, Some(0.07))],
            ),
            (
                "daemonset answered by a generateName pod's owner, kwok ignored",
                vec![
                    bench(1000, "create", "daemonsets", "ds-a"),
                    with(manager(1010, "patch", "pods", "ds-b-x1"), |r| {
                        r.user = "rkcm-e2e-admin".into();
                        r.agent = "kwok/v0.7.0".into();
                    }),
                    with(manager(1030, "create", "pods", ""), |r| {
                        r.owner = "ds-a".into();
                    }),
                ],
                vec![("daemonset", 1000, Some(0.03))],
            ),
            (
                "bench pod delete answered by the replacement pod of the ReplicaSet",
                vec![
                    bench(2000, "delete", "pods", "deploy-a-5d8f-x7k2q"),
                    with(manager(2010, "create", "pods", ""), |r| {
                        r.owner = "deploy-b-77aa".into();
                    }),
                    with(manager(2050, "create", "pods", ""), |r| {
                        r.owner = "deploy-a-5d8f".into();
                    }),
                ],
                vec![("replicaset", 2000, Some(0.05))],
            ),
            (
                "daemon pod delete timed from kwok's removal, the manager's own delete aside",
                vec![
                    bench(1000, "delete", "pods", "ds-a-x7k2q"),
                    with(manager(1100, "delete", "pods", "ds-a-x7k2q"), |r| {
                        r.code = 200;
                    }),
                    with(bench(1400, "delete", "pods", "ds-a-x7k2q"), |r| {
                        r.agent = "kwok/v0.7.0".into();
                        r.code = 200;
                    }),
                    with(bench(1500, "delete", "pods", "ds-a-x7k2q"), |r| {
                        r.agent = "kwok/v0.7.0".into();
                        r.code = 404;
                    }),
                    with(manager(1450, "create", "pods", ""), |r| {
                        r.owner = "ds-a".into();
                    }),
                    // Removed at once by the bench's own delete.
                    bench(3000, "delete", "pods", "ds-a-p9v4w"),
                    with(manager(3020, "create", "pods", ""), |r| {
                        r.owner = "ds-a".into();
                    }),
                ],
                vec![
                    ("daemonset", 1400, Some(0.05)),
                    ("daemonset", 3000, Some(0.02)),
                ],
            ),
            (
                "answered while the change's request was still open: 0 s",
                vec![
                    // Received at 990, completed at 1000.
                    bench(1000, "create", "jobs", "job-a"),
                    // Before the request: not an answer.
                    manager(985, "update", "jobs", "job-b"),
                    with(manager(995, "create", "pods", ""), |r| {
                        r.owner = "job-a".into();
                    }),
                    with(manager(1500, "update", "jobs", "job-a"), |r| {
                        r.subresource = "status".into();
                    }),
                    bench(2000, "create", "jobs", "job-b"),
                    with(manager(2003, "create", "pods", ""), |r| {
                        r.owner = "job-b".into();
                    }),
                    // A daemon pod's removal by kwok: received at 3390, completed at 3400.
                    bench(3000, "delete", "pods", "ds-a-x7k2q"),
                    with(bench(3400, "delete", "pods", "ds-a-x7k2q"), |r| {
                        r.agent = "kwok/v0.7.0".into();
                        r.code = 200;
                    }),
                    with(manager(3395, "create", "pods", ""), |r| {
                        r.owner = "ds-a".into();
                    }),
                ],
                vec![
                    ("job", 1000, Some(0.0)),
                    ("job", 2000, Some(0.003)),
                    ("daemonset", 3400, Some(0.0)),
                ],
            ),
            (
                "manager ReplicaSet create answered by its pod create",
                vec![
                    manager(1250, "create", "replicasets", "deploy-a-5d8f"),
                    with(manager(1300, "create", "pods", ""), |r| {
                        r.owner = "deploy-a-5d8f".into();
                    }),
                ],
                vec![("replicaset", 1260, Some(0.04))],
            ),
            (
                "a change never answered",
                vec![
                    bench(1000, "create", "jobs", "job-a"),
                    manager(1100, "create", "pods", "job-b-qq7x2"),
                ],
                vec![("job", 1000, None)],
            ),
            (
                "failed changes ignored",
                vec![
                    with(bench(1000, "create", "deployments", "deploy-a"), |r| {
                        r.code = 409;
                    }),
                    with(
                        manager(1100, "create", "replicasets", "deploy-a-5d8f"),
                        |r| {
                            r.code = 409;
                        },
                    ),
                    manager(1200, "create", "pods", "deploy-a-5d8f-abcde"),
                ],
                vec![],
            ),
            (
                "other writers, reads of the bench and unknown owners are not changes",
                vec![
                    with(bench(1000, "delete", "pods", "deploy-a-5d8f-x7k2q"), |r| {
                        r.agent = "kwok/v0.7.0".into();
                    }),
                    with(bench(1000, "patch", "deployments", "deploy-a"), |r| {
                        r.agent = "kube-scheduler/v1.37.1".into();
                    }),
                    bench(1000, "get", "deployments", "deploy-a"),
                    with(bench(1000, "patch", "deployments", "deploy-a"), |r| {
                        r.subresource = "status".into();
                    }),
                    bench(1000, "delete", "pods", "other-x7k2q"),
                    bench(1000, "delete", "pods", "lonely"),
                    bench(1000, "create", "cronjobs", "cron-a"),
                    manager(1100, "create", "pods", "deploy-a-5d8f-abcde"),
                    manager(1100, "patch", "deployments", "deploy-a"),
                ],
                vec![],
            ),
        ];
        for (what, records, want) in cases {
            let got = reactions(&records, MANAGER, classify);
            assert_eq!(got.len(), want.len(), "{what}: {got:?}");
            for (g, (controller, at, latency)) in got.iter().zip(want) {
                assert_eq!(g.controller, controller, "{what}: {got:?}");
                assert_eq!(g.at, t(at), "{what}: {got:?}");
                match (g.latency, latency) {
                    (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{what}: {g} != {w}"),
                    (g, w) => assert_eq!(g, w, "{what}"),
                }
            }
        }
    }

    #[test]
    fn read_keeps_complete_write_lines() {
        let dir = std::env::temp_dir().join(format!("rkcm-bench-latency-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let pod_create = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Request","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/t1/pods","verb":"create","user":{"username":"rkcm","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"rkcm/v0.1","objectRef":{"resource":"pods","namespace":"t1","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestObject":{"kind":"Pod","apiVersion":"v1","metadata":{"generateName":"deploy-a-5d8f-","namespace":"t1","labels":{"app":"a"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"not-me","uid":"u0"},{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"deploy-a-5d8f","uid":"u1","controller":true,"blockOwnerDeletion":true}]},"spec":{"containers":[{"name":"c","image":"pause"}]}},"requestReceivedTimestamp":"2026-11-29T04:06:20.173706Z","stageTimestamp":"2026-11-29T04:06:20.179086Z","annotations":{"authorization.k8s.io/decision":"allow"}}"#;
        let watch = r#"{"kind":"Event","stage":"ResponseStarted","verb":"watch","user":{"username":"rkcm"},"objectRef":{"resource":"pods"},"requestReceivedTimestamp":"2026-11-29T04:06:20.2Z","stageTimestamp":"2026-11-29T04:06:20.2Z"}"#;
        let get = r#"{"kind":"Event","stage":"ResponseComplete","verb":"get","user":{"username":"rkcm"},"userAgent":"rkcm/v0.1","objectRef":{"resource":"pods","namespace":"t1","name":"p"},"responseStatus":{"code":200},"requestReceivedTimestamp":"2026-11-29T04:06:20.3Z","stageTimestamp":"2026-11-29T04:06:20.31Z"}"#;
        let status = r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"ResponseComplete","verb":"patch","user":{"username":"rkcm-e2e-admin"},"userAgent":"rkcm-bench","objectRef":{"resource":"deployments","namespace":"t1","name":"deploy-a","apiGroup":"apps","subresource":"scale"},"responseStatus":{"metadata":{},"code":409},"requestReceivedTimestamp":"2026-11-29T04:06:21.000001Z","stageTimestamp":"2026-11-29T04:06:21.5Z"}"#;
        let text = [pod_create, watch, get, status].join("\n") + "\n" + &status[..80];
        std::fs::write(&path, &text).unwrap();

        let got = read(&path, 0, None).unwrap();
        let pod = Record {
            received: "2026-11-29T04:06:20.173706Z".parse().unwrap(),
            completed: "2026-11-29T04:06:20.179086Z".parse().unwrap(),
            user: "rkcm".into(),
            agent: "rkcm/v0.1".into(),
            verb: "create".into(),
            namespace: "t1".into(),
            resource: "pods".into(),
            subresource: String::new(),
            name: String::new(),
            owner: "deploy-a-5d8f".into(),
            code: 201,
        };
        let scale = Record {
            received: "2026-11-29T04:06:21.000001Z".parse().unwrap(),
            completed: "2026-11-29T04:06:21.5Z".parse().unwrap(),
            user: "rkcm-e2e-admin".into(),
            agent: "rkcm-bench".into(),
            verb: "patch".into(),
            namespace: "t1".into(),
            resource: "deployments".into(),
            subresource: "scale".into(),
            name: "deploy-a".into(),
            owner: String::new(),
            code: 409,
        };
        assert_eq!(got, vec![pod.clone(), scale.clone()]);

        // A stretch: up to the end of the first line, and from the second line on.
        let first = pod_create.len() as u64 + 1;
        assert_eq!(read(&path, 0, Some(first)).unwrap(), vec![pod]);
        assert_eq!(read(&path, first, None).unwrap(), vec![scale]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn summarize_by_nearest_rank() {
        let sample = |controller, latency| Sample {
            controller,
            at: t(0),
            latency,
        };
        // 0.01 s to 1.00 s in a scrambled order, three unanswered changes; a controller
        // with nothing answered.
        let mut samples: Vec<Sample> = (0..100_i32)
            .map(|i| sample("deployment", Some(f64::from((i * 37) % 100 + 1) / 100.0)))
            .collect();
        samples.extend([None; 3].map(|l| sample("deployment", l)));
        samples.push(sample("job", None));
        samples.extend([3.0, 1.0, 2.0].map(|l| sample("statefulset", Some(l))));

        let got = summarize(&samples);
        assert_eq!(
            got.keys().copied().collect::<Vec<_>>(),
            ["deployment", "job", "statefulset"]
        );
        let d = got["deployment"];
        assert_eq!((d.changes, d.unanswered), (103, 3));
        assert!((d.p50 - 0.50).abs() < 1e-12, "{d:?}");
        assert!((d.p99 - 0.99).abs() < 1e-12, "{d:?}");
        assert!((d.max - 1.00).abs() < 1e-12, "{d:?}");
        let j = got["job"];
        assert_eq!((j.changes, j.unanswered), (1, 1));
        assert!(j.p50.is_nan() && j.p99.is_nan() && j.max.is_nan());
        let s = got["statefulset"];
        assert_eq!((s.changes, s.unanswered), (3, 0));
        assert_eq!((s.p50, s.p99, s.max), (2.0, 3.0, 3.0));
    }
}
