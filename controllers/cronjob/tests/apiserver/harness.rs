//! What only the CronJob suite needs on top of the testkit's harness: the controller
//! in-process on a test clock, a CronJob builder, Jobs of its own, and CronJob status
//! accessors.

#![allow(dead_code)]

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use jiff::{SignedDuration, Timestamp};
pub use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
pub use rkcm_testkit::harness::{Env as Base, *};
use rkcm_testkit::wait_for;
use serde_json::{Value, json};

/// How long "stays so" / "never happens" is watched.
pub const HOLDS: Duration = Duration::from_secs(4);
pub const COMPONENT: &str = "cronjob-controller";
pub const SCHEDULED_ANNOTATION: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// The testkit's [`Base`] environment with the clock the controller reads.
pub struct Env<'a> {
    base: &'a Base,
    pub clock: Arc<OffsetClock>,
}

impl Deref for Env<'_> {
    type Target = Base;
    fn deref(&self) -> &Base {
        self.base
    }
}

/// The start of the minute `t` is in.
pub fn minute_of(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second().div_euclid(60) * 60).expect("minute")
}

pub fn secs(n: i64) -> SignedDuration {
    SignedDuration::from_secs(n)
}

impl<'a> Env<'a> {
    /// `base` with a clock reading real time until the test sets it.
    pub fn new(base: &'a Base) -> Self {
        Self {
            base,
            clock: Arc::new(OffsetClock::new()),
        }
    }

    /// The controller with upstream defaults (local zone UTC) on the test clock, on this
    /// namespace only.
    pub fn start(&self) -> Controllers {
        let cfg = rkcm_cronjob::Config {
            local_time_zone: jiff::tz::TimeZone::UTC,
            ..rkcm_cronjob::Config::default()
        };
        self.controllers()
            .with_clock(self.clock.clone())
            .spawn("cronjob", move |ctx| rkcm_cronjob::start(ctx, cfg.clone()))
            .run()
    }

    /// A CronJob with a Job template carrying a label and an annotation.
    pub fn cronjob(&self, name: &str, schedule: &str, extra_spec: Value) -> CronJob {
        let mut spec = json!({
            "schedule": schedule,
            "jobTemplate": {
                "metadata": {"labels": {"app": "cj-test"}, "annotations": {"note": "copied"}},
                "spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": PAUSE}]
                }}}
            }
        });
        if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
            for (k, v) in extra {
                s.insert(k.clone(), v.clone());
            }
        }
        serde_json::from_value(json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": self.name()},
            "spec": spec
        }))
        .expect("cronjob")
    }

    /// Creates `cj` suspended, writes `lastScheduleTime = last`, then applies `suspend` (which
    /// also wakes the controller).
    pub async fn create_with_last(
        &self,
        cj: &CronJob,
        last: Timestamp,
        suspend: bool,
    ) -> Result<CronJob> {
        let mut cj = cj.clone();
        cj.spec.suspend = Some(true);
        let name = name_of(&self.create_object(&cj).await?);
        self.patch_status(&name, json!({"lastScheduleTime": last.to_string()}))
            .await?;
        self.patch_spec(&name, json!({"suspend": suspend})).await
    }

    pub async fn patch_spec(&self, name: &str, spec: Value) -> Result<CronJob> {
        self.merge(name, json!({"spec": spec})).await
    }

    pub async fn patch_status(&self, name: &str, status: Value) -> Result<CronJob> {
        self.status_patch(name, status).await
    }

    /// Touches an annotation: an update that is not a schedule change makes the controller
    /// sync the CronJob now.
    pub async fn poke(&self, name: &str) -> Result<()> {
        let v = Timestamp::now().as_nanosecond().to_string();
        self.merge::<CronJob>(
            name,
            json!({"metadata": {"annotations": {"rkcm.test/poke": v}}}),
        )
        .await
        .map(drop)
    }

    /// Names of the Jobs not being deleted, sorted.
    pub async fn job_names(&self) -> Result<Vec<String>> {
        let jobs = self.list::<Job>().await?;
        let live: Vec<Job> = jobs
            .into_iter()
            .filter(|j| j.metadata.deletion_timestamp.is_none())
            .collect();
        Ok(sorted_names(&live))
    }

    /// Waits until a Job named `name` exists.
    pub async fn wait_job(&self, name: &str, timeout: Duration) -> Result<Job> {
        wait_for(&format!("job {name}"), timeout, || async {
            self.get_opt::<Job>(name).await
        })
        .await
    }

    /// A Job the test creates itself, controlled by `owner` (kind, name, uid), unfinished.
    pub async fn create_child(
        &self,
        name: &str,
        kind: &str,
        owner: &str,
        uid: &str,
    ) -> Result<Job> {
        self.create(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "ownerReferences": [{
                "apiVersion": if kind == "CronJob" { "batch/v1" } else { "v1" },
                "kind": kind, "name": owner, "uid": uid, "controller": true
            }]},
            "spec": {"template": {"spec": {
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": PAUSE}]
            }}}
        }))
        .await
    }

    /// The controller's events about CronJob `name` with `reason`, as (message, count).
    pub async fn events_with(&self, name: &str, reason: &str) -> Result<Vec<(String, i32)>> {
        Ok(self
            .events_by_reason("CronJob", name, COMPONENT, reason)
            .await?
            .into_iter()
            .map(|e| (e.message.unwrap_or_default(), e.count.unwrap_or(1)))
            .collect())
    }

    /// Waits until an event with `reason` whose message contains `needle` exists.
    pub async fn wait_event(&self, name: &str, reason: &str, needle: &str) -> Result<String> {
        wait_for(
            &format!("{reason} event containing {needle:?}"),
            WITHIN,
            || async {
                Ok(self
                    .events_with(name, reason)
                    .await?
                    .into_iter()
                    .map(|(m, _)| m)
                    .find(|m| m.contains(needle)))
            },
        )
        .await
    }
}

pub fn status_of(cj: &CronJob) -> CronJobStatus {
    cj.status.clone().unwrap_or_default()
}

pub fn active_names(cj: &CronJob) -> Vec<String> {
    let mut v: Vec<String> = status_of(cj)
        .active
        .unwrap_or_default()
        .into_iter()
        .filter_map(|r| r.name)
        .collect();
    v.sort();
    v
}

pub fn last_schedule(cj: &CronJob) -> Option<Timestamp> {
    status_of(cj).last_schedule_time.map(|t| t.0)
}

/// `<cronjob>-<minutes>` for the instant `t`.
pub fn job_name(cj: &str, t: Timestamp) -> String {
    format!("{cj}-{}", t.as_second() / 60)
}
