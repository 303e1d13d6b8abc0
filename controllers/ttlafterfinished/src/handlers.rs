//! The event handler: a finished Job with a TTL queued for its check (upstream `addJob` /
//! `updateJob` of `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`).

use k8s_openapi::api::batch::v1::Job;
use rkcm_runtime::cache::Change;
use rkcm_runtime::keys::key_of;

use crate::plan;
use crate::reconcile::Controller;

impl Controller {
    /// Job added or updated: queue it now if it is finished, has a TTL and is not being
    /// deleted. Deletions need nothing.
    pub(crate) fn on_job(&self, change: Change<Job>) {
        let job = match &change {
            Change::Added(job) | Change::Updated { new: job, .. } => job,
            Change::Deleted { .. } => return,
        };
        if plan::should_enqueue(job) {
            let key = key_of(&**job);
            tracing::debug!(controller = crate::config::NAME, key = %key, "job to check for cleanup");
            self.queue.add(key);
        }
    }
}
