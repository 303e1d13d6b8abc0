//! The TTL-after-finished controller: deletes a finished Job (`Complete` or `Failed`)
//! `spec.ttlSecondsAfterFinished` seconds after it finished.
//!
//! Mirrors upstream (Kubernetes v1.37) `pkg/controller/ttlafterfinished/ttlafterfinished_controller.go`
//! and `metrics/metrics.go`.
//!
//! # Guarantees
//! - A Job is deleted only when its TTL has expired on both the cached and a freshly read
//!   object, with the fresh object's UID as precondition: a Job re-created under the same name
//!   is never deleted for an older one's timer, and a TTL extended meanwhile is honoured.
//! - Deletion is `Foreground` (as upstream): the Job goes after its pods.
//! - A not-yet-expired Job is requeued to be looked at exactly when it expires; timers are
//!   in memory and rebuilt from the informer's initial list after a restart.
//! - Jobs already being deleted, without a TTL, or not finished are left alone.
//! - `ttl_after_finished_controller_job_deletion_duration_seconds` observes the delay between
//!   expiry and the delete. No events (as upstream).
//!
//! # Watches and writes
//! Watches Jobs. Writes: `get` and `delete` Jobs.

mod error;
pub mod plan;

use std::sync::{Arc, OnceLock};

use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, Preconditions, PropagationPolicy};
use rkcm_runtime::ControllerContext;
use rkcm_runtime::clock::SharedClock;
use rkcm_runtime::controller::{RunSpec, SyncProbe, run_controller};
use rkcm_runtime::informer::InformerFactory;
use rkcm_runtime::informer::{Change, Store};
use rkcm_runtime::keys::{key_of, split_key};
use rkcm_runtime::workqueue::{RateLimiter, RetryPolicy, WorkQueue};

pub use error::Error;
use plan::Ttl;

/// Canonical name (`--controllers`; alias `ttl-after-finished`).
pub const NAME: &str = "ttl-after-finished-controller";
/// Work queue name.
pub const QUEUE_NAME: &str = "ttl_jobs_to_delete";
/// Upstream default of `--concurrent-ttl-after-finished-syncs`.
pub const DEFAULT_WORKERS: usize = 5;

/// Configuration. `Default` equals upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Workers (`--concurrent-ttl-after-finished-syncs`; values ≤ 0 mean 5, as upstream's
    /// config defaulting).
    pub workers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            workers: DEFAULT_WORKERS,
        }
    }
}

impl Config {
    /// From the flag value: non-positive values are defaulted to 5.
    pub fn from_flag(workers: i32) -> Self {
        Self {
            workers: usize::try_from(workers)
                .ok()
                .filter(|w| *w > 0)
                .unwrap_or(DEFAULT_WORKERS),
        }
    }
}

fn deletion_duration() -> Option<&'static prometheus::Histogram> {
    static METRIC: OnceLock<Option<prometheus::Histogram>> = OnceLock::new();
    METRIC
        .get_or_init(|| {
            let buckets = prometheus::exponential_buckets(0.1, 2.0, 14).ok()?;
            let opts = prometheus::HistogramOpts::new(
                "job_deletion_duration_seconds",
                "The time it took to delete the job since it became eligible for deletion",
            )
            .subsystem("ttl_after_finished_controller")
            .buckets(buckets);
            let h = prometheus::Histogram::with_opts(opts)
                .inspect_err(|error| tracing::error!(%error, "building TTL metric failed"))
                .ok()?;
            if let Err(error) = rkcm_runtime::metrics::registry().register(Box::new(h.clone())) {
                tracing::error!(%error, "registering TTL metric failed");
            }
            Some(h)
        })
        .as_ref()
}

/// The informers the controller reads.
pub fn informers(factory: &InformerFactory) -> Vec<SyncProbe> {
    vec![SyncProbe::of(factory.informer::<Job>())]
}

struct Controller {
    client: kube::Client,
    jobs: Store<Job>,
    queue: WorkQueue<String>,
    clock: SharedClock,
}

