//! The writer task of a recorder: correlates each event, then creates or patches it, retrying
//! transport failures.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::time::Duration;

use k8s_openapi::api::core::v1::Event;
use kube::api::Patch;
use tokio::sync::mpsc;

use crate::events::consts;
use crate::events::correlator::{Correlation, EventCorrelator, s};
use crate::tracked;

pub(super) struct Writer {
    pub(super) client: kube::Client,
    pub(super) correlator: EventCorrelator,
    pub(super) sleep: Duration,
    /// The correlator's cache sizes after its last event, for [`tracked`]; dropped with the
    /// task, which ends the registration.
    pub(super) sizes: Arc<CacheSizes>,
}

/// The entries of the three correlation caches of one recorder.
#[derive(Debug, Default)]
pub(super) struct CacheSizes {
    spam: AtomicUsize,
    aggregates: AtomicUsize,
    logs: AtomicUsize,
}

impl CacheSizes {
    pub(super) fn report(&self, out: &mut Vec<tracked::Size>) {
        let read = |n: &AtomicUsize| n.load(AtomicOrdering::Relaxed);
        out.push(tracked::Size::capacity("events_spam", read(&self.spam)));
        out.push(tracked::Size::capacity(
            "events_aggregates",
            read(&self.aggregates),
        ));
        out.push(tracked::Size::capacity("events_logs", read(&self.logs)));
    }

    fn update(&self, correlator: &EventCorrelator) {
        let (spam, aggregates, logs) = correlator.sizes();
        self.spam.store(spam, AtomicOrdering::Relaxed);
        self.aggregates.store(aggregates, AtomicOrdering::Relaxed);
        self.logs.store(logs, AtomicOrdering::Relaxed);
    }
}

/// How one write attempt ended.
enum Attempt {
    Done,
    Retry,
}

impl Writer {
    pub(super) async fn run(mut self, mut rx: mpsc::Receiver<Event>) {
        while let Some(event) = rx.recv().await {
            self.record(event).await;
        }
        tracing::debug!("event writer stopped");
    }

    pub(super) async fn record(&mut self, event: Event) {
        let decision = self.correlator.correlate(event);
        self.sizes.update(&self.correlator);
        let (event, patch) = match decision {
            Correlation::Skip => return,
            Correlation::Create(e) => (e, None),
            Correlation::Patch { event, patch } => (event, Some(patch)),
        };
        let mut tries = 0;
        loop {
            if let Attempt::Done = self.attempt(&event, patch.as_ref()).await {
                return;
            }
            tries += 1;
            if tries >= consts::MAX_TRIES_PER_EVENT {
                tracing::error!(
                    name = s(&event.metadata.name),
                    reason = s(&event.reason),
                    "unable to write event (retry limit exceeded)"
                );
                return;
            }
            // Randomise the first pause so many clients do not retry in lockstep after an
            // apiserver outage.
            let delay = if tries == 1 {
                self.sleep.mul_f64(crate::jitter::unit())
            } else {
                self.sleep
            };
            tokio::time::sleep(delay).await;
        }
    }

    async fn attempt(&mut self, event: &Event, patch: Option<&serde_json::Value>) -> Attempt {
        let namespace = s(&event.metadata.namespace);
        let mut result = None;
        if let Some(patch) = patch {
            let name = s(&event.metadata.name);
            let r = crate::api::write::patch::<Event, _>(
                &self.client,
                Some(namespace),
                name,
                &Patch::Strategic(patch),
            )
            .await;
            // The aggregated-into Event may have expired or been deleted: create it anew.
            let gone = matches!(&r, Err(kube::Error::Api(st)) if st.is_not_found());
            if !gone {
                result = Some(r);
            }
        }
        let result = match result {
            Some(r) => r,
            None => {
                let mut fresh = event.clone();
                fresh.metadata.resource_version = None;
                crate::api::write::create(&self.client, Some(namespace), &fresh).await
            }
        };
        match result {
            Ok(written) => {
                // The server stores what was sent (the patch sets the count, message and last
                // time the correlator computed): only its name and resourceVersion are new.
                let mut server = event.clone();
                server.metadata.resource_version = written.resource_version;
                if written.name.is_some() {
                    server.metadata.name = written.name;
                }
                self.correlator.update_state(&server);
                Attempt::Done
            }
            Err(kube::Error::Api(status)) => {
                let terminating = status.details.as_ref().is_some_and(|d| {
                    d.causes
                        .iter()
                        .any(|c| c.reason == crate::error::NAMESPACE_TERMINATING_CAUSE)
                });
                if status.is_already_exists() || terminating {
                    tracing::debug!(
                        name = s(&event.metadata.name),
                        error = %status.message,
                        "server rejected event (will not retry)"
                    );
                } else {
                    tracing::error!(
                        name = s(&event.metadata.name),
                        reason = s(&event.reason),
                        code = status.code,
                        error = %status.message,
                        "server rejected event (will not retry)"
                    );
                }
                Attempt::Done
            }
            Err(e @ kube::Error::BuildRequest(_)) => {
                tracing::error!(name = s(&event.metadata.name), error = %e, "unable to construct event (will not retry)");
                Attempt::Done
            }
            Err(e) => {
                tracing::error!(name = s(&event.metadata.name), error = %e, "unable to write event (may retry after sleeping)");
                Attempt::Retry
            }
        }
    }
}
