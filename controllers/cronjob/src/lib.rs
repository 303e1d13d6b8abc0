//! CronJob controller: creates a Job for each scheduled instant of a `batch/v1` CronJob, keeps
//! `status.active`, `lastScheduleTime` and `lastSuccessfulTime` current, and deletes finished
//! Jobs beyond the history limits.
//!
//! Mirrors upstream `pkg/controller/cronjob/cronjob_controllerv2.go` and `utils.go`
//! (Kubernetes v1.37, with the v1.37 fixes: children matched by kind, name and UID; the
//! `AlreadyExists` path reads the Job from the CronJob's namespace). Schedules are parsed and
//! evaluated exactly as `github.com/robfig/cron/v3` v3.0.1 does ([`schedule`]).
//!
//! # Guarantees
//! - At most one Job per scheduled instant: Job names are `<cronjob>-<Unix minutes>`, so a
//!   second create for the same instant answers `AlreadyExists`; after a crash between create
//!   and status write, the existing Job (if this CronJob controls it) is put back into
//!   `status.active` instead of being created again.
//! - Only the most recent unmet instant runs: after downtime, or while `Forbid` holds a run
//!   back, one Job is created for the latest missed instant (within
//!   `startingDeadlineSeconds`), never one per missed instant. The missed count is estimated,
//!   never walked, so a CronJob off by years costs a few schedule evaluations.
//! - A bad `timeZone` or schedule gets a Warning event and no requeue (no retry storm); a
//!   schedule that never fires gets `InvalidSchedule`.
//! - Jobs are deleted only for history cleanup and the `Replace` policy, always with
//!   Background propagation and a UID precondition; Jobs controlled by anything else (another
//!   kind, or an older CronJob of the same name) are never touched.
//!
//! # Watches and writes
//! Reads the shared CronJob and Job informers. Writes Jobs (create, delete), `cronjobs/status`
//! (full `PUT` with the cached resourceVersion, at most once per sync) and Events (source
//! `cronjob-controller`); live `GET`s of a CronJob or Job only where upstream does them.
//! Unlike upstream (unless `--rkcm-cronjob-defer-status-writes=false`), a sync's status write
//! is sent once no other sync is running (at most a few seconds later, see [`deferred`]), so
//! when many CronJobs fire at the same instant every Job is created before the status writes
//! take their share of the client's rate limit; a CronJob is not synced again until its status
//! write is done and in the cache. With the flag off, each sync ends with its own status write,
//! as upstream's.
//! Metric: `cronjob_controller_job_creation_skew_duration_seconds`; queue `cronjob`.

pub mod consts;
mod deferred;
mod error;
mod metrics;
pub mod plan;
pub mod reconcile;
pub mod schedule;

use std::sync::Arc;

use jiff::tz::TimeZone;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::ControllerContext;
use rkcm_runtime::cache::{Change, INDEX_CONTROLLER_UID, InformerFactory, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::controller::{Run, SyncProbe, probes};
use rkcm_runtime::events::{EventRecorder, EventType};
use rkcm_runtime::keys::key_of;
use rkcm_runtime::queue::{RateLimiter, WorkQueue};
use rkcm_runtime::tracked::Size;
use rkcm_runtime::workload::controller_ref::{controller_of, resolve_controller_ref};

pub use error::Error;

/// Canonical name of the CronJob controller (`--controllers`; alias `cronjob`).
pub const NAME: &str = "cronjob-controller";

/// Upstream default of `--concurrent-cron-job-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration. `Default` equals upstream. The flag (`--concurrent-cron-job-syncs`) is
/// defined once in the binary's command line, which builds this.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker tasks (`--concurrent-cron-job-syncs`).
    pub workers: usize,
    /// The zone schedules without `spec.timeZone` are evaluated in. Upstream uses the
    /// process's local zone (`TZ`, `/etc/localtime`); so does the default. Not a flag.
    pub local_time_zone: TimeZone,
    /// rkcm's own (`--rkcm-cronjob-defer-status-writes`, on): a sync's status write waits
    /// until no sync runs (at most [`deferred::MAX_DEFER`]) instead of ending the sync, as
    /// upstream's does ([`deferred`]). A kept difference: the README gives its cost.
    pub defer_status_writes: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
            local_time_zone: TimeZone::system(),
            defer_status_writes: true,
        }
    }
}

