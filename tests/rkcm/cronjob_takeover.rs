//! CronJob takeover both ways: one `*/1` CronJob is run by upstream kube-controller-manager,
//! then by the rkcm binary, then by upstream again (each with only `cronjob-controller`,
//! behind its own namespace-scoping proxy), and across the handovers there is exactly one
//! Job per scheduled minute, none missing, none deleted, and the CronJob's status names them.
//!
//! The first handover is the hard one: after stopping upstream (SIGKILL), the test rolls
//! the CronJob's status back to what it was before upstream's last Job — no
//! `lastScheduleTime`, an empty `status.active` — as if upstream had died between creating
//! the Job and writing the status. rkcm must then find that minute due, get `AlreadyExists`
//! for its deterministic Job name, recognise the Job as the CronJob's own and put it back into
//! `status.active` (upstream v1.37, `pkg/controller/cronjob/cronjob_controllerv2.go`), never
//! create a second Job for the minute. The handover back is a plain one.
//!
//! No Job controller runs for the test's namespace (the managers run only
//! `cronjob-controller` and the plane's upstream manager runs none), so Jobs stay active: the CronJob uses
//! `concurrencyPolicy: Allow`, and no history limit ever applies, so any deletion is wrong.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rkcm_testkit::harness::{Manager, ManagerKind};
use rkcm_testkit::{TestCluster, TestNamespace, wait_for};

const CRONJOB: &str = "ticker";
const SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// From one scheduled minute to the next plus the time a manager may take to act.
const MINUTE: Duration = Duration::from_secs(90);
/// How long a manager may take to repair the status after starting.
const REPAIR: Duration = Duration::from_secs(30);

/// What both managers run.
const CONTROLLERS: &str = "cronjob-controller";

/// A manager's Job creations through its proxy, as `(path, HTTP status)`.
fn job_creates(m: &Manager) -> Vec<(String, u16)> {
    m.writes()
        .into_iter()
        .filter(|w| w.method.as_str() == "POST" && w.path.ends_with("/jobs"))
        .map(|w| (w.path, w.status))
        .collect()
}

/// Every Job event of the namespace from the start: `ADDED <name>` / `DELETED <name>`.
struct JobEvents {
    seen: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobEvents {
    async fn start(ns: &TestNamespace) -> anyhow::Result<Self> {
        let jobs = ns.api::<Job>();
        let list = jobs.list(&ListParams::default()).await?;
        if !list.items.is_empty() {
            bail!(
                "the namespace has Jobs before the test: {}",
                list.items.len()
            );
        }
        let rv = list.metadata.resource_version.unwrap_or_default();
        let mut stream = jobs
            .watch(&WatchParams::default().timeout(290), &rv)
            .await?
            .boxed();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let line = match stream.try_next().await {
                    Ok(Some(WatchEvent::Added(j))) => {
                        format!("ADDED {}", j.metadata.name.unwrap_or_default())
                    }
                    Ok(Some(WatchEvent::Deleted(j))) => {
                        format!("DELETED {}", j.metadata.name.unwrap_or_default())
                    }
                    Ok(Some(WatchEvent::Modified(j)))
                        if j.metadata.deletion_timestamp.is_some() =>
                    {
                        format!("DELETING {}", j.metadata.name.unwrap_or_default())
                    }
                    Ok(Some(WatchEvent::Modified(_) | WatchEvent::Bookmark(_))) => continue,
                    Ok(Some(WatchEvent::Error(e))) => format!("watch error: {e:?}"),
                    Ok(None) => "watch ended".to_owned(),
                    Err(e) => format!("watch failed: {e}"),
                };
                let end = line.starts_with("watch");
                if let Ok(mut s) = log.lock() {
                    s.push(line);
                }
                if end {
                    return;
                }
            }
        });
        Ok(Self { seen, task })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for JobEvents {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The CronJob's Jobs by scheduled instant (Unix seconds), each checked for its name,
/// controller reference and annotation.
async fn jobs_by_minute(ns: &TestNamespace, cj: &CronJob) -> anyhow::Result<BTreeMap<i64, String>> {
    let uid = cj.metadata.uid.clone().unwrap_or_default();
    let mut names: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for job in ns.api::<Job>().list(&ListParams::default()).await?.items {
        let name = job.metadata.name.clone().unwrap_or_default();
        let at = job
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SCHEDULED))
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .with_context(|| format!("job {name} has no {SCHEDULED} annotation"))?
            .as_second();
        let owned = job
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true) && r.kind == "CronJob" && r.uid == uid);
        if !owned {
            bail!("job {name} is not controlled by the CronJob");
        }
        names.entry(at).or_default().push(name);
    }
    // Duplicates first: a second Job for a minute is the failure this test exists for.
    if let Some((at, dup)) = names.iter().find(|(_, n)| n.len() > 1) {
        bail!(
            "{} Jobs for the minute {}: {dup:?}",
            dup.len(),
            self::at(*at)
        );
    }
    let mut out = BTreeMap::new();
    for (at, mut n) in names {
        let name = n.pop().unwrap_or_default();
        if name != format!("{CRONJOB}-{}", at / 60) {
            bail!(
                "job {name} scheduled at {} has the wrong name",
                self::at(at)
            );
        }
        out.insert(at, name);
    }
    Ok(out)
}

