//! Decisions as data for people and tools: what a controller will do next with one object,
//! what it waits on, since when, and what a person can do about it (`rkcm explain`). Each
//! controller crate builds an [`Explanation`] with a pure function of the same snapshot its
//! sync reads; this module holds the shape and its text rendering.
//!
//! The JSON form (`rkcm explain -o json`) is a stable schema: top-level `object`,
//! `controller`, `state`, `actions`, `waitingOn` (each `{reason, message, objects, since}`)
//! and `remedies`. Reason codes are fixed per controller and documented where they are made.

use serde::Serialize;

pub mod decisions;
pub mod refused;
pub mod waiting_metrics;

/// The object explained.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ObjectRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// Where the object stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum State {
    /// Nothing to do: the object is where its spec asks.
    Settled,
    /// The controller has writes to make now.
    Acting,
    /// Nothing to write now; progress waits on something else (pods, time, a person).
    Waiting,
    /// It will not progress without a change by a person.
    Stalled,
}

/// One thing the controller waits on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// A reason code from the controller's fixed list.
    pub reason: &'static str,
    /// The numbers behind it, for a person.
    pub message: String,
    /// The objects involved (`kind/name`, same namespace).
    pub objects: Vec<String>,
    /// Since when, RFC 3339, when the object records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

impl Waiting {
    /// A wait with no recorded start.
    pub fn new(reason: &'static str, message: String, objects: Vec<String>) -> Self {
        Self {
            reason,
            message,
            objects,
            since: None,
        }
    }
}

/// What a controller would do with one object now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    pub object: ObjectRef,
    /// The controller's canonical name (`--controllers`).
    pub controller: &'static str,
    pub state: State,
    /// The writes the next sync makes, in words.
    pub actions: Vec<String>,
    pub waiting_on: Vec<Waiting>,
    /// What a person can do, most useful first.
    pub remedies: Vec<String>,
}

impl Explanation {
    /// The text form: one block a person reads top to bottom.
    pub fn render(&self) -> String {
        let o = &self.object;
        let state = match self.state {
            State::Settled => "settled: nothing to do",
            State::Acting => "acting",
            State::Waiting => "waiting",
            State::Stalled => "stalled: needs a change by a person",
        };
        let mut out = format!(
            "{}/{} in {} ({}): {state}\n",
            o.kind.to_lowercase(),
            o.name,
            o.namespace,
            self.controller
        );
        if !self.actions.is_empty() {
            out.push_str("Next:\n");
            for a in &self.actions {
                out.push_str(&format!("  - {a}\n"));
            }
        }
        if !self.waiting_on.is_empty() {
            out.push_str("Waiting on:\n");
            for w in &self.waiting_on {
                out.push_str(&format!("  - {}: {}", w.reason, w.message));
                if let Some(since) = &w.since {
                    out.push_str(&format!(" (since {since})"));
                }
                out.push('\n');
                for obj in &w.objects {
                    out.push_str(&format!("      {obj}\n"));
                }
            }
        }
        if !self.remedies.is_empty() {
            out.push_str("What you can do:\n");
            for r in &self.remedies {
                out.push_str(&format!("  - {r}\n"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
