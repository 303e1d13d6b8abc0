//! The checks on Jobs: one Job per CronJob slot, a Job's status against the pods seen, and
//! finished Jobs whose pods keep the tracking finalizer.

use std::collections::BTreeSet;

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;

use super::Checker;
use super::objects::{
    completed_indexes, controller_of, is_indexed, job_counts, job_finished, key_of, parse_indexes,
};
use super::{CRONJOB_SCHEDULED_ANNOTATION, Invariant, JOB_TRACKING_FINALIZER, JobState};

impl Checker {
    /// A CronJob's scheduled instant has at most one Job.
    fn check_cron_slot(&mut self, at: Timestamp, j: &Job, uid: &str) {
        if let Some(("CronJob", cj, _)) = controller_of(&j.metadata) {
            let scheduled = j
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CRONJOB_SCHEDULED_ANNOTATION))
                .cloned();
            if let Some(scheduled) = scheduled {
                let ns = j.metadata.namespace.clone().unwrap_or_default();
                let slot = (ns.clone(), cj.to_owned(), scheduled.clone());
                let jobs = self.cron_slots.entry(slot).or_default();
                jobs.insert(uid.to_owned());
                if jobs.len() > 1 {
                    let detail = format!("scheduled time {scheduled}: Jobs {jobs:?}");
                    self.violate(
                        at,
                        Invariant::CronJobSlotTwice,
                        &format!("{ns}/{cj}"),
                        detail,
                    );
                }
            }
        }
    }

    pub(super) fn apply_job(&mut self, at: Timestamp, j: Job, listed: bool) {
        let uid = j.metadata.uid.clone().unwrap_or_default();
        let key = key_of(&j.metadata);
        let (succeeded, failed) = job_counts(&j);

        self.check_cron_slot(at, &j, &uid);

        let prev = self.jobs.get(&uid).map(|s| {
            (
                job_counts(&s.job),
                completed_indexes(&s.job).map(str::to_owned),
            )
        });
        if let Some(((ps, pf), _)) = &prev
            && (succeeded < *ps || failed < *pf)
        {
            self.violate(
                at,
                Invariant::JobCountDecreased,
                &key,
                format!("succeeded {ps} -> {succeeded}, failed {pf} -> {failed}"),
            );
        }

        let mut indexes = BTreeSet::new();
        if is_indexed(&j) {
            let completions = i64::from(j.spec.as_ref().and_then(|s| s.completions).unwrap_or(1));
            let raw = completed_indexes(&j).unwrap_or_default();
            match parse_indexes(raw) {
                None => self.violate(
                    at,
                    Invariant::JobCompletedIndexesWrong,
                    &key,
                    format!("malformed completedIndexes {raw:?}"),
                ),
                Some(set) => {
                    if set.last().is_some_and(|&m| m >= completions)
                        || set.first().is_some_and(|&m| m < 0)
                    {
                        self.violate(
                            at,
                            Invariant::JobCompletedIndexesWrong,
                            &key,
                            format!("completedIndexes {raw:?} outside 0..{completions}"),
                        );
                    }
                    if i64::from(succeeded) != i64::try_from(set.len()).unwrap_or(i64::MAX) {
                        self.violate(
                            at,
                            Invariant::JobCompletedIndexesWrong,
                            &key,
                            format!(
                                "succeeded {succeeded} but completedIndexes {raw:?} has {} indexes",
                                set.len()
                            ),
                        );
                    }
                    let old = prev
                        .as_ref()
                        .and_then(|(_, o)| o.as_deref())
                        .and_then(parse_indexes)
                        .unwrap_or_default();
                    let lost: Vec<_> = old.difference(&set).collect();
                    if !lost.is_empty() {
                        self.violate(
                            at,
                            Invariant::JobCompletedIndexesWrong,
                            &key,
                            format!("completedIndexes lost {lost:?}: now {raw:?}"),
                        );
                    }
                    indexes = set;
                }
            }
        }

        let finished = job_finished(&j);
        let state = self.jobs.entry(uid).or_insert_with(|| JobState {
            exact: !listed,
            ..Default::default()
        });
        if finished && state.finished_at.is_none() {
            state.finished_at = Some(at);
        }
        if state.exact {
            state.pending.push((at, succeeded, failed, indexes));
        }
        state.job = j;
    }

    /// Judges the Job statuses older than `grace` at `now` against the pods seen, and
    /// finished Jobs whose pods still hold the tracking finalizer.
    pub(super) fn judge_jobs(&mut self, now: Timestamp) {
        let grace = self.config.grace;
        let ripe = |at: Timestamp| at + grace <= now;
        let mut found = Vec::new();
        let listing_pods = self.listing_pods();
        for (uid, state) in &mut self.jobs {
            let key = key_of(&state.job.metadata);
            let pods = self.job_pods.get(uid);
            let succeeded_pods = pods.map_or(0, |p| p.succeeded.len());
            let ended_pods = pods.map_or(0, |p| p.ended.len());
            let (ready, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut state.pending)
                .into_iter()
                .partition(|p| ripe(p.0));
            state.pending = waiting;
            for (at, succeeded, failed, indexes) in ready {
                if usize::try_from(succeeded).unwrap_or(0) > succeeded_pods {
                    found.push((at, Invariant::JobCountAboveTerminatedPods, key.clone(),
                        format!("succeeded {succeeded}, but only {succeeded_pods} distinct pods were seen succeed")));
                }
                if usize::try_from(failed).unwrap_or(0) > ended_pods {
                    found.push((at, Invariant::JobCountAboveTerminatedPods, key.clone(),
                        format!("failed {failed}, but only {ended_pods} distinct pods were seen fail or go away")));
                }
                let seen = pods.map(|p| &p.succeeded_indexes);
                let unbacked: Vec<_> = indexes
                    .iter()
                    .filter(|ix| !seen.is_some_and(|s| s.contains(ix)))
                    .collect();
                if !unbacked.is_empty() {
                    found.push((
                        at,
                        Invariant::JobCompletedIndexesWrong,
                        key.clone(),
                        format!(
                            "completedIndexes names {unbacked:?}, for which no pod was seen succeed"
                        ),
                    ));
                }
            }
            if let Some(done) = state.finished_at.filter(|t| ripe(*t))
                && !state.finalizer_reported
                && !listing_pods
            {
                let holding: Vec<String> = self
                    .pods
                    .values()
                    .filter(|p| controller_of(&p.metadata).map(|c| c.2) == Some(uid.as_str()))
                    .filter(|p| {
                        p.metadata
                            .finalizers
                            .iter()
                            .flatten()
                            .any(|f| f == JOB_TRACKING_FINALIZER)
                    })
                    .map(|p| p.metadata.name.clone().unwrap_or_default())
                    .collect();
                if !holding.is_empty() {
                    state.finalizer_reported = true;
                    found.push((
                        done,
                        Invariant::TrackingFinalizerLeft,
                        key.clone(),
                        format!(
                            "finished, and pods {holding:?} still hold {JOB_TRACKING_FINALIZER}"
                        ),
                    ));
                }
            }
        }
        for (at, inv, key, detail) in found {
            self.violate(at, inv, &key, detail);
        }
    }
}