/// `status.lastScheduleTime` (Unix seconds) and the names in `status.active`, sorted.
fn status_of(cj: &CronJob) -> (Option<i64>, Vec<String>) {
    let st = cj.status.as_ref();
    let last = st
        .and_then(|s| s.last_schedule_time.as_ref())
        .map(|t| t.0.as_second());
    let mut active: Vec<String> = st
        .and_then(|s| s.active.as_ref())
        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
        .unwrap_or_default();
    active.sort();
    (last, active)
}

/// Waits until the CronJob's Jobs are one for each minute from `first` to at least
/// `target`, consecutive, and its status names the last of them as `lastScheduleTime` and
/// all of them as active; returns the last minute. Fails at once on a gap, a duplicate or a
/// Job for a minute still to come.
async fn wait_jobs(
    ns: &TestNamespace,
    first: i64,
    target: i64,
    timeout: Duration,
) -> anyhow::Result<i64> {
    wait_for(
        &format!(
            "a Job for every minute from {} to {}, all in status.active",
            at(first),
            at(target)
        ),
        timeout,
        || async {
            let cj = ns.api::<CronJob>().get(CRONJOB).await?;
            let jobs = jobs_by_minute(ns, &cj).await?;
            let have: Vec<i64> = jobs.keys().copied().collect();
            let now = jiff::Timestamp::now().as_second();
            let consecutive = have
                .iter()
                .enumerate()
                .all(|(i, m)| *m == first + 60 * i as i64);
            if !consecutive || have.last().is_some_and(|m| *m > now) {
                // Not a transient state: report it at once, not after the timeout.
                return Ok(Some(Err(anyhow::anyhow!(
                    "Jobs for minutes {:?}: not one per minute from {} (now {})",
                    have.iter().map(|m| at(*m)).collect::<Vec<_>>(),
                    at(first),
                    at(now)
                ))));
            }
            let Some(&last) = have.last() else {
                return Ok(None);
            };
            let (last_schedule, active) = status_of(&cj);
            let mut names: Vec<String> = jobs.into_values().collect();
            names.sort();
            Ok(
                (last >= target && last_schedule == Some(last) && active == names)
                    .then_some(Ok(last)),
            )
        },
    )
    .await?
}

/// Unix seconds as an RFC 3339 instant, for messages.
fn at(t: i64) -> String {
    jiff::Timestamp::from_second(t).map_or_else(|_| t.to_string(), |ts| ts.to_string())
}

fn next_minute_after(t: i64) -> i64 {
    (t.div_euclid(60) + 1) * 60
}

