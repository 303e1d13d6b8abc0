//! The sync: cache -> [`plan::evaluate`] -> DELETE of the cached copy
//! (preconditions: its UID and resourceVersion) -> on a conflict, fresh GET -> re-check ->
//! DELETE.
//!
//! Mirrors `processJob` and the timer half of `processTTL` in upstream
//! `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`.

use jiff::Timestamp;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use rkcm_runtime::api::write;
use rkcm_runtime::cache::Store;
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::Reconcile;
use rkcm_runtime::error::{is_not_found, is_write_conflict};
use rkcm_runtime::keys::split_key;
use rkcm_runtime::queue::WorkQueue;

use crate::error::Error;
use crate::metrics;
use crate::plan::{self, Verdict};

/// Everything the handler and the workers share.
pub(crate) struct Controller {
    pub(crate) client: kube::Client,
    pub(crate) jobs: Store<Job>,
    pub(crate) queue: WorkQueue<String>,
    pub(crate) clock: SharedClock,
}

impl Controller {
    /// Judges one copy of the Job (upstream `processTTL`): the expiry time if it is due;
    /// `None` if not, after arming the timer for a Job still waiting.
    fn check(&self, key: &str, job: &Job) -> Result<Option<Timestamp>, Error> {
        match plan::evaluate(job, self.clock.wall())? {
            Verdict::Ignore => Ok(None),
            Verdict::Expired { expire_at } => Ok(Some(expire_at)),
            Verdict::Wait { after, expiry } => {
                if expiry.finished_in_future {
                    tracing::info!(
                        controller = crate::config::NAME,
                        key,
                        finish_time = %expiry.finish_at,
                        "Warning: Found Job finished in the future. This is likely due to time skew in the cluster. Job cleanup will be deferred."
                    );
                }
                tracing::debug!(controller = crate::config::NAME, key, finish_time = %expiry.finish_at, expire_at = %expiry.expire_at, remaining = ?after, "job finished, TTL not expired yet");
                rkcm_runtime::explain::decisions::note_wait(
                    if expiry.finished_in_future {
                        "FinishedInFuture"
                    } else {
                        "TtlNotExpired"
                    },
                    format_args!("deleted at {} (in {after:?})", expiry.expire_at),
                );
                self.queue.add_after(key.to_string(), after);
                Ok(None)
            }
        }
    }
}

impl Reconcile for Controller {
    type Error = Error;

    /// One sync of the Job `key` (upstream `processJob`): delete it if its TTL has expired
    /// on the newest copy of the Job.
    ///
    /// Upstream reads that copy with a GET before every delete. Here the cached copy is
    /// deleted first, with its UID and resourceVersion as preconditions: when the cache is
    /// current (the usual case: the update that finished the Job is what queued it) that copy
    /// is the newest, and the server refuses the delete with a conflict when it is not. Only
    /// then is the newest copy read and judged, as upstream does; a Job is never deleted on
    /// a copy older than the server's, and the common case saves a GET (a quorum read).
    async fn sync(&self, key: String) -> Result<(), Error> {
        let Some(cached) = self.jobs.get(&key) else {
            rkcm_runtime::explain::decisions::note_gone();
            return Ok(());
        };
        tracing::debug!(controller = crate::config::NAME, key = %key, "checking whether job is ready for cleanup");
        let Some(expire_at) = self.check(&key, &cached)? else {
            return Ok(());
        };
        let (namespace, name) = split_key(&key);
        match self.delete(&key, &cached, expire_at).await {
            Err(source) if is_write_conflict(&source) => {
                tracing::debug!(controller = crate::config::NAME, key = %key, "cached job is not the newest; reading it");
            }
            done => return done.map_err(|source| Error::DeleteJob { key, source }),
        }

        // The cached TTL was stale: a user may just have raised it. Decide again on the
        // newest copy; a Job re-created under the same name is judged on its own.
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace.unwrap_or_default());
        let fresh = match api.get_opt(name).await {
            Ok(Some(job)) => job,
            Ok(None) => return Ok(()),
            Err(source) => return Err(Error::GetJob { key, source }),
        };
        let Some(expire_at) = self.check(&key, &fresh)? else {
            return Ok(());
        };
        self.delete(&key, &fresh, expire_at)
            .await
            .map_err(|source| Error::DeleteJob { key, source })
    }
}

impl Controller {
    /// Deletes exactly the copy `job` judged, due since `expire_at`: its UID and
    /// resourceVersion are the delete's preconditions. Foreground: the Job goes only after its
    /// pods (`blockOwnerDeletion`) are gone. A Job already gone (404) counts as done.
    async fn delete(&self, key: &str, job: &Job, expire_at: Timestamp) -> Result<(), kube::Error> {
        let (namespace, name) = split_key(key);
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: job.metadata.uid.clone(),
                // Mutant (sim only): the UID alone, so a Job whose TTL was just raised is
                // deleted on its cached copy's TTL.
                resource_version: job
                    .metadata
                    .resource_version
                    .clone()
                    .filter(|_| !rkcm_runtime::mutants::on("ttl-no-version-precondition")),
            }),
            ..DeleteParams::default()
        };
        tracing::debug!(controller = crate::config::NAME, key, "cleaning up job");
        match write::delete::<Job>(&self.client, namespace, name, &params).await {
            Ok(()) => {
                let late = self.clock.wall().duration_since(expire_at);
                metrics::observe_job_deletion(late.as_secs_f64());
                tracing::info!(controller = crate::config::NAME, key, %expire_at, "deleted job whose TTL expired");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests;
