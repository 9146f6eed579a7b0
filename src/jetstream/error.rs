//! `JetStreamError`: why JetStream, or one of its groups, could not start.

use crate::consensus::node_storage::StorageOpenError;

#[derive(Debug, thiserror::Error)]
pub enum JetStreamError {
    #[error("cannot open the JetStream store: {0}")]
    Storage(#[from] StorageOpenError),
    #[error("cannot start group {group}: {message}")]
    Group { group: u64, message: String },
    #[error("raft group {group} is corrupt in the log")]
    Corrupt { group: u64 },
    /// The group's stored state is damaged here (ADR 0018) and it has no other replica to be
    /// rebuilt from; its data stays where it is.
    #[error("raft group {group} state is damaged: {reason}")]
    Damaged { group: u64, reason: String },
    #[error("storage task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}
