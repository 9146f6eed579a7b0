//! Durable storage of a node.
//!
//! - [`log`]: the node-wide write-ahead log that holds the Raft log (entries, vote, committed
//!   index, purge marks) of every Raft group on this node, with group commit (many groups share
//!   one fsync), CRC-checked records and torn-tail recovery. One [`log::LogEngine`] per node.
//!
//! The sled state-machine trees (stream messages, consumer state) will live beside it; they may
//! lag the log because the log, not sled, is the durable source of truth until sled has been
//! really synced (see DESIGN.md, "Durable before acknowledged").

pub mod log;
