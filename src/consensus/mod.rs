//! Consensus: every stream (and the meta layer) is its own openraft group.
//!
//! One code path for one node and a cluster: an R1 stream is a group with one voter. What lives
//! here, bottom up:
//!
//! - [`types`]: the openraft type configuration ([`TypeConfig`]) and the opaque [`Command`] /
//!   [`Response`] payloads that the layers above encode (the stream and meta group machines,
//!   `jetstream::payload`).
//! - [`raft_codec`]: the versioned encodings of openraft's values: everything consensus writes
//!   to disk, and the Raft RPCs and forwarded proposals the cluster transport carries.
//! - [`log_store`]: openraft's `RaftLogStorage` for one group over the node-wide write-ahead log
//!   ([`crate::store::log::LogEngine`]): entries, vote, committed and purge marks. A follower's
//!   entries are durable (fsynced, group-committed with every other group) before openraft is
//!   told so, a leader's own entries once written; [`log_store::Durable`] follows the fsyncs.
//! - [`machine`]: the [`GroupMachine`] trait that the application state machines implement, and
//!   the transaction/view they get over their slice of sled.
//! - [`state_writer`]: the node's write-behind queue into sled, which gathers batches for a
//!   few milliseconds (`write_queue.rs`); `file_sync.rs` syncs the segment files a merged
//!   batch points into, several at once.
//! - [`state_db`]: the node's sled database ([`StateDb`]), the key layout of the groups in it, and
//!   the real fsync that sled 0.34's `flush()` does not do.
//! - [`snapshot`]: snapshot files (a CRC-checked dump of one group's sled keys, written when
//!   one is sent to a follower) and the per-group snapshot directory.
//! - [`state_machine`]: openraft's `RaftStateMachine` for one group: applies committed entries
//!   to sled through its [`GroupMachine`], atomically with the applied log id; snapshots in
//!   place (sled synced, ADR 0014), dumps one to send, installs one received; restores from
//!   the snapshot file when sled is behind it after a crash (`restore.rs`).
//! - [`compactor`]: the node's [`compactor::Compactor`]: one task that snapshots and purges each
//!   group's log once it grew, state was removed, or the group went idle, and lets sled give
//!   removed space back.
//! - [`network`]: openraft's network factory over a [`PeerTransport`]: [`NoPeers`] on a single
//!   node, `cluster::GrpcTransport` in a cluster.
//! - [`commit_hold`]: commit-only heartbeats held back for the next append.
//! - [`group`]: [`RaftGroup`], one running group: start (who initializes a new group:
//!   [`Bootstrap`]), propose, shut down.
//! - [`error`]: [`StartError`] and [`ProposeError`], a typed variant per cause.
//! - [`leadership`]: whether a replica serves as leader, with the lost-quorum rule.
//! - [`batcher`]: packs concurrent proposals to one group into shared Raft entries.
//! - [`gather`]: the gather rule ("while bursty, until quiet") of the batcher and the stream
//!   ingest.
//! - [`pacer`]: the node's [`pacer::Pacer`]: one task that sends every active group's
//!   heartbeats and starts its elections (openraft's own timers are off), lets idle groups go
//!   quiet, and keeps the node liveness that quiet groups serve and fail over by.
//! - [`registry`]: [`GroupRegistry`], the node's groups by id.
//! - [`node_storage`]: [`NodeStorage`], the storage every group of a node shares; a store that
//!   cannot be opened is moved aside ([`quarantine`]) on a node whose groups have peers.
//! - [`watchdog`]: a step that should be quick and is not (a group's stop, a stream's removal)
//!   logs where it waits.
//! - [`amnesia`]: the groups that lost their state here and may not vote or campaign until
//!   they caught up with a leader (ADR 0015).
//!
//! Durability chain (DESIGN.md, "durable before acknowledged"): a proposal is acknowledged after
//! openraft applied it, which happens only after a quorum holds its entry (followers count once
//! they fsynced it), and after the leader's own fsync of it (the batcher waits for
//! [`log_store::Durable`]). sled may
//! lag (its `flush()` does not fsync); the log is purged only up to a snapshot, and a snapshot is
//! reported to openraft only after sled was really synced (see [`state_db`]), so after a crash
//! sled always covers everything the log no longer has.

// openraft's `StorageError` is the error type its storage traits require, and it is large;
// boxing it at every internal helper would only add allocations on error paths.
#![allow(clippy::result_large_err)]

pub mod amnesia;
pub mod batcher;
pub mod commit_hold;
pub mod compactor;
pub mod damage;
pub mod error;
mod file_sync;
mod fine_pause;
pub mod gather;
pub mod group;
pub mod leadership;
pub mod log_budget;
pub mod log_growth;
mod log_position;
pub mod log_store;
pub mod machine;
pub mod network;
pub mod node_storage;
pub mod pacer;
pub mod quarantine;
pub mod raft_codec;
pub mod registry;
pub(crate) mod restore;
pub mod snapshot;
mod snapshot_dir;
pub mod state_db;
pub mod state_machine;
pub mod state_writer;
mod sync_gate;
pub mod types;
pub mod watchdog;
mod write_queue;

#[cfg(test)]
mod tests;

pub use error::{ForwardError, ProposeError, StartError};
pub use group::{Bootstrap, GroupOptions, RaftGroup};
pub use log_store::GroupLogStore;
pub use machine::{GroupMachine, MachineError, MachineTxn, MachineView};
pub use network::{GroupNetworkFactory, NoPeers, PeerTransport};
pub use node_storage::NodeStorage;
pub use registry::GroupRegistry;
pub use state_db::StateDb;
pub use state_machine::GroupStateMachine;
pub use state_writer::WriteTicket;
pub use types::{
    Command, GroupId, Node, NodeId, Proposal, ProposalResponse, Response, TypeConfig,
    SINGLE_NODE_ID,
};