impl Controller {
    fn on_job_change(&self, change: Change<Job>) {
        let job = match &change {
            Change::Added(j) | Change::Updated { new: j, .. } => j,
            Change::Deleted { .. } => return,
        };
        if job.metadata.deletion_timestamp.is_none() && plan::needs_cleanup(job) {
            self.queue.add(key_of(&**job));
        }
    }

    /// `processTTL`: the verdict, requeueing a Job that expires later.
    fn check(&self, key: &str, job: &Job) -> Result<Option<jiff::Timestamp>, Error> {
        match plan::check(job, self.clock.wall()) {
            Ok(Ttl::NotEligible) => Ok(None),
            Ok(Ttl::Expired { expire_at }) => Ok(Some(expire_at)),
            Ok(Ttl::Wait(d)) => {
                self.queue.add_after(key.to_owned(), d);
                Ok(None)
            }
            Err(source) => Err(Error::FinishTime {
                key: key.to_owned(),
                source,
            }),
        }
    }

    async fn sync(&self, key: String) -> Result<(), Error> {
        let Some(cached) = self.jobs.get(&key) else {
            return Ok(());
        };
        if self.check(&key, &cached)?.is_none() {
            return Ok(());
        }
        let (namespace, name) = split_key(&key);
        let api: Api<Job> = Api::namespaced(self.client.clone(), namespace.unwrap_or_default());
        // The cache may be stale (TTL extended, Job re-created): decide on a fresh read.
        let fresh = match api.get(name).await {
            Ok(j) => j,
            Err(kube::Error::Api(s)) if s.is_not_found() => return Ok(()),
            Err(source) => return Err(Error::Get { key, source }),
        };
        let Some(expire_at) = self.check(&key, &fresh)? else {
            return Ok(());
        };
        tracing::debug!(key = %key, "cleaning up finished Job");
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Foreground),
            preconditions: Some(Preconditions {
                uid: fresh.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        api.delete(name, &params)
            .await
            .map_err(|source| Error::Delete {
                key: key.clone(),
                source,
            })?;
        if let Some(h) = deletion_duration() {
            let late = self.clock.wall().duration_since(expire_at);
            h.observe(late.as_secs_f64().max(0.0));
        }
        Ok(())
    }
}

/// Runs the controller until `ctx.shutdown` is cancelled.
pub async fn start(ctx: ControllerContext, cfg: Config) -> Result<(), Error> {
    let _ = deletion_duration();
    let jobs = ctx.informers.informer::<Job>();
    let queue = WorkQueue::new(QUEUE_NAME, RateLimiter::Default);
    let controller = Arc::new(Controller {
        client: ctx.client.clone(),
        jobs: jobs.store(),
        queue: queue.clone(),
        clock: ctx.clock.clone(),
    });
    let c = controller.clone();
    jobs.subscribe(move |change| c.on_job_change(change));
    let spec = RunSpec {
        name: NAME,
        queue,
        workers: cfg.workers,
        policy: RetryPolicy::default(),
        wait_for: informers(&ctx.informers),
    };
    run_controller(&ctx, spec, move |key: String| {
        let c = controller.clone();
        async move { c.sync(key).await }
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(dead_code)]
    fn start_future_is_send(ctx: ControllerContext) {
        fn assert_send<T: Send>(_: &T) {}
        assert_send(&start(ctx, Config::default()));
    }

    #[test]
    fn defaults_are_upstream() {
        assert_eq!(Config::default().workers, 5);
        assert_eq!(Config::from_flag(0).workers, 5);
        assert_eq!(Config::from_flag(-3).workers, 5);
        assert_eq!(Config::from_flag(2).workers, 2);
        assert_eq!(NAME, "ttl-after-finished-controller");
        assert_eq!(QUEUE_NAME, "ttl_jobs_to_delete");
    }

    #[test]
    fn metric_renders_with_upstream_name() {
        deletion_duration().expect("valid options").observe(0.5);
        let text = rkcm_runtime::metrics::render();
        assert!(
            text.contains(
                "ttl_after_finished_controller_job_deletion_duration_seconds_bucket{le=\"0.1\"}"
            ),
            "{text}"
        );
    }
}
