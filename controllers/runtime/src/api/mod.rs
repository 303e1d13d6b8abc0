//! The API client and what goes over it: the rate-limited client per controller, the writes
//! (create, status replace, patch, delete), the protobuf encoding, and the server's version.

pub mod client;
pub mod inflight;
pub mod protobuf;
pub mod server_version;
mod service;
pub mod write;
pub mod written;
