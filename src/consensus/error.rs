//! The errors of running a group: [`StartError`] (starting or stopping one) and
//! [`ProposeError`] (a proposal that was not applied), with a typed variant per cause.
//!
//! Callers above consensus mostly need one distinction — "not the leader" (retry elsewhere)
//! against everything else (the group cannot take the proposal now; JetStream answers 10008) —
//! but the log and the tests need to know which cause it was, so no cause travels as text
//! alone. Whether a failed proposal was applied is unknown for every variant but
//! [`ProposeError::NotLeader`] and [`ProposeError::Rejected`].

use std::time::Duration;

use openraft::error::{ClientWriteError, Fatal, InitializeError, RaftError};

use super::types::{GroupId, Node, NodeId, StorageError};

/// Starting (or stopping) a group failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("group storage: {0}")]
    Storage(#[from] StorageError),
    /// openraft stopped (or could not start) the group's core.
    #[error("raft: {0}")]
    Raft(#[from] Fatal<NodeId>),
    /// Initializing a new group's membership failed for another reason than "already done".
    #[error("raft: {0}")]
    Initialize(#[from] RaftError<NodeId, InitializeError<NodeId, Node>>),
    /// The group's core task ended abnormally while shutting down.
    #[error("raft: {0}")]
    Shutdown(#[from] tokio::task::JoinError),
    /// The group lost its state here to corruption and has no other voter to be rebuilt from
    /// (ADR 0015); its damaged data is in the store's quarantine directory.
    #[error("group {group} lost its state to corruption and has no replica to rebuild it from (damaged data kept under quarantine/)")]
    Amnesiac { group: GroupId },
    #[error("group {group} elected no leader within {waited:?}")]
    NoLeader { group: GroupId, waited: Duration },
}

/// A proposal was not applied (or whether it was is unknown).
#[derive(Clone, Debug, thiserror::Error)]
pub enum ProposeError {
    /// This replica is not the leader; send the proposal to `leader` if known.
    #[error("not the leader (leader: {leader:?})")]
    NotLeader {
        leader: Option<NodeId>,
        leader_node: Option<Node>,
    },
    /// openraft refused the write (not applied).
    #[error("proposal rejected: {0}")]
    Rejected(String),
    /// The state machine answered fewer commands than the entry held (a machine bug).
    #[error(
        "proposal rejected: state machine returned {answered} responses for {commands} commands"
    )]
    MissingResponses { commands: usize, answered: usize },
    /// The group's core stopped: shut down, or a fatal (storage) error.
    #[error("group stopped: {0}")]
    Fatal(Fatal<NodeId>),
    /// The group's core dropped the proposal without answering (it is stopping).
    #[error("group stopped: raft core dropped the proposal")]
    Dropped,
    /// The group's proposal batcher has ended (the group was shut down).
    #[error("group stopped: proposal batcher stopped")]
    BatcherStopped,
    /// The entry was committed but this node's own write of it failed.
    #[error("group stopped: the log write failed")]
    LogWriteFailed,
    /// Forwarding the proposal to the leader failed.
    #[error("group stopped: {0}")]
    Forward(#[from] ForwardError),
}

/// Why a proposal forwarded to the leader (`PeerTransport::forward_proposal`) failed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ForwardError {
    /// No channel to the leader could be made (its address is not usable).
    #[error("{0}")]
    NoChannel(String),
    /// The RPC failed (the transport's status, as text: consensus knows no transport).
    #[error("forwarding failed: {0}")]
    Rpc(String),
    /// The leader's answer did not decode.
    #[error("undecodable responses: {0}")]
    UndecodableReply(String),
    /// The leader (or the node forwarded to) refused the proposal, saying why.
    #[error("{0}")]
    Refused(String),
    /// The leader's answer held neither responses nor an error.
    #[error("empty propose reply")]
    EmptyReply,
}

impl From<RaftError<NodeId, ClientWriteError<NodeId, Node>>> for ProposeError {
    fn from(error: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> Self {
        match error {
            RaftError::APIError(ClientWriteError::ForwardToLeader(forward)) => {
                ProposeError::NotLeader {
                    leader: forward.leader_id,
                    leader_node: forward.leader_node,
                }
            }
            RaftError::APIError(other) => ProposeError::Rejected(other.to_string()),
            RaftError::Fatal(fatal) => ProposeError::Fatal(fatal),
        }
    }
}
