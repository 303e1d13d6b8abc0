//! TTL-after-finished scenarios against the real local control plane (one test or more per
//! acceptance scenario; each test names its scenarios).
//!
//! Each test runs the controller in-process on an informer factory of its own, limited to the
//! test's namespace, so it never touches other tests' Jobs on the shared plane. No Job
//! controller runs: the tests finish Jobs by writing `jobs/status` (`startTime`, interim and
//! terminal conditions with chosen `lastTransitionTime`s, `completionTime`) and create the
//! pods of a Job themselves, unbound, with the Job as controller. The plane's upstream garbage
//! collector carries out the Foreground deletions.
//!
//! "Not before" and "never" claims are checked on a watch history of the Job (every version,
//! with the server's deletionTimestamp), not on samples.
//!
//! Run with `make test`, or against a running cluster:
//! `RKCM_TEST_KUBECONFIG=... cargo test -p rkcm-ttlafterfinished --test apiserver -- --ignored`.

#[path = "apiserver/basics.rs"]
mod basics;
#[path = "apiserver/edits.rs"]
mod edits;
#[path = "apiserver/harness.rs"]
mod harness;
#[path = "apiserver/lifecycle.rs"]
mod lifecycle;
