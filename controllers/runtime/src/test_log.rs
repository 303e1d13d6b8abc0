//! A tracing subscriber for tests that records every event logged on the thread it is set
//! as the default for.

use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

/// One logged event: its level, message and other fields (`name=value`, space-separated).
#[derive(Clone, Debug)]
pub(crate) struct Logged {
    pub level: tracing::Level,
    pub message: String,
    pub fields: String,
}

/// Records every event; set it with `tracing::subscriber::set_default`.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<Logged>>>);

impl Captured {
    pub(crate) fn events(&self) -> Vec<Logged> {
        self.0.lock().clone()
    }

    /// The fields of each event at `level` with `message`, in order.
    pub(crate) fn fields_of(&self, level: tracing::Level, message: &str) -> Vec<String> {
        self.events()
            .into_iter()
            .filter(|e| e.level == level && e.message == message)
            .map(|e| e.fields)
            .collect()
    }

    /// The level and message of each event.
    pub(crate) fn messages(&self) -> Vec<(tracing::Level, String)> {
        self.events()
            .into_iter()
            .map(|e| (e.level, e.message))
            .collect()
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    rest: Vec<String>,
}

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            self.rest.push(format!("{}={value:?}", field.name()));
        }
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            self.rest.push(format!("{}={value}", field.name()));
        }
    }
}

impl tracing::Subscriber for Captured {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        self.0.lock().push(Logged {
            level: *event.metadata().level(),
            message: fields.message,
            fields: fields.rest.join(" "),
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}
