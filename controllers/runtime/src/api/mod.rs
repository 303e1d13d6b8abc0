//! The API client and what goes over it: the rate-limited client per controller, the writes
//! (create, status replace, patch, delete) and the protobuf encoding.

pub mod client;
pub mod protobuf;
pub mod write;
pub mod written;
