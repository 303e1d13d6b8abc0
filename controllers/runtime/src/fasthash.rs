//! Hash maps for keys that are looked up many times per sync (object keys, node names).
//!
//! The standard maps hash with SipHash, built to resist collision floods from untrusted
//! input; here every key is a name of a cluster object that only authorised clients can
//! create, and the cost of SipHash showed in profiles of syncs that look up a thousand
//! nodes or pods. These use foldhash, seeded per process.

pub use foldhash::{HashMap, HashSet};
