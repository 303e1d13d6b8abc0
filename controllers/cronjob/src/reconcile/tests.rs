//! Sync scenarios against a fake API, after upstream `TestControllerV2SyncCronJob` (and the
//! `AlreadyExists`, missing and unexpected Job cases of `cronjob_controllerv2_test.go`).

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::batch::v1::JobStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rkcm_runtime::events::{EventType, FakeEvents};

use super::*;
use crate::plan::tests::{cronjob, job, top_of_the_hour, ts};

fn api_error(code: u16, reason: &str, message: &str) -> kube::Error {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
        "status": "Failure", "code": code, "reason": reason, "message": message,
    }))
    .expect("status");
    kube::Error::Api(Box::new(status))
}

fn terminating_error() -> kube::Error {
    let status: kube::core::Status = serde_json::from_value(serde_json::json!({
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "jobs is forbidden: unable to create new content in namespace snazzycats because it is being terminated",
        "details": {"causes": [{"reason": "NamespaceTerminating", "message": "namespace snazzycats is being terminated", "field": "metadata.namespace"}]},
    }))
    .expect("status");
    kube::Error::Api(Box::new(status))
}

#[derive(Default)]
struct Fake {
    /// What a live GET of the CronJob answers.
    cronjob: Mutex<Option<CronJob>>,
    /// The server's Jobs by name.
    jobs: Mutex<BTreeMap<String, Job>>,
    create_error: Mutex<Option<kube::Error>>,
    delete_error: Mutex<bool>,
    created: Mutex<Vec<Job>>,
    deleted: Mutex<Vec<(String, Option<String>)>>,
    updates: Mutex<Vec<CronJob>>,
}

