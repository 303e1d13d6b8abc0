//! One module per scenario; each implements [`crate::harness::Scenario`] and is one
//! subcommand of the binary. Setup concurrency, manager start, measurement (time, CPU, RSS,
//! audit-log requests), correctness reporting and the Markdown report are shared.
//!
//! Adding a scenario (e.g. Deployment rolling update):
//! 1. a module here with a `clap::Args` struct for its sizes and a type implementing
//!    `Scenario`: `setup` creates objects in the run's namespace and arms watches,
//!    `converge` drives the steps (scale, update the template) and waits for each, recording
//!    `Probe::mark` milestones or `Probe::begin`/`Probe::end` timed phases (wall time, CPU,
//!    requests of each step), `verify` checks the end state, `cleanup` deletes what is left;
//! 2. a variant of `Command` in `main.rs` calling `run_scenario`;
//! 3. a case in `e2e/bench.sh` (and raise `BENCH_NODES` if its pods must run on kwok nodes:
//!    110 pods per node), and its name in the report order there (`ALL_SCENARIOS`).

pub mod cronjob;
pub mod daemonset;
pub mod deployment;
pub mod envelope;
pub mod idle;
pub mod job;
pub mod mass_rollout;
pub mod podgc;
pub mod replicaset;
pub mod statefulset;
pub mod threshold;
