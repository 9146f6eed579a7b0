//! The Raft network of a group: openraft's `RaftNetworkFactory` / `RaftNetwork` (0.9, v1)
//! implemented once, over a node-wide [`PeerTransport`] that carries the group id with every
//! RPC (DESIGN.md: all groups share one channel per peer).
//!
//! - [`NoPeers`]: the transport of a single node: every peer is unreachable. A single-voter group
//!   never sends an RPC, so this is all a one-node broker needs.
//! - `cluster::GrpcTransport` implements [`PeerTransport`] over tonic: one channel per peer,
//!   RPCs tagged with the group id, and on the receiving node a dispatcher that looks the group
//!   up in the [`GroupRegistry`](super::GroupRegistry) and calls `Raft::append_entries` /
//!   `vote` / `install_snapshot` on it.
//! - [`GroupNetwork`] holds commit-only heartbeats back for the next append
//!   ([`super::commit_hold`]).
//!
//! Snapshots go through the chunked `install_snapshot` RPC: openraft 0.9's default
//! `full_snapshot` reads the snapshot file in `snapshot_max_chunk_size` pieces.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use parking_lot::Mutex;

use super::amnesia::{AmnesiacPeers, VOTE_REFUSED_AMNESIAC};
use super::commit_hold::{self, CommitHold, Plan, Sent};
use super::error::ProposeError;
use super::types::{GroupId, Node, NodeId, Proposal, Response, TypeConfig};

/// A boxed, sendable RPC future.
pub type RpcFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'static>>;

/// Error of an RPC whose remote handler returns `RaftError<NodeId, E>`.
pub type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, Node, RaftError<NodeId, E>>;