impl CronJobApi for Arc<Fake> {
    async fn get_cronjob(&self, _ns: &str, name: &str) -> Result<CronJob, kube::Error> {
        self.cronjob.lock().expect("lock").clone().ok_or_else(|| {
            api_error(
                404,
                "NotFound",
                &format!("cronjobs.batch \"{name}\" not found"),
            )
        })
    }
    async fn get_job(&self, _ns: &str, name: &str) -> Result<Job, kube::Error> {
        self.jobs
            .lock()
            .expect("lock")
            .get(name)
            .cloned()
            .ok_or_else(|| api_error(404, "NotFound", &format!("jobs.batch \"{name}\" not found")))
    }
    async fn create_job(&self, _ns: &str, job: &Job) -> Result<Job, kube::Error> {
        if let Some(e) = self.create_error.lock().expect("lock").take() {
            return Err(e);
        }
        let name = job.metadata.name.clone().unwrap_or_default();
        let mut jobs = self.jobs.lock().expect("lock");
        if jobs.contains_key(&name) {
            return Err(api_error(
                409,
                "AlreadyExists",
                &format!("jobs.batch \"{name}\" already exists"),
            ));
        }
        let mut created = job.clone();
        created.metadata.uid = Some(format!("uid-{name}"));
        created.metadata.resource_version = Some("7".into());
        created.metadata.creation_timestamp = Some(Time(ts("2016-05-19T10:01:02Z")));
        jobs.insert(name, created.clone());
        self.created.lock().expect("lock").push(created.clone());
        Ok(created)
    }
    async fn delete_job(
        &self,
        _ns: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<(), kube::Error> {
        if *self.delete_error.lock().expect("lock") {
            return Err(api_error(500, "InternalError", "boom"));
        }
        self.jobs.lock().expect("lock").remove(name);
        self.deleted
            .lock()
            .expect("lock")
            .push((name.to_string(), uid.map(str::to_string)));
        Ok(())
    }
    async fn update_status(&self, cj: &CronJob) -> Result<CronJob, kube::Error> {
        self.updates.lock().expect("lock").push(cj.clone());
        Ok(cj.clone())
    }
}

fn syncer() -> (Syncer<Arc<Fake>>, Arc<Fake>, FakeEvents) {
    let fake = Arc::new(Fake::default());
    let (recorder, events) = EventRecorder::fake(crate::consts::EVENT_COMPONENT);
    (
        Syncer {
            api: fake.clone(),
            recorder,
            local: TimeZone::UTC,
            adopt_forgotten_runs: true,
        },
        fake,
        events,
    )
}

fn just_before_the_hour() -> Timestamp {
    ts("2016-05-19T09:59:00Z")
}
fn just_after_the_hour() -> Timestamp {
    ts("2016-05-19T10:01:00Z")
}
fn just_after_the_prior_hour() -> Timestamp {
    ts("2016-05-19T09:01:00Z")
}

/// Upstream's `cronJob()` with an hourly schedule, and (when it "ran previously") the Job of
/// the prior hour, finished or still active.
fn setup(policy: &str, ran_previously: bool, still_active: bool) -> (CronJob, Vec<Arc<Job>>) {
    let mut cj = cronjob("0 * * * ?");
    cj.spec.concurrency_policy = Some(policy.into());
    if !ran_previously {
        cj.metadata.creation_timestamp = Some(Time(just_before_the_hour()));
        return (cj, Vec::new());
    }
    cj.metadata.creation_timestamp = Some(Time(ts("2016-05-19T08:59:00Z")));
    let mut j = plan::job_from_template(&cj, just_after_the_prior_hour(), &TimeZone::UTC)
        .expect("template");
    j.metadata.uid = Some("1234".into());
    if still_active {
        crate::status::record_start(&mut cj, &j, just_after_the_prior_hour());
    } else {
        cj.status
            .get_or_insert_with(Default::default)
            .last_schedule_time = Some(Time(just_after_the_prior_hour()));
        j.status = Some(JobStatus {
            completion_time: Some(Time(ts("2016-05-19T09:01:10Z"))),
            conditions: Some(vec![k8s_openapi::api::batch::v1::JobCondition {
                type_: "Complete".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
    }
    (cj, vec![Arc::new(j)])
}

fn reasons(events: &FakeEvents) -> Vec<String> {
    events.all().into_iter().map(|e| e.reason).collect()
}

fn active_len(cj: &CronJob) -> usize {
    cj.status
        .as_ref()
        .and_then(|s| s.active.as_ref())
        .map_or(0, Vec::len)
}

const DELTA: SignedDuration = crate::consts::NEXT_SCHEDULE_DELTA;

#[tokio::test]
async fn never_ran_not_time() {
    for policy in ["Allow", "Forbid", "Replace"] {
        let (s, fake, events) = syncer();
        let (cj, jobs) = setup(policy, false, false);
        let r = s
            .sync(&cj, &jobs, just_before_the_hour())
            .await
            .expect("sync");
        assert_eq!(r, Some(SignedDuration::from_secs(60) + DELTA), "{policy}");
        assert!(fake.created.lock().expect("l").is_empty());
        assert!(fake.updates.lock().expect("l").is_empty());
        assert!(reasons(&events).is_empty());
    }
}

#[tokio::test]
async fn never_ran_is_time() {
    for policy in ["Allow", "Forbid", "Replace"] {
        let (s, fake, events) = syncer();
        let (cj, jobs) = setup(policy, false, false);
        let r = s
            .sync(&cj, &jobs, just_after_the_hour())
            .await
            .expect("sync");
        assert_eq!(
            r,
            Some(SignedDuration::from_secs(3600 - 60) + DELTA),
            "{policy}"
        );
        let created = fake.created.lock().expect("l").clone();
        assert_eq!(created.len(), 1);
        assert_eq!(
            created[0].metadata.name.as_deref(),
            Some("mycronjob-24394200")
        );
        let updates = fake.updates.lock().expect("l").clone();
        assert_eq!(updates.len(), 1);
        assert_eq!(active_len(&updates[0]), 1);
        let st = updates[0].status.clone().expect("status");
        assert_eq!(st.last_schedule_time, Some(Time(top_of_the_hour())));
        let a = &st.active.expect("active")[0];
        assert_eq!(a.kind.as_deref(), Some("Job"));
        assert_eq!(a.api_version.as_deref(), Some("batch/v1"));
        assert_eq!(a.uid.as_deref(), Some("uid-mycronjob-24394200"));
        let ev = events.all();
        assert_eq!(reasons(&events), ["SuccessfulCreate"]);
        assert_eq!(ev[0].message, "Created job mycronjob-24394200");
        assert_eq!(ev[0].type_, EventType::Normal);
        assert_eq!(ev[0].object.kind.as_deref(), Some("CronJob"));
    }
}

#[tokio::test]
async fn never_ran_in_zone() {
    let (s, fake, _events) = syncer();
    let (mut cj, jobs) = setup("Allow", false, false);
    cj.spec.time_zone = Some("America/New_York".into());
    // NY is a whole number of hours off UTC: the hourly schedule fires at 10:00 UTC too.
    let r = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(r, Some(SignedDuration::from_secs(3600 - 60) + DELTA));
    let created = fake.created.lock().expect("l").clone();
    let ann = created[0].metadata.annotations.clone().expect("a");
    assert_eq!(
        ann.get(crate::consts::SCHEDULED_TIMESTAMP_ANNOTATION)
            .map(String::as_str),
        Some("2016-05-19T06:00:00-04:00")
    );
}

#[tokio::test]
async fn suspended_and_invalid_do_nothing_and_do_not_requeue() {
    let (s, fake, events) = syncer();
    let (mut cj, jobs) = setup("Allow", false, false);
    cj.spec.suspend = Some(true);
    assert_eq!(
        s.sync(&cj, &jobs, just_after_the_hour())
            .await
            .expect("sync"),
        None
    );
    cj.spec.suspend = None;
    cj.spec.time_zone = Some("bad timezone".into());
    assert_eq!(
        s.sync(&cj, &jobs, just_after_the_hour())
            .await
            .expect("sync"),
        None
    );
    cj.spec.time_zone = None;
    cj.spec.schedule = "obvious error schedule".into();
    assert_eq!(
        s.sync(&cj, &jobs, just_after_the_hour())
            .await
            .expect("sync"),
        None
    );
    assert!(fake.created.lock().expect("l").is_empty());
    assert!(fake.updates.lock().expect("l").is_empty());
    assert_eq!(reasons(&events), ["UnknownTimeZone", "UnparseableSchedule"]);
}

#[tokio::test]
async fn prev_ran_but_done_is_time() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Allow", true, false);
    let r = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(r, Some(SignedDuration::from_secs(3600 - 60) + DELTA));
    assert_eq!(fake.created.lock().expect("l").len(), 1);
    let updates = fake.updates.lock().expect("l").clone();
    let st = updates[0].status.clone().expect("status");
    assert_eq!(
        st.last_successful_time,
        Some(Time(ts("2016-05-19T09:01:10Z")))
    );
    assert_eq!(active_len(&updates[0]), 1);
    assert_eq!(reasons(&events), ["SuccessfulCreate"]);
}

#[tokio::test]
async fn prev_ran_but_done_not_time_records_success() {
    let (s, fake, _) = syncer();
    let (cj, jobs) = setup("Forbid", true, false);
    let r = s
        .sync(&cj, &jobs, just_before_the_hour())
        .await
        .expect("sync");
    assert_eq!(r, Some(SignedDuration::from_secs(60) + DELTA));
    assert!(fake.created.lock().expect("l").is_empty());
    assert_eq!(
        fake.updates.lock().expect("l").len(),
        1,
        "lastSuccessfulTime written"
    );
}

#[tokio::test]
async fn still_active_is_time() {
    // Forbid: JobAlreadyActive, nothing created, no write.
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Forbid", true, true);
    let r = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(r, Some(SignedDuration::from_secs(3600 - 60) + DELTA));
    assert!(fake.created.lock().expect("l").is_empty());
    assert!(fake.updates.lock().expect("l").is_empty());
    assert_eq!(reasons(&events), ["JobAlreadyActive"]);

    // Replace: the active Job is deleted (UID-guarded), a new one created.
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Replace", true, true);
    fake.jobs.lock().expect("l").insert(
        jobs[0].metadata.name.clone().expect("n"),
        (*jobs[0]).clone(),
    );
    s.sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(
        fake.deleted.lock().expect("l").clone(),
        [("mycronjob-24394141".to_string(), Some("1234".to_string()))]
    );
    assert_eq!(fake.created.lock().expect("l").len(), 1);
    let updates = fake.updates.lock().expect("l").clone();
    assert_eq!(active_len(&updates[0]), 1);
    assert_eq!(
        updates[0]
            .status
            .as_ref()
            .and_then(|s| s.active.as_ref())
            .expect("a")[0]
            .name
            .as_deref(),
        Some("mycronjob-24394200")
    );
    assert_eq!(reasons(&events), ["SuccessfulDelete", "SuccessfulCreate"]);

    // Allow: both active.
    let (s, fake, _) = syncer();
    let (cj, jobs) = setup("Allow", true, true);
    s.sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(active_len(&fake.updates.lock().expect("l")[0]), 2);
}

#[tokio::test]
async fn replace_get_failure_is_an_error() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Replace", true, true);
    let err = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect_err("no job to get");
    assert!(matches!(err, Error::GetJob { .. }), "{err}");
    assert!(fake.created.lock().expect("l").is_empty());
    assert_eq!(reasons(&events), ["FailedGet"]);
}

#[tokio::test]
async fn already_exists_and_ours_is_adopted_into_active() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Allow", false, false);
    let mut existing =
        plan::job_from_template(&cj, top_of_the_hour(), &TimeZone::UTC).expect("template");
    existing.metadata.uid = Some("existing-uid".into());
    fake.jobs
        .lock()
        .expect("l")
        .insert("mycronjob-24394200".into(), existing);
    let r = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert!(r.is_some());
    assert!(fake.created.lock().expect("l").is_empty());
    let updates = fake.updates.lock().expect("l").clone();
    let a = updates[0].status.clone().expect("s").active.expect("a");
    assert_eq!(a.len(), 1);
    assert_eq!(a[0].uid.as_deref(), Some("existing-uid"));
    assert!(
        reasons(&events).is_empty(),
        "no SuccessfulCreate for an existing Job"
    );
}

#[tokio::test]
async fn already_exists_not_ours_is_left_alone() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Allow", false, false);
    let mut foreign =
        plan::job_from_template(&cj, top_of_the_hour(), &TimeZone::UTC).expect("template");
    foreign.metadata.owner_references = None;
    fake.jobs
        .lock()
        .expect("l")
        .insert("mycronjob-24394200".into(), foreign);
    let r = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect("sync");
    assert_eq!(r, None, "no requeue");
    assert!(fake.updates.lock().expect("l").is_empty());
    assert!(reasons(&events).is_empty(), "no FailedCreate");
}

#[tokio::test]
async fn create_failures() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Allow", false, false);
    *fake.create_error.lock().expect("l") = Some(api_error(500, "InternalError", "etcd down"));
    let err = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect_err("error");
    assert!(matches!(err, Error::CreateJob { .. }));
    assert_eq!(reasons(&events), ["FailedCreate"]);
    assert_eq!(events.all()[0].message, "Error creating job: etcd down");

    let (s, fake, events) = syncer();
    *fake.create_error.lock().expect("l") = Some(terminating_error());
    let err = s
        .sync(&cj, &jobs, just_after_the_hour())
        .await
        .expect_err("error");
    assert!(err.is_namespace_terminating());
    assert!(reasons(&events).is_empty());
    assert!(fake.updates.lock().expect("l").is_empty());
}

#[tokio::test]
async fn missing_active_job_is_dropped() {
    let (s, fake, events) = syncer();
    let (cj, _) = setup("Forbid", true, true);
    // The cache has no Job and the server answers 404.
    let r = s
        .sync(&cj, &[], just_before_the_hour())
        .await
        .expect("sync");
    assert!(r.is_some());
    assert_eq!(reasons(&events), ["MissingJob"]);
    assert_eq!(
        events.all()[0].message,
        "Active job went missing: mycronjob-24394141"
    );
    assert_eq!(active_len(&fake.updates.lock().expect("l")[0]), 0);
}

#[tokio::test]
async fn active_job_missing_from_cache_but_on_server_is_kept() {
    let (s, fake, events) = syncer();
    let (cj, jobs) = setup("Forbid", true, true);
    fake.jobs.lock().expect("l").insert(
        jobs[0].metadata.name.clone().expect("n"),
        (*jobs[0]).clone(),
    );
    s.sync(&cj, &[], just_before_the_hour())
        .await
        .expect("sync");
    assert!(reasons(&events).is_empty());
    assert!(fake.updates.lock().expect("l").is_empty());
}

#[tokio::test]
async fn unexpected_child_is_reported_not_adopted() {
    let (s, fake, events) = syncer();
    let (cj, _) = setup("Allow", false, false);
    *fake.cronjob.lock().expect("l") = Some(cj.clone());
    let stray = Arc::new(job("stray", None, None));
    s.sync(&cj, std::slice::from_ref(&stray), just_before_the_hour())
        .await
        .expect("sync");
    assert_eq!(reasons(&events), ["UnexpectedJob"]);
    assert_eq!(
        events.all()[0].message,
        "Saw a job that the controller did not create or forgot: stray"
    );
    assert!(fake.updates.lock().expect("l").is_empty());

    // The cache was stale: the fresh CronJob lists it, no warning.
    let (s, fake, events) = syncer();
    let mut fresh = cj.clone();
    crate::status::record_start(&mut fresh, &stray, top_of_the_hour());
    *fake.cronjob.lock().expect("l") = Some(fresh);
    s.sync(&cj, &[stray], just_before_the_hour())
        .await
        .expect("sync");
    assert!(reasons(&events).is_empty());
}

/// A running Job the status forgot is adopted only when it is this controller's run for the
/// annotated time (named `<cronjob>-<Unix minutes>`) and the switch is on: the slot then
/// counts as run. A Job made by hand that carries the annotation only gets the Warning, and
/// so does ours with the switch off (upstream): the slot is still owed and the controller
/// goes on to create its Job for it.
#[tokio::test]
async fn only_the_controllers_own_forgotten_run_is_adopted() {
    let (cj, _) = setup("Allow", false, false);
    let annotated = |name: &str| {
        let mut j = job(name, None, None);
        j.metadata.annotations = Some(
            [(
                crate::consts::SCHEDULED_TIMESTAMP_ANNOTATION.to_string(),
                "2016-05-19T10:00:00Z".to_string(),
            )]
            .into(),
        );
        Arc::new(j)
    };
    let slot_name = plan::job_name(&cj, top_of_the_hour());
    let ours = annotated(&slot_name);
    let by_hand = annotated("manual-run");
    for (case, adopt, child, adopted) in [
        ("ours", true, &ours, true),
        ("made by hand", true, &by_hand, false),
        ("ours, switched off", false, &ours, false),
    ] {
        let (mut s, fake, events) = syncer();
        s.adopt_forgotten_runs = adopt;
        *fake.cronjob.lock().expect("l") = Some(cj.clone());
        s.sync(&cj, std::slice::from_ref(child), just_after_the_hour())
            .await
            .expect("sync");
        assert_eq!(
            reasons(&events).first().map(String::as_str),
            Some("UnexpectedJob"),
            "{case}"
        );
        let created: Vec<_> = fake.created.lock().expect("l").clone();
        let status = fake.updates.lock().expect("l").last().cloned();
        if adopted {
            assert!(created.is_empty(), "{case}: the slot counts as run");
            let status = status.expect("status written");
            assert!(
                plan::in_active_list(&status, child.metadata.uid.as_deref().unwrap_or("")),
                "{case}"
            );
            assert_eq!(
                status.status.and_then(|s| s.last_schedule_time),
                Some(Time(top_of_the_hour())),
                "{case}"
            );
        } else {
            assert_eq!(
                created
                    .iter()
                    .filter_map(|j| j.metadata.name.clone())
                    .collect::<Vec<_>>(),
                std::slice::from_ref(&slot_name),
                "{case}: the slot is still owed"
            );
        }
    }
}

#[tokio::test]
async fn completed_and_failed_children_leave_active() {
    let (s, fake, events) = syncer();
    let (mut cj, _) = setup("Allow", false, false);
    cj.spec.successful_jobs_history_limit = Some(3);
    cj.spec.failed_jobs_history_limit = Some(1);
    let mut ok = job("ok", Some(ts("2016-05-19T09:00:00Z")), Some("Complete"));
    ok.status.as_mut().expect("s").completion_time = Some(Time(ts("2016-05-19T09:00:30Z")));
    let failed = job("bad", Some(ts("2016-05-19T09:10:00Z")), Some("Failed"));
    crate::status::record_start(&mut cj, &ok, ts("2016-05-19T09:00:00Z"));
    crate::status::record_start(&mut cj, &failed, ts("2016-05-19T09:10:00Z"));
    let jobs = vec![Arc::new(ok), Arc::new(failed)];
    s.sync(&cj, &jobs, just_before_the_hour())
        .await
        .expect("sync");
    let msgs: Vec<String> = events.all().into_iter().map(|e| e.message).collect();
    assert_eq!(
        msgs,
        [
            "Saw completed job: ok, condition: Complete",
            "Saw completed job: bad, condition: Failed"
        ]
    );
    let st = fake.updates.lock().expect("l")[0]
        .status
        .clone()
        .expect("s");
    assert_eq!(st.active.map(|a| a.len()), Some(0));
    assert_eq!(
        st.last_successful_time,
        Some(Time(ts("2016-05-19T09:00:30Z")))
    );
}

#[tokio::test]
async fn history_cleanup_deletes_and_reports_failures() {
    let (s, fake, events) = syncer();
    let (mut cj, _) = setup("Allow", false, false);
    cj.spec.successful_jobs_history_limit = Some(1);
    cj.spec.failed_jobs_history_limit = Some(0);
    let jobs: Vec<Arc<Job>> = vec![
        Arc::new(job(
            "s1",
            Some(ts("2016-05-19T09:01:00Z")),
            Some("Complete"),
        )),
        Arc::new(job(
            "s2",
            Some(ts("2016-05-19T09:02:00Z")),
            Some("Complete"),
        )),
        Arc::new(job(
            "s3",
            Some(ts("2016-05-19T09:03:00Z")),
            Some("Complete"),
        )),
        Arc::new(job("f1", Some(ts("2016-05-19T09:04:00Z")), Some("Failed"))),
    ];
    s.sync(&cj, &jobs, just_before_the_hour())
        .await
        .expect("sync");
    let deleted: Vec<String> = fake
        .deleted
        .lock()
        .expect("l")
        .iter()
        .map(|d| d.0.clone())
        .collect();
    assert_eq!(deleted, ["s1", "s2", "f1"]);
    assert_eq!(
        reasons(&events),
        ["SuccessfulDelete", "SuccessfulDelete", "SuccessfulDelete"]
    );
    assert_eq!(events.all()[0].message, "Deleted job s1");
    assert_eq!(fake.updates.lock().expect("l").len(), 1);

    let (s, fake, events) = syncer();
    *fake.delete_error.lock().expect("l") = true;
    s.sync(&cj, &jobs, just_before_the_hour())
        .await
        .expect("sync");
    assert_eq!(
        reasons(&events),
        ["FailedDelete", "FailedDelete", "FailedDelete"]
    );
    assert_eq!(events.all()[0].message, "Deleted job: boom");
    assert_eq!(fake.deleted.lock().expect("l").len(), 0);
}
