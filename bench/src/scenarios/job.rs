//! Job: one Indexed Job run to completion on kwok-simulated nodes (the 1 000
//! completions at parallelism 100 and 10 000 at parallelism 500), and many small Jobs with
//! `ttlSecondsAfterFinished: 0` run and deleted (job + ttl-after-finished controllers).
//!
//! The plane's kwok runs every pod scheduled to its nodes and completes Job pods (exit 0) as
//! soon as they run, so the time measured is the controllers' (and the scheduler's): create
//! pods, count finished ones (status write, then tracking-finalizer removal), finish the Job.
//!
//! Both scenarios start with a probe Job of one pod: once the manager has completed it (and,
//! with TTL, deleted it) its informers are synced and it works (milestone "synced"). The timed
//! step then begins with the bench's create request(s):
//! - **indexed** (`job-1k`, `job-10k`): one Indexed Job of N completions and parallelism P;
//!   converged when it has the `Complete` condition. Correct: `succeeded` = N,
//!   `completedIndexes` = `0-(N-1)`, nothing failed, `uncountedTerminatedPods` empty, the
//!   conditions are `SuccessCriteriaMet` then `Complete`, exactly one pod per index, and no
//!   pod keeps the `batch.kubernetes.io/job-tracking` finalizer.
//! - **ttl** (`job-ttl`): N Jobs of one pod each, created by the bench (bounded concurrency);
//!   converged when the TTL-after-finished controller has deleted all of them (upstream
//!   deletes in the foreground: with no garbage collector on the bench plane a deleted Job
//!   stays with a deletionTimestamp, which counts). Correct: each was seen `Complete` with
//!   `succeeded` = 1 before its deletion, exactly one pod per Job, and no pod keeps the finalizer. No garbage
//!   collector runs on the bench plane, so the pods of deleted Jobs stay (counted, finalizer
//!   free).
//!
//! Scenario measures, compared in the report: the step's wall time, pods per second, and the
//! manager's API requests during the step per pod (all, and writes: create, update, patch,
//! delete), counted from the audit log between the step's first request and convergence.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

use crate::audit::{self};
use crate::harness::{Env, Probe, Scenario};
use crate::k8s;
use crate::results::{Correctness, Metric};
use crate::scenarios::podgc::group;

mod seen;
mod shared;
use seen::{JobSeen, JobsSeen};
use shared::{
    State, create_job, job_manifest, manager_requests, pods_by_owner, prepare, remove, run_probe,
    step_metrics,
};

/// The completion index label of Indexed Job pods.
pub const INDEX_LABEL: &str = "batch.kubernetes.io/job-completion-index";
/// The Indexed Job's name.
pub const NAME: &str = "bench-job";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Completions of the Indexed Job.
    #[arg(long, default_value_t = 1_000)]
    pub completions: usize,
    /// Its parallelism.
    #[arg(long, default_value_t = 100)]
    pub parallelism: usize,
    /// The scenario's id in results and namespaces (one per size: job-1k, job-10k).
    #[arg(long, default_value = "job-1k")]
    pub id: String,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TtlArgs {
    /// Jobs of one pod each, all with `ttlSecondsAfterFinished: 0`.
    #[arg(long, default_value_t = 500)]
    pub jobs: usize,
}

/// One Indexed Job run to completion.
pub struct IndexedJob {
    pub args: Args,
    /// `args.id`, kept for the life of the process (the harness wants a `'static` id).
    pub id: &'static str,
}

impl IndexedJob {
    pub fn new(args: Args) -> Self {
        let id: &'static str = Box::leak(args.id.clone().into_boxed_str());
        Self { args, id }
    }
}

/// Many one-pod Jobs deleted by the TTL-after-finished controller as they finish.
pub struct TtlJobs {
    pub args: TtlArgs,
}

/// What the bench keeps of a Job, as its watch last saw it.
impl Scenario for IndexedJob {
    type State = State;

