//! CronJob: N CronJobs on `*/1` for M minutes (the issue's "500 CronJobs on */1 for five
//! minutes"); how late each Job is created after its scheduled minute.
//!
//! Setup: a fresh namespace, then — right after a minute has begun, so no scheduled minute
//! falls between the CronJobs' creation and the manager's start — N CronJobs with schedule
//! `*/1 * * * *`, `concurrencyPolicy: Allow` and the default history limits. Only
//! `cronjob-controller` runs, in both managers (no Job controller, so nothing on the bench
//! plane completes Jobs): Jobs stay active, so `Allow` is what makes the CronJob controller
//! create one every minute regardless, and no history limit ever deletes one. The scenario
//! measures Job creation only.
//!
//! The measured minutes are the M scheduled minutes that begin at least [`SYNC_MARGIN`]
//! after the manager started (its startup and informer sync come before). Each is a timed
//! phase from the scheduled instant until the bench's metadata watch has seen one Job of
//! every CronJob for it. Lateness of a Job: its `creationTimestamp` (whole seconds, as the
//! apiserver stores it) minus its `batch.kubernetes.io/cronjob-scheduled-timestamp`, and
//! the instant the watch first saw it minus the same (milliseconds, includes the watch's
//! delay). Correct: exactly one Job per CronJob and measured minute (no duplicate, none
//! missing), no Job without its CronJob owner or scheduled-time annotation, none deleted,
//! and every CronJob's `status.lastScheduleTime` is the last measured minute with all of its
//! Jobs in `status.active`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use kube::api::{Api, DeleteParams, ListParams, PostParams, PropagationPolicy};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::harness::{Env, Probe, Scenario};
use crate::k8s;
use crate::results::{Correctness, Metric};
use crate::scenarios::podgc::group;

/// The annotation both managers put on a Job: its scheduled instant, RFC 3339.
pub const SCHEDULED_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// A scheduled minute is measured only if it begins at least this long after the manager
/// started (startup and informer sync).
pub const SYNC_MARGIN: Duration = Duration::from_secs(15);
/// Setup creates the CronJobs only this early in a minute (else it waits for the next one),
/// so they all exist before the minute ends and before the manager starts.
const LATEST_START_SECOND: i64 = 15;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// CronJobs to create, each on `*/1 * * * *`.
    #[arg(long, default_value_t = 500)]
    pub cronjobs: usize,
    /// Scheduled minutes to measure.
    #[arg(long, default_value_t = 5)]
    pub minutes: usize,
}

pub struct CronJobSchedule {
    pub args: Args,
}

/// One Job as the bench's watch first saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobSeen {
    pub name: String,
    /// Name of the CronJob in its controller owner reference.
    pub cronjob: Option<String>,
    /// The scheduled-timestamp annotation, Unix seconds.
    pub scheduled: Option<i64>,
    /// `creationTimestamp`, Unix seconds.
    pub created: Option<i64>,
    /// When the watch first saw it, Unix milliseconds.
    pub observed_ms: i64,
}

impl JobSeen {
    fn of(job: &PartialObjectMeta<Job>, observed_ms: i64) -> Self {
        let cronjob = job
            .owner_references()
            .iter()
            .find(|r| r.controller == Some(true) && r.kind == "CronJob")
            .map(|r| r.name.clone());
        let scheduled = job
            .annotations()
            .get(SCHEDULED_ANNOTATION)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map(|t| t.as_second());
        Self {
            name: job.name_any(),
            cronjob,
            scheduled,
            created: job
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0.as_second()),
            observed_ms,
        }
    }
}

/// Everything the Job watch saw since its initial (empty) list.
#[derive(Clone, Debug, Default)]
pub struct JobLog {
    pub jobs: Vec<JobSeen>,
    pub deleted: Vec<String>,
}

/// Follows the Jobs of a namespace (metadata only), keeping the first sighting of each.
pub struct JobWatch {
    log: Arc<Mutex<JobLog>>,
    /// Jobs seen so far; `None` until the initial list is complete (then its size).
    rx: watch::Receiver<Option<usize>>,
    task: tokio::task::JoinHandle<()>,
}