async fn run(cluster: &TestCluster, ns: &TestNamespace) -> anyhow::Result<()> {
    let events = JobEvents::start(ns).await?;
    let cj: CronJob = serde_json::from_value(serde_json::json!({
        "metadata": {"name": CRONJOB},
        "spec": {
            "schedule": "*/1 * * * *",
            "concurrencyPolicy": "Allow",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 1,
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "main", "image": "registry.example/tick:v1"}],
            }}}},
        },
    }))?;
    let cj = ns
        .api::<CronJob>()
        .create(&PostParams::default(), &cj)
        .await?;
    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0.as_second())
        .context("the CronJob has no creationTimestamp")?;
    let s1 = next_minute_after(created);

    // Upstream creates the Job of the first minute.
    let mut up = Manager::start(ManagerKind::Upstream, cluster, ns.name(), CONTROLLERS).await?;
    let first = wait_jobs(ns, s1, s1, MINUTE)
        .await
        .context("upstream creating the first Job");
    Manager::with_logs(first, &mut [&mut up])?;
    up.stop_scoped().await?;

    // As if upstream died between creating that Job and writing the status.
    let rollback = serde_json::json!({"status": {"lastScheduleTime": null, "active": null}});
    ns.api::<CronJob>()
        .patch_status(CRONJOB, &PatchParams::default(), &Patch::Merge(&rollback))
        .await?;
    let rolled = ns.api::<CronJob>().get(CRONJOB).await?;
    if status_of(&rolled) != (None, Vec::new()) {
        bail!("the status rollback did not hold: {:?}", status_of(&rolled));
    }

    // rkcm repairs the status from the existing Job (no second Job for the minute), then runs
    // the next minute.
    let mut rkcm = Manager::start(ManagerKind::Rkcm, cluster, ns.name(), CONTROLLERS).await?;
    let s2 = next_minute_after(jiff::Timestamp::now().as_second());
    let repaired = wait_jobs(ns, s1, s1, REPAIR)
        .await
        .context("rkcm putting the first Job back into status.active");
    Manager::with_logs(repaired, &mut [&mut rkcm])?;
    let creates = job_creates(&rkcm);
    // The repair takes the existing Job back (rkcm records a running child the status forgot;
    // upstream would try the create and meet AlreadyExists): no create may succeed here.
    if creates.iter().any(|(_, code)| *code < 300) {
        bail!("rkcm created a Job while repairing the first minute's status: {creates:?}");
    }
    let next = wait_jobs(ns, s1, s2, MINUTE)
        .await
        .context("rkcm creating the Job of the next minute");
    Manager::with_logs(next, &mut [&mut rkcm])?;
    rkcm.check_running()?;
    rkcm.stop_scoped().await?;

    // Back to upstream: the next minute's Job, nothing else.
    let mut up = Manager::start(ManagerKind::Upstream, cluster, ns.name(), CONTROLLERS).await?;
    let s3 = next_minute_after(jiff::Timestamp::now().as_second());
    let back = wait_jobs(ns, s1, s3, MINUTE)
        .await
        .context("upstream creating the Job of the minute after the handback");
    let last = Manager::with_logs(back, &mut [&mut up])?;
    up.check_running()?;
    let creates = job_creates(&up);
    if creates.iter().any(|(_, code)| *code != 201) {
        bail!("upstream's Job creations after the handback: {creates:?}");
    }

    // One Job per minute, consecutive from the first minute after the CronJob's creation to
    // the last one, none deleted.
    let cj = ns.api::<CronJob>().get(CRONJOB).await?;
    let jobs = jobs_by_minute(ns, &cj).await?;
    let have: Vec<i64> = jobs.keys().copied().collect();
    let want: Vec<i64> = (0..)
        .map(|i| s1 + 60 * i)
        .take_while(|m| *m <= last)
        .collect();
    if have != want {
        let show = |v: &[i64]| v.iter().map(|m| at(*m)).collect::<Vec<_>>();
        bail!(
            "Jobs for minutes {:?}, want every minute {:?}",
            show(&have),
            show(&want)
        );
    }
    let seen = events.seen();
    let added = seen.iter().filter(|l| l.starts_with("ADDED ")).count();
    if added != want.len() || seen.len() != want.len() {
        bail!(
            "Job events: {seen:#?}, want {} ADDED and nothing else",
            want.len()
        );
    }
    up.stop_scoped().await
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn cronjob_changes_hands_without_duplicate_or_missing_jobs() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("cronjob-takeover").await?;
    run(&cluster, &ns).await
}
