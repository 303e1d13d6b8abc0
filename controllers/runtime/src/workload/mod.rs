//! The workload helpers (upstream `pkg/controller/controller_utils.go`, `history` and
//! `util/`): what the workload controllers share about pods and the objects that own them.

pub mod children;
pub mod consistency;
pub mod controller_ref;
pub mod expectations;
pub mod history;
pub mod pod;
pub mod podcontrol;
pub mod selector;