/// The running controller: caches, queue and the sync.
pub(crate) struct Controller {
    cronjobs: Store<CronJob>,
    jobs: Store<Job>,
    queue: WorkQueue<String>,
    syncer: reconcile::Syncer<reconcile::KubeApi>,
    clock: SharedClock,
    /// Status writes waiting for the Job creates of other syncs ([`deferred`]).
    deferred: Arc<deferred::Deferred>,
    /// [`Config::defer_status_writes`]; off, each sync writes its status itself.
    defer: bool,
}

impl Controller {
    fn enqueue_owner(&self, job: &Job) {
        let Some(r) = controller_of(&job.metadata) else {
            return;
        };
        let ns = job.metadata.namespace.as_deref().unwrap_or_default();
        if let Some(cj) = resolve_controller_ref(&self.cronjobs, ns, r) {
            self.queue.add(key_of(cj.as_ref()));
        }
    }

    /// Upstream `addJob`/`updateJob`/`deleteJob`.
    fn on_job(&self, change: Change<Job>) {
        match change {
            Change::Added(job) => self.enqueue_owner(&job),
            Change::Deleted { obj, .. } => self.enqueue_owner(&obj),
            Change::Updated { old, new } => {
                if old.metadata.resource_version == new.metadata.resource_version {
                    return;
                }
                let old_ref: Option<&OwnerReference> = controller_of(&old.metadata);
                let new_ref = controller_of(&new.metadata);
                if old_ref != new_ref && old_ref.is_some() {
                    self.enqueue_owner(&old);
                }
                self.enqueue_owner(&new);
            }
        }
    }

    /// Upstream's CronJob handlers: add and delete enqueue now; an update that changes the
    /// schedule or time zone enqueues for the new next instant, any other update now.
    fn on_cronjob(&self, change: Change<CronJob>) {
        match change {
            Change::Added(cj) | Change::Deleted { obj: cj, .. } => {
                self.queue.add(key_of(cj.as_ref()))
            }
            Change::Updated { old, new } => {
                if old.spec.schedule == new.spec.schedule
                    && old.spec.time_zone == new.spec.time_zone
                {
                    self.queue.add(key_of(new.as_ref()));
                    return;
                }
                let (formatted, _) = plan::format_schedule(&new, false);
                match schedule::parse_standard(&formatted) {
                    Ok(sched) => {
                        let now = self.clock.wall();
                        let d = plan::next_schedule_time_duration(
                            &new,
                            now,
                            &sched,
                            &self.syncer.local,
                        );
                        self.queue
                            .add_after(key_of(new.as_ref()), plan::as_queue_delay(d));
                    }
                    Err(error) => {
                        tracing::debug!(cronjob = %key_of(new.as_ref()), %error, "unparseable schedule for cronjob");
                        self.syncer.recorder.event_for(
                            new.as_ref(),
                            EventType::Warning,
                            consts::reasons::UNPARSEABLE_CRONJOB_SCHEDULE,
                            &format!("unparseable schedule for cronjob: {}", new.spec.schedule),
                        );
                    }
                }
            }
        }
    }
}

impl Reconcile for Controller {
    type Error = Error;

    async fn sync(&self, key: String) -> Result<(), Error> {
        let _running = self.deferred.enter();
        let Some(cj) = self.cronjobs.get(&key) else {
            tracing::debug!(cronjob = %key, "cronjob not found, may be it is deleted");
            self.deferred.forget(&key);
            return Ok(());
        };
        let base_rv = cj.metadata.resource_version.clone();
        let gate = self
            .deferred
            .gate(&key, base_rv.as_deref(), tokio::time::Instant::now());
        if gate == deferred::Gate::Skip {
            tracing::debug!(cronjob = %key, "status write outstanding, sync skipped");
            return Ok(());
        }
        let uid = cj.metadata.uid.clone().unwrap_or_default();
        let children: Vec<Arc<Job>> = self
            .jobs
            .by_index(INDEX_CONTROLLER_UID, &uid)
            .into_iter()
            .filter(|j| plan::is_child(j, &cj))
            .collect();
        let now = self.clock.wall();
        if !self.defer {
            // Upstream's order: the status write ends the sync.
            if let Some(d) = self.syncer.sync(&cj, &children, now).await? {
                tracing::debug!(cronjob = %key, requeue_after = ?d, "re-queuing cronjob");
                self.queue.add_after(key, plan::as_queue_delay(d));
            }
            return Ok(());
        }
        let outcome = self.syncer.sync_without_status(&cj, &children, now).await;
        if let Some(status) = outcome.status {
            self.deferred
                .push(key.clone(), status, base_rv, tokio::time::Instant::now());
        }
        if let Some(d) = outcome.result? {
            tracing::debug!(cronjob = %key, requeue_after = ?d, "re-queuing cronjob");
            self.queue.add_after(key, plan::as_queue_delay(d));
        }
        Ok(())
    }
}

