//! Durable storage of a node.
//!
//! - [`log`]: the node-wide write-ahead log that holds the Raft log (entries, vote, committed
//!   index, purge marks) of every Raft group on this node, with group commit (many groups share
//!   one fsync), CRC-checked records and torn-tail recovery. One [`log::LogEngine`] per node.
//!
//! The state machines are not here: they live in sled, one database per node opened by
//! `consensus::state_db` (which also forces the real sync sled 0.34 lacks), written behind the
//! apply by `consensus::state_writer`, with the stream group's key layout in
//! `jetstream::stream_machine` and the meta group's in `jetstream::meta`. sled may lag this log:
//! the log, not sled, is the durable source of truth, and it is purged only up to what sled has
//! really synced (see DESIGN.md, "Durable before acknowledged").

pub mod log;
