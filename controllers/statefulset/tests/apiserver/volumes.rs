//! Volume claims and their retention policy (§9 11, 13, 14, 15).