impl JobWatch {
    fn start(client: &Client, ns: &str) -> Self {
        let api: Api<PartialObjectMeta<Job>> = Api::namespaced(client.clone(), ns);
        let (tx, rx) = watch::channel(None);
        let log = Arc::new(Mutex::new(JobLog::default()));
        let shared = log.clone();
        let task = tokio::spawn(async move {
            let stream = watcher(api, watcher::Config::default()).default_backoff();
            futures::pin_mut!(stream);
            let mut known: HashSet<String> = HashSet::new();
            let mut synced = false;
            while let Some(ev) = k8s::next_event(&mut stream, "job").await {
                let now_ms = jiff::Timestamp::now().as_millisecond();
                let mut log = match shared.lock() {
                    Ok(l) => l,
                    Err(_) => break,
                };
                match ev {
                    watcher::Event::Init => {}
                    watcher::Event::InitDone => synced = true,
                    // The initial list is empty (setup checks); a relist after a watch
                    // error brings the Jobs created meanwhile.
                    watcher::Event::InitApply(j) | watcher::Event::Apply(j) => {
                        if known.insert(j.name_any()) {
                            log.jobs.push(JobSeen::of(&j, now_ms));
                        }
                    }
                    watcher::Event::Delete(j) => log.deleted.push(j.name_any()),
                }
                let n = log.jobs.len();
                drop(log);
                if synced {
                    tx.send_if_modified(|c| c.replace(n) != Some(n));
                }
            }
        });
        Self { log, rx, task }
    }

