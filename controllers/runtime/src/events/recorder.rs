//! The recorder controllers hold: it builds the Event and hands it to the writer task without
//! blocking (or captures it, for tests).

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use crate::clock::{self, SharedClock};
use crate::events::consts;
use crate::events::correlator::{EventCorrelator, event_name};
use crate::events::writer::{CacheSizes, Writer};
use crate::tracked;

/// `type` of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The reference client-go's `ref.GetReference` builds: kind, apiVersion, namespace, name, uid
/// and resourceVersion of the object.
pub fn object_reference<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        field_path: None,
    }
}

/// An event as a fake recorder captured it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedEvent {
    pub object: ObjectReference,
    pub type_: EventType,
    pub reason: String,
    pub message: String,
}

/// What a fake recorder captured; shared with the recorder.
#[derive(Debug, Clone, Default)]
pub struct FakeEvents {
    events: Arc<Mutex<Vec<RecordedEvent>>>,
}

impl FakeEvents {
    /// Everything recorded so far, leaving the buffer empty.
    pub fn take(&self) -> Vec<RecordedEvent> {
        std::mem::take(&mut *self.events.lock())
    }
    /// A copy of everything recorded so far.
    pub fn all(&self) -> Vec<RecordedEvent> {
        self.events.lock().clone()
    }
}

#[derive(Clone)]
enum Target {
    Writer(mpsc::Sender<Event>),
    Fake(FakeEvents),
}

/// Records core/v1 Events for one event source (one controller). Cheap to clone; every clone
/// feeds the same writer task.
#[derive(Clone)]
pub struct EventRecorder {
    source: EventSource,
    clock: SharedClock,
    target: Target,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.source.component)
            .finish()
    }
}

impl EventRecorder {
    /// A recorder writing with `client` as `source.component = component` (upstream KCM leaves
    /// `source.host` empty). Spawns the writer task: call inside a tokio runtime. The task ends
    /// when the last clone is dropped.
    pub fn new(client: kube::Client, component: &str) -> Self {
        Self::with_options(client, component, None, clock::system())
    }

    /// Like [`EventRecorder::new`] with an explicit `source.host` and wall clock.
    pub fn with_options(
        client: kube::Client,
        component: &str,
        host: Option<String>,
        clock: SharedClock,
    ) -> Self {
        let (tx, rx) = mpsc::channel(consts::MAX_QUEUED_EVENTS);
        let sizes = Arc::new(CacheSizes::default());
        tracked::track(component, &sizes, CacheSizes::report);
        let writer = Writer {
            client,
            correlator: EventCorrelator::new(clock.clone()),
            sleep: consts::SLEEP_BETWEEN_TRIES,
            sizes,
        };
        tokio::spawn(writer.run(rx));
        Self {
            source: EventSource {
                component: Some(component.to_string()),
                host,
            },
            clock,
            target: Target::Writer(tx),
        }
    }

    /// A recorder that only captures events, for tests: no task, no API, no correlation.
    pub fn fake(component: &str) -> (Self, FakeEvents) {
        let events = FakeEvents::default();
        let rec = Self {
            source: EventSource {
                component: Some(component.to_string()),
                host: None,
            },
            clock: clock::system(),
            target: Target::Fake(events.clone()),
        };
        (rec, events)
    }

    /// The `source.component` of this recorder.
    pub fn component(&self) -> &str {
        self.source.component.as_deref().unwrap_or_default()
    }

    /// Records an event about `object`. Never blocks; drops the event (with a log line) when
    /// the buffer is full.
    pub fn event(&self, object: &ObjectReference, type_: EventType, reason: &str, message: &str) {
        tracing::debug!(
            kind = object.kind.as_deref().unwrap_or_default(),
            namespace = object.namespace.as_deref().unwrap_or_default(),
            name = object.name.as_deref().unwrap_or_default(),
            component = self.component(),
            event_type = type_.as_str(),
            reason,
            message,
            "event occurred"
        );
        match &self.target {
            Target::Fake(events) => events.events.lock().push(RecordedEvent {
                object: object.clone(),
                type_,
                reason: reason.to_string(),
                message: message.to_string(),
            }),
            Target::Writer(tx) => {
                let event = make_event(
                    &self.source,
                    object,
                    type_,
                    reason,
                    message,
                    self.clock.wall(),
                );
                match tx.try_send(event) {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(ev)) => tracing::error!(
                        name = ev.metadata.name.as_deref().unwrap_or_default(),
                        reason,
                        "unable to record event: too many queued events, dropped event"
                    ),
                    Err(mpsc::error::TrySendError::Closed(_)) => {
                        tracing::debug!(reason, "event writer stopped, dropped event")
                    }
                }
            }
        }
    }

    /// [`EventRecorder::event`] with the reference built from `obj`.
    pub fn event_for<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        self.event(&object_reference(obj), type_, reason, message);
    }
}

/// The Event client-go's `makeEvent` builds (plus source and reporting fields as
/// `generateEvent` sets them).
pub(super) fn make_event(
    source: &EventSource,
    object: &ObjectReference,
    type_: EventType,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) -> Event {
    let namespace = match object.namespace.as_deref() {
        Some(ns) if !ns.is_empty() => ns.to_string(),
        _ => consts::DEFAULT_NAMESPACE.to_string(),
    };
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(object.name.as_deref().unwrap_or_default(), now)),
            namespace: Some(namespace),
            ..ObjectMeta::default()
        },
        involved_object: object.clone(),
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        type_: Some(type_.as_str().to_string()),
        source: Some(source.clone()),
        reporting_component: source.component.clone(),
        reporting_instance: Some(source.host.clone().unwrap_or_default()),
        ..Event::default()
    }
}
