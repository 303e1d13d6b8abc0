//! Informer changes -> queue keys (upstream `addJob`, `updateJob`, `deleteJob` and the
//! CronJob handlers of `cronjob_controllerv2.go`).

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use rkcm_runtime::cache::Change;
use rkcm_runtime::events::EventType;
use rkcm_runtime::keys::key_of;
use rkcm_runtime::workload::controller_ref::{controller_of, resolve_controller_ref};

use crate::controller::Controller;
use crate::{consts, plan, schedule};

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
    pub(crate) fn on_job(&self, change: Change<Job>) {
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
    pub(crate) fn on_cronjob(&self, change: Change<CronJob>) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use jiff::tz::TimeZone;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use kube::runtime::watcher;
    use rkcm_runtime::cache::Informer;
    use rkcm_runtime::clock::FakeClock;
    use rkcm_runtime::events::{EventRecorder, FakeEvents};
    use rkcm_runtime::queue::{RateLimiter, WorkQueue};
    use std::sync::Arc;

    use super::*;
    use crate::{deferred, reconcile};

    fn cronjob(schedule: &str) -> CronJob {
        let mut cj = CronJob::default();
        cj.metadata.name = Some("cj".into());
        cj.metadata.namespace = Some("ns".into());
        cj.metadata.uid = Some("cj-uid".into());
        cj.metadata.resource_version = Some("1".into());
        cj.metadata.creation_timestamp = Some(Time("2016-05-19T09:00:00Z".parse().expect("ts")));
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
                adopt_forgotten_runs: true,
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
        // The schedule: at the next minute (60 s + the pad after 09:59:00), not now.
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
