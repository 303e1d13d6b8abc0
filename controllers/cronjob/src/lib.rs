//! CronJob controller (work in progress).
pub mod schedule;
