//! Rolling updates, partition, OnDelete, maxUnavailable, rollback and history (§9 16, 17,
//! 18, 19, 21, 22).
