//! core/v1 Event recording with client-go semantics (mirrors client-go `tools/record/event.go`
//! and `tools/record/events_cache.go`).
//!
//! Guarantees:
//! - [`EventRecorder::event`] never blocks, never does I/O inline and never fails: it puts the
//!   event into a bounded buffer (1000 entries; a full buffer drops the event with a log line)
//!   and one background task per recorder writes it.
//! - Events are **core/v1** objects named `<involvedObject.name>.<hex unix nanoseconds>` in the
//!   involved object's namespace (`default` for cluster-scoped objects), with
//!   `source.component`, `reportingComponent`, `firstTimestamp`, `lastTimestamp` and `count`,
//!   because tooling selects KCM events on `source.component` and `reason`.
//! - Correlation is client-go's [`EventCorrelator`], in client-go's order: similar-event
//!   aggregation, then counting of identical events (a repeat PATCHes `count`,
//!   `lastTimestamp` and `message` of the existing Event instead of creating one), then the
//!   per source+object spam filter (token bucket, burst 25, one token per 300 s). The counter
//!   advances even for events the spam filter drops, exactly as upstream does.
//! - Write failures are logged. Only transport-level failures are retried (at most 12
//!   attempts, 10 s apart, the first delay randomised); an API status error ends the attempt.
//!   A count PATCH answered with NotFound falls back to a create.
//!
//! - `recorder`: what controllers hold ([`EventRecorder`]); builds events, never blocks.
//! - `correlator`: client-go's correlation ([`EventCorrelator`]), pure.
//! - `writer`: the background task that writes what the correlator lets through.

pub mod consts;
mod correlator;
mod recorder;
mod writer;

#[cfg(test)]
mod tests;

pub use correlator::{Correlation, EventCorrelator};
pub use recorder::{EventRecorder, EventType, FakeEvents, RecordedEvent, object_reference};
