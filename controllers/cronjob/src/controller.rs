//! The running controller: caches, queue, the deferred status writes and the entry of one
//! sync (cache reads, then [`Syncer`](crate::reconcile::Syncer)).

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use rkcm_runtime::cache::{INDEX_CONTROLLER_UID, Store};
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::queue::WorkQueue;

use crate::error::Error;
use crate::{deferred, plan, reconcile};

/// The running controller: caches, queue and the sync.
pub(crate) struct Controller {
    pub(crate) cronjobs: Store<CronJob>,
    pub(crate) jobs: Store<Job>,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) syncer: reconcile::Syncer<reconcile::KubeApi>,
    pub(crate) clock: SharedClock,
    /// Status writes waiting for the Job creates of other syncs ([`crate::deferred`]).
    pub(crate) deferred: Arc<deferred::Deferred>,
    /// [`crate::Config::defer_status_writes`]; off, each sync writes its status itself.
    pub(crate) defer: bool,
}

impl Reconcile for Controller {
    type Error = Error;

    async fn sync(&self, key: String) -> Result<(), Error> {
        let _running = self.deferred.enter();
        let Some(cj) = self.cronjobs.get(&key) else {
            rkcm_runtime::explain::decisions::note_gone();
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
        if rkcm_runtime::explain::decisions::recording() {
            let e = crate::explain::explain(&cj, &children, &self.syncer.local, now);
            rkcm_runtime::explain::decisions::note_waits(&e.waiting_on);
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::tz::TimeZone;
    use rkcm_runtime::events::EventRecorder;
    use rkcm_runtime::queue::RateLimiter;

    use super::*;
    use crate::consts;

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
                adopt_forgotten_runs: true,
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
}