/// The informers the controller reads (the process requests them before starting the
/// factory, and waits for them before running workers).
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    // Jobs are read for owners, the scheduled-time annotation and status: not the template.
    factory
        .informer::<Job>()
        .keep(rkcm_runtime::cache::projection::Fields::BASE);
    probes::<(CronJob, Job)>(factory)
}

/// Runs the CronJob controller until `ctx.shutdown` is cancelled: subscribes to the CronJob
/// and Job informers, waits for both caches, then runs `cfg.workers` workers. Returns `Ok(())`
/// on shutdown (also before the caches synced); sync errors are retried with backoff and never
/// end it.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    metrics::job_creation_skew();
    let cronjobs = ctx.informers.informer::<CronJob>();
    let jobs = ctx.informers.informer::<Job>();
    let queue = WorkQueue::new(consts::QUEUE_NAME, RateLimiter::Default);
    let controller = Arc::new(Controller {
        cronjobs: cronjobs.store(),
        jobs: jobs.store(),
        queue: queue.clone(),
        syncer: reconcile::Syncer {
            api: reconcile::KubeApi::new(ctx.client.clone()),
            recorder: EventRecorder::with_options(
                ctx.client.clone(),
                consts::EVENT_COMPONENT,
                None,
                ctx.clock.clone(),
            ),
            local: cfg.local_time_zone.clone(),
        },
        clock: ctx.clock.clone(),
        deferred: Arc::new(deferred::Deferred::default()),
        defer: cfg.defer_status_writes,
    });
    rkcm_runtime::tracked::track(NAME, &controller, |c, out| {
        out.push(Size::object("status_writes", c.deferred.len()));
    });
    let api = Arc::new(reconcile::KubeApi::new(ctx.client.clone()));
    let mut writers = tokio::task::JoinSet::new();
    for _ in 0..cfg.workers.max(1) {
        writers.spawn(controller.deferred.clone().run_writer(
            api.clone(),
            queue.clone(),
            ctx.shutdown.clone(),
        ));
    }
    jobs.subscribe_with(&controller, Controller::on_job);
    cronjobs.subscribe_with(&controller, Controller::on_cronjob);
    // Upstream retries every failed sync with backoff, for ever.
    Run::main(
        NAME,
        informers(&ctx.informers),
        &controller,
        queue,
        cfg.workers,
    )
    .run(&ctx)
    .await?;
    // The workers are done; the writers send what the last syncs left queued.
    while writers.join_next().await.is_some() {}
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A controller on `cronjobs`, writing through `fake`, its clock at `now`.
    fn controller_on(
        fake: &rkcm_testkit::fake_api::FakeApi,
        cronjobs: &rkcm_runtime::cache::Informer<CronJob>,
        now: &str,
    ) -> Controller {
        let (recorder, _events) = EventRecorder::fake(consts::EVENT_COMPONENT);
        Controller {
            cronjobs: cronjobs.store(),
            jobs: rkcm_runtime::cache::Informer::<Job>::detached().store(),
            queue: WorkQueue::new("cronjob-test", RateLimiter::Default),
            syncer: reconcile::Syncer {
                api: reconcile::KubeApi::new(fake.client()),
                recorder,
                local: TimeZone::UTC,
            },
            clock: Arc::new(rkcm_runtime::clock::FakeClock::new(
                now.parse().expect("ts"),
            )),
            deferred: Arc::new(deferred::Deferred::default()),
            defer: true,
        }
    }

    /// A status write ends in an entry that only a sync of a cached CronJob drops; when the
    /// CronJob is deleted first, its sync finds nothing and must drop the entry itself, or one
    /// entry stays for every CronJob ever deleted that way.
    #[tokio::test(start_paused = true)]
    async fn a_deleted_cronjob_leaves_no_status_write_behind() {
        use kube::runtime::watcher;
        use rkcm_runtime::cache::Informer;
        use rkcm_testkit::fake_api::FakeApi;

        let fake = FakeApi::new();
        fake.echo_writes();
        let cronjobs = Informer::<CronJob>::detached();
        cronjobs.feed(watcher::Event::Init);
        cronjobs.feed(watcher::Event::InitDone);
        let controller = controller_on(&fake, &cronjobs, "2016-05-19T10:00:00Z");
        let queue = controller.queue.clone();
        let mut status = CronJob::default();
        status.metadata.name = Some("gone".into());
        status.metadata.namespace = Some("ns".into());
        status.metadata.resource_version = Some("5".into());
        controller.deferred.push(
            "ns/gone".into(),
            status,
            Some("5".into()),
            tokio::time::Instant::now(),
        );
        // The writer sends it (a stopped writer flushes what is queued) and it succeeds.
        let stop = tokio_util::sync::CancellationToken::new();
        stop.cancel();
        let api = Arc::new(reconcile::KubeApi::new(fake.client()));
        controller
            .deferred
            .clone()
            .run_writer(api, queue, stop)
            .await;
        assert_eq!(fake.requests_to("PUT", "**/status").len(), 1);
        assert_eq!(controller.deferred.len(), 1, "written, not yet seen");
        // The CronJob is deleted before the cache shows the write.
        controller.sync("ns/gone".into()).await.expect("sync");
        assert_eq!(controller.deferred.len(), 0);
    }

    /// Many CronJobs due at once: every Job is created before the first status write, and
    /// every CronJob gets its status written once (upstream interleaves them, so its later
    /// Jobs wait for the earlier CronJobs' status writes).
    #[tokio::test(start_paused = true)]
    async fn jobs_are_created_before_status_writes() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use kube::runtime::watcher;
        use rkcm_runtime::cache::Informer;
        use rkcm_testkit::fake_api::FakeApi;

        const N: usize = 12;
        let fake = FakeApi::new();
        fake.echo_writes()
            .delay("POST", "**", Duration::from_millis(20))
            .delay("PUT", "**", Duration::from_millis(20));
        let cronjobs = Informer::<CronJob>::detached();
        cronjobs.feed(watcher::Event::Init);
        for i in 0..N {
            let mut cj = CronJob::default();
            cj.metadata.name = Some(format!("cj-{i}"));
            cj.metadata.namespace = Some("ns".into());
            cj.metadata.uid = Some(format!("uid-{i}"));
            cj.metadata.resource_version = Some("1".into());
            cj.metadata.creation_timestamp =
                Some(Time("2016-05-19T09:00:00Z".parse().expect("ts")));
            cj.spec.schedule = "*/1 * * * *".into();
            cj.spec.job_template.spec = Some(Default::default());
            cronjobs.feed(watcher::Event::InitApply(cj));
        }
        cronjobs.feed(watcher::Event::InitDone);
        let controller = Arc::new(controller_on(&fake, &cronjobs, "2016-05-19T10:00:00.5Z"));
        let queue = controller.queue.clone();
        let stop = tokio_util::sync::CancellationToken::new();
        let api = Arc::new(reconcile::KubeApi::new(fake.client()));
        for _ in 0..2 {
            tokio::spawn(controller.deferred.clone().run_writer(
                api.clone(),
                queue.clone(),
                stop.clone(),
            ));
        }
        for i in 0..N {
            queue.add(format!("ns/cj-{i}"));
        }
        let c = controller.clone();
        let workers = tokio::spawn(rkcm_runtime::queue::run_workers(
            queue.clone(),
            2,
            move |key: String| {
                let c = c.clone();
                async move { c.sync(key).await }
            },
        ));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while fake.requests_to("PUT", "**/status").len() < N {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{:?}",
                fake.writes()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let writes: Vec<String> = fake
            .writes()
            .into_iter()
            .filter(|(m, _)| m == "POST" || m == "PUT")
            .map(|(m, p)| format!("{m} {p}"))
            .collect();
        let creates = writes.iter().filter(|w| w.starts_with("POST ")).count();
        let first_status = writes
            .iter()
            .position(|w| w.starts_with("PUT "))
            .expect("status writes");
        assert_eq!(creates, N, "one Job per CronJob: {writes:?}");
        assert_eq!(first_status, N, "all creates first: {writes:?}");
        assert_eq!(writes.len(), 2 * N, "one status write each: {writes:?}");
        stop.cancel();
        queue.shut_down();
        workers.await.expect("workers end");
    }

    mod handlers {
        use std::time::Duration;

        use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
        use kube::runtime::watcher;
        use rkcm_runtime::cache::Informer;
        use rkcm_runtime::clock::FakeClock;
        use rkcm_runtime::events::FakeEvents;

        use super::*;

        fn cronjob(schedule: &str) -> CronJob {
            let mut cj = CronJob::default();
            cj.metadata.name = Some("cj".into());
            cj.metadata.namespace = Some("ns".into());
            cj.metadata.uid = Some("cj-uid".into());
            cj.metadata.resource_version = Some("1".into());
            cj.metadata.creation_timestamp =
                Some(Time("2016-05-19T09:00:00Z".parse().expect("ts")));
            cj.spec.schedule = schedule.into();
            cj
        }

        fn controller(cj: &CronJob) -> (Controller, FakeEvents) {
            let cronjobs = Informer::<CronJob>::detached();
            cronjobs.feed(watcher::Event::Init);
            cronjobs.feed(watcher::Event::InitApply(cj.clone()));
            cronjobs.feed(watcher::Event::InitDone);
            let config = kube::Config::new("http://127.0.0.1:9".parse().expect("url"));
            let client = kube::Client::try_from(config).expect("client");
            let (recorder, events) = EventRecorder::fake(consts::EVENT_COMPONENT);
            let clock = FakeClock::new("2016-05-19T09:59:00Z".parse().expect("ts"));
            let c = Controller {
                cronjobs: cronjobs.store(),
                jobs: Informer::<Job>::detached().store(),
                queue: WorkQueue::new("cronjob-test", RateLimiter::Default),
                syncer: reconcile::Syncer {
                    api: reconcile::KubeApi::new(client),
                    recorder,
                    local: TimeZone::UTC,
                },
                clock: Arc::new(clock),
                deferred: Arc::new(deferred::Deferred::default()),
                defer: true,
            };
            (c, events)
        }

        fn job(kind: &str, uid: &str, rv: &str) -> Arc<Job> {
            let mut j = Job::default();
            j.metadata.name = Some("cj-1".into());
            j.metadata.namespace = Some("ns".into());
            j.metadata.resource_version = Some(rv.into());
            j.metadata.owner_references = Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: kind.into(),
                name: "cj".into(),
                uid: uid.into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]);
            Arc::new(j)
        }

        #[tokio::test]
        async fn job_changes_wake_the_resolved_owner_only() {
            let (c, _) = controller(&cronjob("* * * * *"));
            c.on_job(Change::Added(job("CronJob", "other-uid", "1")));
            c.on_job(Change::Added(job("ConfigMap", "cj-uid", "1")));
            assert_eq!(c.queue.len(), 0, "not ours");
            c.on_job(Change::Updated {
                old: job("CronJob", "cj-uid", "1"),
                new: job("CronJob", "cj-uid", "1"),
            });
            assert_eq!(c.queue.len(), 0, "same resourceVersion: a resync");
            c.on_job(Change::Deleted {
                obj: job("CronJob", "cj-uid", "2"),
                final_state_unknown: true,
            });
            assert_eq!(c.queue.len(), 1);
            assert_eq!(c.queue.get().await.as_deref(), Some("ns/cj"));
        }

        #[tokio::test(start_paused = true)]
        async fn schedule_change_requeues_for_the_new_next_instant() {
            let old = Arc::new(cronjob("@yearly"));
            let (c, events) = controller(&old);
            // Another field: now.
            let mut other = (*old).clone();
            other.metadata.resource_version = Some("2".into());
            other.spec.suspend = Some(true);
            c.on_cronjob(Change::Updated {
                old: old.clone(),
                new: Arc::new(other),
            });
            assert_eq!(c.queue.len(), 1);
            let k = c.queue.get().await.expect("key");
            c.queue.done(&k);
            // The schedule: at the next minute (60 s + 100 ms after 09:59:00), not now.
            let mut every_minute = (*old).clone();
            every_minute.spec.schedule = "* * * * *".into();
            c.on_cronjob(Change::Updated {
                old: old.clone(),
                new: Arc::new(every_minute),
            });
            assert_eq!(c.queue.len(), 0);
            tokio::time::advance(Duration::from_millis(59_000)).await;
            tokio::task::yield_now().await;
            assert_eq!(c.queue.len(), 0);
            tokio::time::advance(Duration::from_millis(1_200)).await;
            tokio::task::yield_now().await;
            assert_eq!(c.queue.len(), 1);
            // Unparseable: a warning, no enqueue.
            let mut bad = (*old).clone();
            bad.spec.schedule = "bad schedule".into();
            c.on_cronjob(Change::Updated {
                old,
                new: Arc::new(bad),
            });
            let ev = events.all();
            assert_eq!(ev.len(), 1);
            assert_eq!(ev[0].reason, "UnParseableCronJobSchedule");
            assert_eq!(
                ev[0].message,
                "unparseable schedule for cronjob: bad schedule"
            );
        }
    }
}