/// Node-wide carrier of Raft RPCs to peers, for all groups. One per node.
pub trait PeerTransport: Send + Sync + 'static {
    fn append_entries(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcFuture<AppendEntriesResponse<NodeId>, RpcError>;

    fn vote(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcFuture<VoteResponse<NodeId>, RpcError>;

    fn install_snapshot(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcFuture<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>>;

    /// Hands `proposal` to `target`, believed to lead `group`, which applies it and returns the
    /// responses. `hops` counts earlier forwards (the receiver stops forwarding at a bound). A
    /// transport without peers cannot forward.
    fn forward_proposal(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        proposal: Proposal,
        hops: u32,
    ) -> RpcFuture<Vec<Response>, ProposeError> {
        let _ = (group, node, proposal, hops);
        Box::pin(std::future::ready(Err(ProposeError::NotLeader {
            leader: Some(target),
            leader_node: None,
        })))
    }
}

/// The transport of a node without peers: every RPC fails with `Unreachable`.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoPeers;

/// The error a transport reports for a peer it cannot reach (openraft backs off and retries).
pub fn unreachable_error<E: std::error::Error>(
    why: impl Into<String>,
) -> RPCError<NodeId, Node, E> {
    let error = io::Error::new(io::ErrorKind::NotConnected, why.into());
    RPCError::Unreachable(Unreachable::new(&error))
}

fn unreachable<T: Send + 'static, E: std::error::Error + Send + 'static>(
    target: NodeId,
) -> RpcFuture<T, RPCError<NodeId, Node, RaftError<NodeId, E>>> {
    let why = format!("no transport to node {target}: this node runs without peers");
    Box::pin(std::future::ready(Err(unreachable_error(why))))
}

impl PeerTransport for NoPeers {
    fn append_entries(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcFuture<AppendEntriesResponse<NodeId>, RpcError> {
        unreachable(target)
    }

    fn vote(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        _rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> RpcFuture<VoteResponse<NodeId>, RpcError> {
        unreachable(target)
    }

    fn install_snapshot(
        &self,
        _group: GroupId,
        target: NodeId,
        _node: Node,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> RpcFuture<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        unreachable(target)
    }
}

/// openraft's network factory for one group: hands out [`GroupNetwork`] clients that tag every
/// RPC with the group id.
#[derive(Clone)]
pub struct GroupNetworkFactory {
    group: GroupId,
    transport: Arc<dyn PeerTransport>,
    amnesiac_peers: Arc<AmnesiacPeers>,
}

impl GroupNetworkFactory {
    pub fn new(
        group: GroupId,
        transport: Arc<dyn PeerTransport>,
        amnesiac_peers: Arc<AmnesiacPeers>,
    ) -> Self {
        GroupNetworkFactory {
            group,
            transport,
            amnesiac_peers,
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for GroupNetworkFactory {
    type Network = GroupNetwork;

    async fn new_client(&mut self, target: NodeId, node: &Node) -> GroupNetwork {
        GroupNetwork {
            group: self.group,
            target,
            node: node.clone(),
            transport: self.transport.clone(),
            hold: Arc::default(),
            amnesiac_peers: self.amnesiac_peers.clone(),
        }
    }
}

/// The connection of one group to one peer (openraft's `RaftNetwork`). Commit-only
/// heartbeats are held back for the next append ([`commit_hold`]).
pub struct GroupNetwork {
    group: GroupId,
    target: NodeId,
    node: Node,
    transport: Arc<dyn PeerTransport>,
    hold: Arc<Mutex<CommitHold>>,
    /// Peers that refused this node's vote requests as amnesiac (ADR 0018).
    amnesiac_peers: Arc<AmnesiacPeers>,
}

impl GroupNetwork {
    /// Sends `rpc` to the peer and records its answer in `hold`.
    async fn send(
        transport: &dyn PeerTransport,
        hold: &Mutex<CommitHold>,
        (group, target, node): (GroupId, NodeId, Node),
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        let sent = Sent::of(&rpc);
        let answer = transport
            .append_entries(group, target, node, rpc, option)
            .await;
        hold.lock()
            .answered(sent, answer.as_ref().ok(), Instant::now());
        answer
    }

    /// Sends `rpc` after [`commit_hold::HOLD`] unless another request to the peer went first.
    fn send_later(&self, ticket: u64, rpc: AppendEntriesRequest<TypeConfig>, option: RPCOption) {
        let to = (self.group, self.target, self.node.clone());
        let (transport, hold) = (self.transport.clone(), self.hold.clone());
        tokio::spawn(async move {
            tokio::time::sleep(commit_hold::HOLD).await;
            if hold.lock().still_held(ticket, &rpc) {
                let _ = Self::send(&*transport, &hold, to, rpc, option).await;
            }
        });
    }
}

/// How long an append with entries may take before it counts as failed (see
/// `append_entries`). A follower that is down costs its replication stream this long per
/// try; its liveness is the node pings' business (ADR 0013), not this timeout's.
const ENTRIES_TIMEOUT: Duration = Duration::from_secs(1);

impl RaftNetwork<TypeConfig> for GroupNetwork {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        // openraft times an append out after its heartbeat period, which is a day here (its
        // timers are off: `group.rs`). A heartbeat keeps the pacer's period; an append that
        // carries entries gets longer: a batch of megabytes on a loaded node can take more
        // than 100 ms, and a timed-out append is sent again whole after a backoff, so a
        // follower could fall behind for as long as the load lasts.
        let limit = if rpc.entries.is_empty() {
            super::pacer::decide::HEARTBEAT
        } else {
            ENTRIES_TIMEOUT
        };
        let option = RPCOption::new(option.hard_ttl().min(limit));
        if let Plan::Hold { ticket } = self.hold.lock().plan(&rpc, Instant::now()) {
            self.send_later(ticket, rpc, option);
            return Ok(AppendEntriesResponse::Success);
        }
        let to = (self.group, self.target, self.node.clone());
        Self::send(&*self.transport, &self.hold, to, rpc, option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.transport
            .install_snapshot(self.group, self.target, self.node.clone(), rpc, option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        let answer = self
            .transport
            .vote(self.group, self.target, self.node.clone(), rpc, option)
            .await;
        let amnesiac = match &answer {
            Ok(_) => Some(false),
            Err(e) => e
                .to_string()
                .contains(VOTE_REFUSED_AMNESIAC)
                .then_some(true),
        };
        if let Some(amnesiac) = amnesiac {
            self.amnesiac_peers
                .answered(self.target, amnesiac, Instant::now());
        }
        answer
    }
}
