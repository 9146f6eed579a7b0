//! The openraft type configuration of every jetraft Raft group, and the payloads it carries.
//!
//! Consensus does not know what a stream or a consumer is: a [`Command`] is an opaque, tagged
//! byte payload whose format is owned by the layer above (jscore's stream and meta command
//! encodings), and a [`Response`] is opaque bytes that the group's [`GroupMachine`] returns for
//! it. One Raft entry carries a [`Proposal`] of one or more commands (the leader may batch many
//! publishes or acks into one entry); its [`ProposalResponse`] holds one response per command.
//!
//! [`GroupMachine`]: super::machine::GroupMachine

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::snapshot::SnapshotFile;

/// Id of a node (a Raft voter or learner). Never reuse a removed node's id.
pub type NodeId = u64;

/// The id of a node running without a cluster (a cluster of one). Fixed: it is in the logs of
/// every group such a node ran, and in its meta state (`v1` stream keys and the old
/// `CreateStream` command place streams on it).
pub const SINGLE_NODE_ID: NodeId = 1;

/// Id of a Raft group on a node: the meta group or one stream. The log engine keys a group's
/// log by it, sled keys its state by it.
pub type GroupId = u64;

/// Address book entry of a node. `addr` is the node's cluster (gRPC) address.
pub type Node = openraft::BasicNode;

/// A command proposed to a group.
///
/// `kind` names the format of `payload` (for example "stream command, version 1"); kinds are
/// owned by the layer that defines them and are append-only: never reuse or renumber one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub kind: u16,
    pub payload: Bytes,
}

impl Command {
    pub fn new(kind: u16, payload: impl Into<Bytes>) -> Self {
        Command {
            kind,
            payload: payload.into(),
        }
    }
}

/// What applying one [`Command`] returned: opaque bytes, decoded by whoever proposed it.
/// Domain failures (a wrong expected sequence, a duplicate) are responses, not errors: they are
/// deterministic outcomes of the replicated state machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    pub payload: Bytes,
}

impl Response {
    pub fn new(payload: impl Into<Bytes>) -> Self {
        Response {
            payload: payload.into(),
        }
    }
}

/// The application data of one Raft entry: commands applied in order at the entry's index.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    pub commands: Vec<Command>,
}

/// The result of applying one entry: one response per command of its [`Proposal`]; empty for
/// blank and membership entries.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProposalResponse {
    pub responses: Vec<Response>,
}

openraft::declare_raft_types!(
    /// The openraft type configuration shared by all groups (meta and streams).
    pub TypeConfig:
        D = Proposal,
        R = ProposalResponse,
        NodeId = NodeId,
        Node = Node,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
        Responder = openraft::impls::OneshotResponder<TypeConfig>,
);

/// Shorthands for openraft types instantiated with [`TypeConfig`].
pub type Entry = openraft::Entry<TypeConfig>;
pub type LogId = openraft::LogId<NodeId>;
pub type Vote = openraft::Vote<NodeId>;
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
pub type Snapshot = openraft::Snapshot<TypeConfig>;
pub type StorageError = openraft::StorageError<NodeId>;
pub type Raft = openraft::Raft<TypeConfig>;