    fn snapshot(&self) -> JobLog {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

impl Drop for JobWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub struct State {
    ns: String,
    jobs: JobWatch,
    /// The measured scheduled minutes (Unix seconds), set when the manager has started.
    slots: Vec<i64>,
    metrics: Vec<Metric>,
    /// Seconds after the last measured minute until every CronJob's status was current.
    status_current_s: Option<f64>,
}

fn cronjob_name(i: usize) -> String {
    format!("cj-{i:05}")
}

/// The first minute boundary at or after `t` (Unix seconds).
fn next_minute(t: i64) -> i64 {
    t.div_euclid(60) * 60 + if t.rem_euclid(60) == 0 { 0 } else { 60 }
}

/// The `minutes` scheduled minutes to measure when the manager started at `start_ms`.
fn measured_slots(start_ms: i64, margin: Duration, minutes: usize) -> Vec<i64> {
    let earliest_ms = start_ms + margin.as_millis() as i64;
    let first = next_minute(earliest_ms.div_euclid(1000) + i64::from(earliest_ms % 1000 != 0));
    (0..minutes as i64).map(|i| first + 60 * i).collect()
}

/// Sleeps until the wall clock reads `at` (Unix seconds).
async fn sleep_until(at: i64) {
    let now_ms = jiff::Timestamp::now().as_millisecond();
    let wait = at * 1000 - now_ms;
    if wait > 0 {
        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
    }
}

/// Nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The judgement of one run, from what the watch saw and the CronJobs' status.
#[derive(Debug, Default, PartialEq)]
pub struct Judgement {
    pub measured: usize,
    pub duplicates: usize,
    pub missed: usize,
    pub unattributed: usize,
    pub deleted: usize,
    /// Jobs for minutes before the first measured one (due while the manager started).
    pub earlier: usize,
    pub status_wrong: Vec<String>,
    /// creationTimestamp − scheduled, seconds, of the measured Jobs (sorted).
    pub created_late: Vec<f64>,
    /// first seen by the watch − scheduled, seconds, of the measured Jobs (sorted).
    pub observed_late: Vec<f64>,
}

/// `status` maps each CronJob to its `lastScheduleTime` (Unix seconds) and the names in its
/// `status.active`.
pub fn judge(
    cronjobs: &[String],
    slots: &[i64],
    log: &JobLog,
    status: &BTreeMap<String, (Option<i64>, Vec<String>)>,
) -> Judgement {
    let mut j = Judgement {
        deleted: log.deleted.len(),
        ..Judgement::default()
    };
    let first = slots.first().copied().unwrap_or(i64::MAX);
    let last = slots.last().copied().unwrap_or(i64::MIN);
    let measured: HashSet<i64> = slots.iter().copied().collect();
    let mut per: HashMap<(&str, i64), usize> = HashMap::new();
    let mut by_cronjob: HashMap<&str, Vec<&str>> = HashMap::new();
    for job in &log.jobs {
        let (Some(cj), Some(at)) = (job.cronjob.as_deref(), job.scheduled) else {
            j.unattributed += 1;
            continue;
        };
        by_cronjob.entry(cj).or_default().push(&job.name);
        *per.entry((cj, at)).or_default() += 1;
        if at < first {
            j.earlier += 1;
        }
        if measured.contains(&at) {
            j.measured += 1;
            if let Some(c) = job.created {
                j.created_late.push((c - at) as f64);
            }
            j.observed_late
                .push((job.observed_ms - at * 1000) as f64 / 1000.0);
        }
    }
    j.duplicates = per.values().map(|n| n - 1).sum();
    for cj in cronjobs {
        for at in slots {
            if !per.contains_key(&(cj.as_str(), *at)) {
                j.missed += 1;
            }
        }
        let (last_schedule, active) = status.get(cj).cloned().unwrap_or_default();
        let mut active = active;
        active.sort();
        let mut seen: Vec<String> = by_cronjob
            .get(cj.as_str())
            .map(|v| v.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        seen.sort();
        if last_schedule != Some(last) {
            j.status_wrong.push(format!(
                "{cj}: lastScheduleTime {last_schedule:?}, want {last}"
            ));
        } else if active != seen {
            j.status_wrong
                .push(format!("{cj}: status.active {active:?}, its Jobs {seen:?}"));
        }
    }
    j.created_late.sort_by(f64::total_cmp);
    j.observed_late.sort_by(f64::total_cmp);
    j
}

impl Judgement {
    pub fn correctness(&self, cronjobs: usize, minutes: usize) -> Correctness {
        let mut wrong = Vec::new();
        if self.duplicates > 0 {
            wrong.push(format!("{} duplicate Jobs", self.duplicates));
        }
        if self.missed > 0 {
            wrong.push(format!(
                "{} of {} scheduled Jobs missing",
                self.missed,
                group(cronjobs * minutes)
            ));
        }
        if self.unattributed > 0 {
            wrong.push(format!(
                "{} Jobs without CronJob owner or scheduled-timestamp annotation",
                self.unattributed
            ));
        }
        if self.deleted > 0 {
            wrong.push(format!("{} Jobs deleted", self.deleted));
        }
        if !self.status_wrong.is_empty() {
            wrong.push(format!(
                "{} CronJobs with a wrong status (first: {})",
                self.status_wrong.len(),
                self.status_wrong[0]
            ));
        }
        Correctness::unless(wrong, || {
            format!(
                "{} Jobs, one per CronJob and minute: 0 duplicates, 0 missing, none \
                     deleted, status consistent{}",
                group(self.measured),
                if self.earlier > 0 {
                    format!(
                        " ({} more for a minute due before the measured ones)",
                        self.earlier
                    )
                } else {
                    String::new()
                }
            )
        })
    }

    pub fn metrics(&self) -> Vec<Metric> {
        let mut out = Vec::new();
        let mut add = |name: &str, v: Option<f64>, unit: &str| {
            if let Some(value) = v {
                out.push(Metric {
                    name: name.to_string(),
                    value,
                    unit: unit.to_string(),
                });
            }
        };
        let c = &self.created_late;
        let o = &self.observed_late;
        add(
            "Job lateness p50 (creationTimestamp − scheduled)",
            percentile(c, 50.0),
            "s",
        );
        add(
            "Job lateness p99 (creationTimestamp − scheduled)",
            percentile(c, 99.0),
            "s",
        );
        add(
            "Job lateness max (creationTimestamp − scheduled)",
            c.last().copied(),
            "s",
        );
        add(
            "Job lateness p50 (seen by the bench's watch − scheduled)",
            percentile(o, 50.0),
            "s",
        );
        add(
            "Job lateness p99 (seen by the bench's watch − scheduled)",
            percentile(o, 99.0),
            "s",
        );
        add(
            "Job lateness max (seen by the bench's watch − scheduled)",
            o.last().copied(),
            "s",
        );
        add("Duplicate Jobs", Some(self.duplicates as f64), "");
        add("Missed slots", Some(self.missed as f64), "");
        out
    }
}

fn slot_label(at: i64) -> String {
    jiff::Timestamp::from_second(at)
        .map(|t| t.strftime("%H:%M").to_string())
        .unwrap_or_else(|_| at.to_string())
}

impl Scenario for CronJobSchedule {
    type State = State;

    fn id(&self) -> &'static str {
        "cronjob-schedule"
    }

    fn title(&self) -> String {
        format!(
            "CronJob: {} CronJobs on `*/1` for {} minutes",
            group(self.args.cronjobs),
            self.args.minutes
        )
    }

    fn description(&self) -> String {
        let n = group(self.args.cronjobs);
        let m = self.args.minutes;
        format!(
            "{n} CronJobs with schedule `*/1 * * * *`, `concurrencyPolicy: Allow` and the \
             default history limits, created in a fresh namespace early in a minute (so no \
             scheduled minute passes before the manager starts). The manager starts with only \
             `cronjob-controller` (no Job controller, so nothing on the bench plane completes \
             a Job and every Job stays active); `Allow` makes a Job due every \
             minute regardless and no history limit deletes one, so this measures Job \
             creation only. Measured: the {m} scheduled minutes that begin at least {} s \
             after the manager started, each a step from the scheduled instant until the \
             bench's metadata watch has seen a Job of every CronJob for it, then a last step \
             until every CronJob's status shows the last minute and all of its Jobs (polled \
             every 0.5 s; \"Converge\" is manager start to the end of that step, so mostly \
             the schedule itself). \
             Lateness of a Job: `creationTimestamp` (whole seconds) minus its \
             `batch.kubernetes.io/cronjob-scheduled-timestamp`, and the instant the watch \
             first saw it minus the same. Correct: exactly one Job per CronJob and measured \
             minute (0 duplicates, 0 missing), every Job owned by its CronJob and annotated, \
             none deleted, and each CronJob's `status.lastScheduleTime` is the last measured \
             minute with all of its Jobs in `status.active`.",
            SYNC_MARGIN.as_secs()
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("cronjobs".to_string(), self.args.cronjobs.to_string()),
            ("minutes".to_string(), self.args.minutes.to_string()),
            ("concurrencyPolicy".to_string(), "Allow".to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["cronjob-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        let client = &env.client;
        k8s::ensure_namespace(client, ns).await?;
        // A reused plane may still hold an earlier run's objects.
        remove(env, ns).await?;

        let mut jobs = JobWatch::start(client, ns);
        let c = *tokio::time::timeout(Duration::from_secs(120), jobs.rx.wait_for(|c| c.is_some()))
            .await
            .context("the Job watch did not sync within 120 s")?
            .context("job watch ended")?;
        anyhow::ensure!(c == Some(0), "{ns} has {c:?} Jobs at start");

        let now = jiff::Timestamp::now().as_second();
        if now.rem_euclid(60) > LATEST_START_SECOND {
            let at = next_minute(now) + 1;
            say!(
                "waiting {} s for the next minute before creating the CronJobs",
                at - now
            );
            sleep_until(at).await;
        }
        let api: Api<CronJob> = Api::namespaced(client.clone(), ns);
        let n = self.args.cronjobs;
        let started = jiff::Timestamp::now().as_second();
        k8s::bounded(
            "create cronjobs",
            n,
            env.concurrency,
            (n / 5).max(1),
            (0..n).map(|i| {
                let api = api.clone();
                async move {
                    let name = cronjob_name(i);
                    let cj: CronJob = serde_json::from_value(cronjob_manifest(&name))?;
                    let pp = PostParams::default();
                    k8s::retry(|| api.create(&pp, &cj))
                        .await
                        .with_context(|| format!("creating CronJob {name}"))?;
                    Ok(())
                }
            }),
        )
        .await?;
        let done = jiff::Timestamp::now().as_second();
        if done.div_euclid(60) != started.div_euclid(60) {
            say!(
                "note: creating the CronJobs crossed a minute; Jobs due for it are reported \
                 apart from the measured ones"
            );
        }
        Ok(State {
            ns: ns.to_string(),
            jobs,
            slots: Vec::new(),
            metrics: Vec::new(),
            status_current_s: None,
        })
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        let start_ms = jiff::Timestamp::now().as_millisecond() - probe.elapsed().as_millis() as i64;
        state.slots = measured_slots(start_ms, SYNC_MARGIN, self.args.minutes);
        let n = self.args.cronjobs;
        let total = state.slots.len();
        for (i, &at) in state.slots.clone().iter().enumerate() {
            probe.progress(format!(
                "waiting for the scheduled minute {} ({}/{total})",
                slot_label(at),
                i + 1
            ));
            sleep_until(at).await;
            let phase = probe.begin(&format!("minute {}/{total}: {n} Jobs", i + 1));
            loop {
                let log = state.jobs.snapshot();
                let of_slot: Vec<&JobSeen> = log
                    .jobs
                    .iter()
                    .filter(|j| j.scheduled == Some(at))
                    .collect();
                let cronjobs: HashSet<&str> = of_slot
                    .iter()
                    .filter_map(|j| j.cronjob.as_deref())
                    .collect();
                probe.progress(format!(
                    "minute {} ({}/{total}): Jobs of {}/{n} CronJobs ({} Jobs for it, {} in all)",
                    slot_label(at),
                    i + 1,
                    cronjobs.len(),
                    of_slot.len(),
                    log.jobs.len()
                ));
                if cronjobs.len() >= n {
                    let last_ms = of_slot.iter().map(|j| j.observed_ms).max().unwrap_or(0);
                    probe.end(
                        phase,
                        format!(
                            "last Job seen {:.1} s after the minute",
                            (last_ms - at * 1000) as f64 / 1000.0
                        ),
                    );
                    break;
                }
                state.jobs.rx.changed().await.context("job watch ended")?;
            }
        }
        // Converged once every CronJob's status also shows its Jobs: the status writes of the
        // last minute are part of the work.
        let Some(&last) = state.slots.last() else {
            return Ok(());
        };
        let phase = probe.begin("status of every CronJob current");
        let names: Vec<String> = (0..n).map(cronjob_name).collect();
        loop {
            let status = statuses(env, &state.ns).await?;
            let j = judge(&names, &state.slots, &state.jobs.snapshot(), &status);
            if j.status_wrong.is_empty() {
                let after = (jiff::Timestamp::now().as_millisecond() - last * 1000) as f64 / 1000.0;
                state.status_current_s = Some(after);
                probe.end(phase, format!("{after:.1} s after the last minute"));
                return Ok(());
            }
            probe.progress(format!(
                "{} of {n} CronJobs' status not current yet",
                j.status_wrong.len()
            ));
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let status = statuses(env, &state.ns).await?;
        let names: Vec<String> = (0..self.args.cronjobs).map(cronjob_name).collect();
        let j = judge(&names, &state.slots, &state.jobs.snapshot(), &status);
        state.metrics = j.metrics();
        if let Some(s) = state.status_current_s {
            state.metrics.push(Metric {
                name:
                    "CronJob status current (all lastScheduleTime and active) after the last minute"
                        .into(),
                value: s,
                unit: "s".into(),
            });
        }
        Ok(j.correctness(self.args.cronjobs, self.args.minutes))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// Each CronJob's `lastScheduleTime` (Unix seconds) and the names in its `status.active`.
async fn statuses(
    env: &Env,
    ns: &str,
) -> anyhow::Result<BTreeMap<String, (Option<i64>, Vec<String>)>> {
    let api: Api<CronJob> = Api::namespaced(env.client.clone(), ns);
    let lp = ListParams::default();
    let list = k8s::retry(|| api.list(&lp))
        .await
        .context("listing the CronJobs")?;
    Ok(list
        .items
        .iter()
        .map(|cj| {
            let st = cj.status.as_ref();
            (
                cj.name_any(),
                (
                    st.and_then(|s| s.last_schedule_time.as_ref())
                        .map(|t| t.0.as_second()),
                    st.and_then(|s| s.active.as_ref())
                        .map(|a| a.iter().filter_map(|r| r.name.clone()).collect())
                        .unwrap_or_default(),
                ),
            )
        })
        .collect())
}

fn cronjob_manifest(name: &str) -> serde_json::Value {
    json!({
        "metadata": {"name": name, "labels": {"app": "rkcm-bench-cj"}},
        "spec": {
            "schedule": "*/1 * * * *",
            "concurrencyPolicy": "Allow",
            "jobTemplate": {"spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": false,
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]
            }}}}
        }
    })
}

/// Deletes every CronJob and Job of `ns`. Background propagation: batch/v1 Jobs default to
/// orphaning, which would leave them waiting forever for a garbage collector the bench
/// plane does not run (the manager is stopped: nothing recreates them).
async fn remove(env: &Env, ns: &str) -> anyhow::Result<()> {
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    let lp = ListParams::default();
    let cjs: Api<CronJob> = Api::namespaced(env.client.clone(), ns);
    let jobs: Api<Job> = Api::namespaced(env.client.clone(), ns);
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    loop {
        let one = ListParams::default().limit(1);
        let left_cj = k8s::retry(|| cjs.list_metadata(&one)).await?.items.len();
        let left_jobs = k8s::retry(|| jobs.list_metadata(&one)).await?.items.len();
        if left_cj == 0 && left_jobs == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "CronJobs or Jobs of {ns} still present 120 s after their deletion"
        );
        if left_cj > 0 {
            k8s::retry(|| cjs.delete_collection(&dp, &lp))
                .await
                .with_context(|| format!("deleting the CronJobs of {ns}"))?;
        }
        if left_jobs > 0 {
            k8s::retry(|| jobs.delete_collection(&dp, &lp))
                .await
                .with_context(|| format!("deleting the Jobs of {ns}"))?;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(name: &str, cj: &str, at: i64, created: i64, observed_ms: i64) -> JobSeen {
        JobSeen {
            name: name.into(),
            cronjob: Some(cj.into()),
            scheduled: Some(at),
            created: Some(created),
            observed_ms,
        }
    }

    #[test]
    fn measured_minutes_leave_the_sync_margin() {
        // Started at :10.5 → :25.5 is the earliest → the next minute.
        assert_eq!(
            measured_slots(600_500 + 10_000, SYNC_MARGIN, 3),
            vec![660, 720, 780]
        );
        // Started at :50 → :05 of the next minute is the earliest → the one after.
        assert_eq!(measured_slots(650_000, SYNC_MARGIN, 1), vec![720]);
        // Exactly on a boundary counts.
        assert_eq!(measured_slots(645_000, SYNC_MARGIN, 1), vec![660]);
        assert_eq!(next_minute(660), 660);
        assert_eq!(next_minute(661), 720);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), Some(50.0));
        assert_eq!(percentile(&v, 99.0), Some(99.0));
        assert_eq!(percentile(&[3.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    fn status(
        entries: &[(&str, Option<i64>, &[&str])],
    ) -> BTreeMap<String, (Option<i64>, Vec<String>)> {
        entries
            .iter()
            .map(|(n, t, a)| {
                (
                    n.to_string(),
                    (*t, a.iter().map(|s| s.to_string()).collect()),
                )
            })
            .collect()
    }

    #[test]
    fn judges_one_job_per_cronjob_and_minute() {
        let cjs = vec!["a".to_string(), "b".to_string()];
        let slots = [660, 720];
        let log = JobLog {
            jobs: vec![
                seen("a-10", "a", 600, 615, 615_100), // due before the measured minutes
                seen("a-11", "a", 660, 660, 660_200),
                seen("b-11", "b", 660, 661, 661_900),
                seen("a-12", "a", 720, 720, 720_300),
                seen("b-12", "b", 720, 723, 723_050),
            ],
            deleted: vec![],
        };
        let st = status(&[
            ("a", Some(720), &["a-10", "a-11", "a-12"]),
            ("b", Some(720), &["b-12", "b-11"]),
        ]);
        let j = judge(&cjs, &slots, &log, &st);
        assert_eq!(j.measured, 4);
        assert_eq!(j.earlier, 1);
        assert_eq!(
            (j.duplicates, j.missed, j.unattributed, j.deleted),
            (0, 0, 0, 0)
        );
        assert!(j.status_wrong.is_empty(), "{:?}", j.status_wrong);
        assert_eq!(j.created_late, vec![0.0, 0.0, 1.0, 3.0]);
        assert_eq!(j.observed_late, vec![0.2, 0.3, 1.9, 3.05]);
        let c = j.correctness(2, 2);
        assert!(c.ok, "{}", c.detail);
        assert_eq!(
            c.detail,
            "4 Jobs, one per CronJob and minute: 0 duplicates, 0 missing, none deleted, \
             status consistent (1 more for a minute due before the measured ones)"
        );
        let m = j.metrics();
        assert_eq!(
            m[2].name,
            "Job lateness max (creationTimestamp − scheduled)"
        );
        assert_eq!(m[2].value, 3.0);
        assert_eq!(m[5].value, 3.05);
    }

    #[test]
    fn judges_duplicates_missing_deleted_and_status() {
        let cjs = vec!["a".to_string(), "b".to_string()];
        let slots = [660];
        let mut dup = seen("a-11-again", "a", 660, 662, 662_000);
        dup.name = "a-11-again".into();
        let log = JobLog {
            jobs: vec![
                seen("a-11", "a", 660, 660, 660_100),
                dup,
                JobSeen {
                    name: "stray".into(),
                    cronjob: None,
                    scheduled: None,
                    created: Some(660),
                    observed_ms: 660_000,
                },
            ],
            deleted: vec!["a-10".into()],
        };
        let st = status(&[("a", Some(660), &["a-11", "a-11-again"]), ("b", None, &[])]);
        let j = judge(&cjs, &slots, &log, &st);
        assert_eq!(
            (j.duplicates, j.missed, j.unattributed, j.deleted),
            (1, 1, 1, 1)
        );
        let c = j.correctness(2, 1);
        assert!(!c.ok);
        assert_eq!(
            c.detail,
            "1 duplicate Jobs; 1 of 2 scheduled Jobs missing; 1 Jobs without CronJob owner \
             or scheduled-timestamp annotation; 1 Jobs deleted; 1 CronJobs with a wrong \
             status (first: b: lastScheduleTime None, want 660)"
        );
    }

    #[test]
    fn reads_job_metadata() {
        let job: PartialObjectMeta<Job> = serde_json::from_value(json!({
            "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
            "metadata": {
                "name": "cj-00001-29000000",
                "creationTimestamp": "2026-11-24T07:02:01Z",
                "annotations": {SCHEDULED_ANNOTATION: "2026-11-24T07:02:00Z"},
                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob",
                    "name": "cj-00001", "uid": "u", "controller": true}]
            }
        }))
        .unwrap();
        let s = JobSeen::of(&job, 5);
        let at = "2026-11-24T07:02:00Z"
            .parse::<jiff::Timestamp>()
            .unwrap()
            .as_second();
        assert_eq!(s.cronjob.as_deref(), Some("cj-00001"));
        assert_eq!(s.scheduled, Some(at));
        assert_eq!(s.created, Some(at + 1));
    }
}