    fn id(&self) -> &'static str {
        self.id
    }

    fn title(&self) -> String {
        format!(
            "Job: Indexed, {} completions, parallelism {}",
            group(self.args.completions),
            group(self.args.parallelism)
        )
    }

    fn description(&self) -> String {
        let (n, p) = (group(self.args.completions), group(self.args.parallelism));
        format!(
            "The manager starts with only `job-controller` in a fresh namespace and completes \
             a probe Job of one pod (milestone \"synced\"). The bench then creates one Indexed \
             Job of {n} completions and parallelism {p} whose pods select the kwok nodes (kwok \
             runs each pod as soon as it is bound and completes it with exit 0) — **run**, \
             converged when the Job has the `Complete` condition. Measured per step: wall \
             time, pods per second, and the manager's API requests (and writes: create, \
             update, patch, delete) per pod from the audit log. Upstream's own integration \
             benchmark records 1 000 pods in 19.3 s and 10 000 in 225 s at QPS 100. Correct: \
             `succeeded` {n}, `completedIndexes` `0-{}`, nothing failed, \
             `uncountedTerminatedPods` empty, conditions `SuccessCriteriaMet` then \
             `Complete`, one pod per index, and no pod keeps the tracking finalizer.",
            self.args.completions.saturating_sub(1)
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("completions".to_string(), self.args.completions.to_string()),
            ("parallelism".to_string(), self.args.parallelism.to_string()),
        ])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["job-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        prepare(env, ns, self.args.parallelism + 1).await
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        run_probe(env, state, probe, false).await?;
        let (n, p) = (self.args.completions, self.args.parallelism);
        let from = audit::offset(&env.audit_log)?;
        let step = probe.begin(&format!("run {} completions", group(n)));
        let t = Instant::now();
        create_job(
            &env.client,
            &state.ns,
            job_manifest(
                NAME,
                json!({"completionMode": "Indexed", "completions": n, "parallelism": p}),
            ),
        )
        .await?;
        let seen = state
            .jobs
            .wait(
                probe,
                |s| s.live.get(NAME).is_some_and(|j| j.has("Complete")),
                |s| match s.live.get(NAME) {
                    Some(j) => format!(
                        "{} of {} succeeded, {} uncounted",
                        group(usize::try_from(j.succeeded).unwrap_or(0)),
                        group(n),
                        j.uncounted
                    ),
                    None => "the Job is not seen yet".to_string(),
                },
            )
            .await?;
        let seconds = t.elapsed().as_secs_f64();
        let to = audit::offset(&env.audit_log)?;
        state.step = Some((from, to, seconds));
        probe.end(
            step,
            format!(
                "{} succeeded; most uncounted at once {}",
                seen.live.get(NAME).map_or(0, |j| j.succeeded),
                seen.max_uncounted
            ),
        );
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let n = self.args.completions;
        let jobs = state.jobs.current();
        let job = jobs
            .live
            .get(NAME)
            .cloned()
            .context("the Job is not seen")?;
        let (by_owner, tracked) = pods_by_owner(&env.client, &state.ns).await?;
        let pods = by_owner.get(&job.uid).cloned().unwrap_or_default();
        let indexes: BTreeSet<&String> = pods.iter().filter_map(|l| l.get(INDEX_LABEL)).collect();
        if let Some((from, to, seconds)) = state.step {
            let c = manager_requests(&env.audit_log, from, to)?;
            state.metrics = step_metrics(seconds, n, &c);
        }
        Ok(judge_indexed(
            n,
            &job,
            pods.len(),
            indexes.len(),
            tracked.len(),
        ))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

/// The end state of the Indexed Job run.
pub fn judge_indexed(
    n: usize,
    job: &JobSeen,
    pods: usize,
    distinct_indexes: usize,
    tracked: usize,
) -> Correctness {
    let mut wrong = Vec::new();
    let want_indexes = format!("0-{}", n.saturating_sub(1));
    if usize::try_from(job.succeeded).ok() != Some(n) {
        wrong.push(format!("succeeded {}, want {}", job.succeeded, group(n)));
    }
    if job.completed_indexes != want_indexes {
        wrong.push(format!(
            "completedIndexes {:?}, want {want_indexes}",
            job.completed_indexes
        ));
    }
    if job.failed != 0 {
        wrong.push(format!("failed {}", job.failed));
    }
    if job.uncounted != 0 {
        wrong.push(format!("{} uncounted pods left", job.uncounted));
    }
    let want = [
        "SuccessCriteriaMet=CompletionsReached",
        "Complete=CompletionsReached",
    ];
    if job.conditions != want {
        wrong.push(format!("conditions {:?}", job.conditions));
    }
    if pods != n || distinct_indexes != n {
        wrong.push(format!(
            "{} pods for {} distinct indexes, want one per index",
            group(pods),
            group(distinct_indexes)
        ));
    }
    if tracked != 0 {
        wrong.push(format!("{tracked} pods keep the tracking finalizer"));
    }
    Correctness::unless(wrong, || {
        format!(
            "succeeded {} = completedIndexes 0-{}, one pod per index, no finalizer left",
            group(n),
            n.saturating_sub(1)
        )
    })
}

impl Scenario for TtlJobs {
    type State = State;

    fn id(&self) -> &'static str {
        "job-ttl"
    }

    fn title(&self) -> String {
        format!(
            "Job + TTL-after-finished: {} one-pod Jobs with ttlSecondsAfterFinished 0",
            group(self.args.jobs)
        )
    }

    fn description(&self) -> String {
        let n = group(self.args.jobs);
        format!(
            "The manager starts with `job-controller` and `ttl-after-finished-controller` in a \
             fresh namespace and runs and deletes a probe Job (milestone \"synced\"). The bench \
             then creates {n} Jobs of one pod each with `ttlSecondsAfterFinished: 0` (bounded \
             concurrency), pods on the kwok nodes (completed by kwok as soon as they run) — \
             **run and delete**, converged when every Job is deleted or being deleted (the \
             TTL controller deletes in the foreground; no garbage collector finishes that \
             on the bench plane). Measured per step as for \
             the Indexed Job. Correct: every Job was seen `Complete` with `succeeded` 1 before \
             its deletion, one pod per Job, no pod keeps the tracking finalizer (no garbage \
             collector runs on the bench plane, so the pods stay)."
        )
    }

    fn params(&self) -> BTreeMap<String, String> {
        BTreeMap::from([("jobs".to_string(), self.args.jobs.to_string())])
    }

    fn controllers(&self) -> Vec<&'static str> {
        vec!["job-controller", "ttl-after-finished-controller"]
    }

    async fn setup(&self, env: &Env, ns: &str) -> anyhow::Result<State> {
        prepare(env, ns, self.args.jobs + 1).await
    }

    async fn converge(&self, env: &Env, state: &mut State, probe: &Probe) -> anyhow::Result<()> {
        run_probe(env, state, probe, true).await?;
        let n = self.args.jobs;
        let names: Vec<String> = (0..n).map(|i| format!("ttl-{i:05}")).collect();
        let from = audit::offset(&env.audit_log)?;
        let step = probe.begin(&format!("run and delete {} Jobs", group(n)));
        let t = Instant::now();
        let ns = state.ns.clone();
        let ns = &ns;
        let creating = k8s::bounded(
            "Jobs created",
            n,
            env.concurrency,
            100,
            names.iter().map(|name| async move {
                create_job(
                    &env.client,
                    ns,
                    job_manifest(name, json!({"ttlSecondsAfterFinished": 0})),
                )
                .await?;
                Ok(())
            }),
        );
        let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
        let count = |s: &JobsSeen| {
            wanted
                .iter()
                .filter(|k| s.deleted_or_deleting(k).is_some())
                .count()
        };
        let mut watch = state.jobs.rx.clone();
        let waiting = async {
            loop {
                {
                    let s = watch.borrow_and_update();
                    let gone = count(&s);
                    probe.progress(format!(
                        "{} of {} Jobs deleted, {} live",
                        group(gone),
                        group(n),
                        s.live.len()
                    ));
                    if gone == n {
                        return Ok::<_, anyhow::Error>(());
                    }
                }
                watch.changed().await.context("job watch ended")?;
            }
        };
        let (c, w) = tokio::join!(creating, waiting);
        c?;
        w?;
        let seconds = t.elapsed().as_secs_f64();
        let to = audit::offset(&env.audit_log)?;
        state.step = Some((from, to, seconds));
        probe.end(step, format!("{} Jobs deleted", group(n)));
        Ok(())
    }

    async fn verify(&self, env: &Env, state: &mut State) -> anyhow::Result<Correctness> {
        let n = self.args.jobs;
        let jobs = state.jobs.current();
        let (by_owner, tracked) = pods_by_owner(&env.client, &state.ns).await?;
        let mut wrong = Vec::new();
        let mut not_complete = 0;
        let mut pods_wrong = 0;
        for i in 0..n {
            let name = format!("ttl-{i:05}");
            let Some(j) = jobs.deleted_or_deleting(&name) else {
                wrong.push(format!("Job {name} not deleted"));
                continue;
            };
            if !(j.has("Complete") && j.succeeded == 1 && j.failed == 0) {
                not_complete += 1;
            }
            if by_owner.get(&j.uid).map_or(0, Vec::len) != 1 {
                pods_wrong += 1;
            }
        }
        if not_complete > 0 {
            wrong.push(format!(
                "{not_complete} Jobs deleted without Complete and succeeded 1"
            ));
        }
        if pods_wrong > 0 {
            wrong.push(format!("{pods_wrong} Jobs without exactly one pod"));
        }
        if !tracked.is_empty() {
            wrong.push(format!(
                "{} pods keep the tracking finalizer",
                tracked.len()
            ));
        }
        if let Some((from, to, seconds)) = state.step {
            let c = manager_requests(&env.audit_log, from, to)?;
            state.metrics = step_metrics(seconds, n, &c);
        }
        Ok(Correctness::unless(wrong, || {
            format!(
                "{} Jobs complete (succeeded 1) then deleted, one pod each, no finalizer left",
                group(n)
            )
        }))
    }

    fn metrics(&self, state: &State) -> Vec<Metric> {
        state.metrics.clone()
    }

    async fn cleanup(&self, env: &Env, ns: &str) -> anyhow::Result<()> {
        remove(env, ns).await
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::Job;

    use super::*;
    use crate::audit::Counts;

    fn seen(succeeded: i32, indexes: &str, conditions: &[&str]) -> JobSeen {
        JobSeen {
            uid: "u".into(),
            conditions: conditions.iter().map(|s| s.to_string()).collect(),
            succeeded,
            failed: 0,
            completed_indexes: indexes.into(),
            uncounted: 0,
            deleting: false,
        }
    }

    #[test]
    fn judges_the_indexed_job() {
        let done = [
            "SuccessCriteriaMet=CompletionsReached",
            "Complete=CompletionsReached",
        ];
        let ok = judge_indexed(1000, &seen(1000, "0-999", &done), 1000, 1000, 0);
        assert!(ok.ok, "{}", ok.detail);
        let twice = judge_indexed(1000, &seen(1000, "0-999", &done), 1001, 1000, 2);
        assert!(!twice.ok);
        assert_eq!(
            twice.detail,
            "1 001 pods for 1 000 distinct indexes, want one per index; 2 pods keep the \
             tracking finalizer"
        );
        let short = judge_indexed(
            3,
            &seen(2, "0,2", &["Complete=CompletionsReached"]),
            3,
            3,
            0,
        );
        assert!(
            short
                .detail
                .starts_with("succeeded 2, want 3; completedIndexes \"0,2\"")
        );
    }

    #[test]
    fn step_metrics_per_pod() {
        let mut c = Counts {
            total: 2300,
            ..Counts::default()
        };
        c.by_verb.insert("create".into(), 1020);
        c.by_verb.insert("patch".into(), 1000);
        c.by_verb.insert("update".into(), 80);
        c.by_verb.insert("get".into(), 200);
        c.by_request.insert("create pods".into(), 1000);
        c.by_request.insert("update jobs/status".into(), 80);
        let m = step_metrics(20.0, 1000, &c);
        let get = |n: &str| m.iter().find(|x| x.name == n).map(|x| x.value);
        assert_eq!(get("pods per second"), Some(50.0));
        assert_eq!(get("writes per pod"), Some(2.1));
        assert_eq!(get("API requests per pod"), Some(2.3));
        assert_eq!(get("Job status writes per pod"), Some(0.08));
    }

    #[test]
    fn reads_job_status() {
        let j: Job = serde_json::from_value(json!({
            "metadata": {"name": "j", "uid": "u"},
            "status": {"succeeded": 3, "completedIndexes": "0-2",
                "uncountedTerminatedPods": {"succeeded": ["a"], "failed": ["b", "c"]},
                "conditions": [
                    {"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached"},
                    {"type": "Suspended", "status": "False", "reason": "JobResumed"}
                ]}
        }))
        .unwrap();
        let s = JobSeen::of(&j);
        assert_eq!(s.uncounted, 3);
        assert_eq!(s.conditions, ["SuccessCriteriaMet=CompletionsReached"]);
        assert!(s.has("SuccessCriteriaMet") && !s.has("Complete"));
    }
}
