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
//! No Job controller runs for the test's namespace (rkcm has none yet and the plane's
//! upstream manager runs none), so Jobs stay active: the CronJob uses
//! `concurrencyPolicy: Allow`, and no history limit ever applies, so any deletion is wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use rkcm_testkit::{ScopedProxy, TestCluster, TestNamespace, wait_for};

use crate::rollout::{Kind, e2e_bin};

const CRONJOB: &str = "ticker";
const SCHEDULED: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// From one scheduled minute to the next plus the time a manager may take to act.
const MINUTE: Duration = Duration::from_secs(90);
/// How long a manager may take to repair the status after starting.
const REPAIR: Duration = Duration::from_secs(30);

/// A controller-manager running only `cronjob-controller` behind its own scoping proxy.
/// Killed when dropped.
struct CronManager {
    kind: Kind,
    child: tokio::process::Child,
    proxy: ScopedProxy,
    log: PathBuf,
}

impl CronManager {
    async fn start(kind: Kind, cluster: &TestCluster, namespace: &str) -> anyhow::Result<Self> {
        let proxy = ScopedProxy::start(cluster, namespace).await?;
        let log = std::env::temp_dir()
            .join(rkcm_testkit::unique_name(&format!(
                "cronjob-{}-{namespace}",
                kind.name()
            )))
            .with_extension("log");
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let bin = match kind {
            Kind::Upstream => e2e_bin("kube-controller-manager")?,
            Kind::Rkcm => std::env::var_os("RKCM_TEST_BIN")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rkcm"))),
        };
        let child = tokio::process::Command::new(&bin)
            .arg(format!("--kubeconfig={}", proxy.kubeconfig().display()))
            .args([
                "--controllers=cronjob-controller",
                "--leader-elect=false",
                "--secure-port=0",
                "--v=2",
            ])
            .env_remove("KUBECONFIG")
            .env_remove("RUST_LOG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        Ok(Self {
            kind,
            child,
            proxy,
            log,
        })
    }

    /// SIGKILL, the harshest handover; the log stays for [`Self::tail`].
    async fn stop(&mut self) -> anyhow::Result<()> {
        self.child
            .kill()
            .await
            .with_context(|| format!("stopping {}", self.kind.name()))?;
        self.proxy.stop();
        Ok(())
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited: {status}", self.kind.name());
        }
        Ok(())
    }

    /// Its Job creations through the proxy, as `(path, HTTP status)`.
    fn job_creates(&self) -> Vec<(String, u16)> {
        self.proxy
            .writes()
            .into_iter()
            .filter(|w| w.method.as_str() == "POST" && w.path.ends_with("/jobs"))
            .map(|w| (w.path, w.status))
            .collect()
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        format!(
            "{} log {} (last lines):\n{}",
            self.kind.name(),
            self.log.display(),
            all[all.len().saturating_sub(20)..].join("\n")
        )
    }
}

impl Drop for CronManager {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.log);
    }
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

async fn run(
    cluster: &TestCluster,
    ns: &TestNamespace,
    managers: &mut Vec<CronManager>,
) -> anyhow::Result<()> {
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
    managers.push(CronManager::start(Kind::Upstream, cluster, ns.name()).await?);
    wait_jobs(ns, s1, s1, MINUTE)
        .await
        .context("upstream creating the first Job")?;
    managers[0].stop().await?;

    // As if upstream died between creating that Job and writing the status.
    let rollback = serde_json::json!({"status": {"lastScheduleTime": null, "active": null}});
    ns.api::<CronJob>()
        .patch_status(CRONJOB, &PatchParams::default(), &Patch::Merge(&rollback))
        .await?;
    let rolled = ns.api::<CronJob>().get(CRONJOB).await?;
    if status_of(&rolled) != (None, Vec::new()) {
        bail!("the status rollback did not hold: {:?}", status_of(&rolled));
    }

    // rkcm repairs the status from the existing Job (AlreadyExists, no second Job for the
    // minute), then runs the next minute.
    managers.push(CronManager::start(Kind::Rkcm, cluster, ns.name()).await?);
    let s2 = next_minute_after(jiff::Timestamp::now().as_second());
    wait_jobs(ns, s1, s1, REPAIR)
        .await
        .context("rkcm putting the first Job back into status.active")?;
    let creates = managers[1].job_creates();
    if !creates.iter().any(|(_, code)| *code == 409) {
        bail!(
            "rkcm did not try to create the first minute's Job again (AlreadyExists): \
             {creates:?}"
        );
    }
    wait_jobs(ns, s1, s2, MINUTE)
        .await
        .context("rkcm creating the Job of the next minute")?;
    managers[1].check_running()?;
    managers[1].stop().await?;

    // Back to upstream: the next minute's Job, nothing else.
    managers.push(CronManager::start(Kind::Upstream, cluster, ns.name()).await?);
    let s3 = next_minute_after(jiff::Timestamp::now().as_second());
    let last = wait_jobs(ns, s1, s3, MINUTE)
        .await
        .context("upstream creating the Job of the minute after the handback")?;
    managers[2].check_running()?;
    let creates = managers[2].job_creates();
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
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "needs apiserver: make test"]
async fn cronjob_changes_hands_without_duplicate_or_missing_jobs() -> anyhow::Result<()> {
    let cluster = TestCluster::connect().await?;
    let ns = cluster.namespace("cronjob-takeover").await?;
    let mut managers = Vec::new();
    let result = run(&cluster, &ns, &mut managers).await;
    if result.is_err() {
        for m in &managers {
            eprintln!("{}", m.tail());
        }
    }
    result
}
