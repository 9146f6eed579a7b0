//! [`GrpcTransport`]: the node's [`PeerTransport`] over gRPC. One per node; every Raft group
//! of the node sends through it, and every peer has one shared channel ([`Channels`]), so
//! RPCs of all groups to one peer are multiplexed on one HTTP/2 connection (DESIGN.md), and
//! appends, heartbeats and votes on one stream of it ([`RaftLinks`]).
//!
//! openraft's own types travel as versioned postcard (`consensus::raft_codec`) inside the
//! protobuf envelope; the envelope carries the group id. A peer that cannot be reached, or that
//! does not host the group yet, is reported to openraft as `Unreachable`, which makes it back
//! off and retry; a Raft-level error of the remote handler comes back as `RemoteError`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::RPCOption;
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tonic::transport::{Channel, Endpoint};

use super::peers::PeerTable;
use super::proto::{self, cluster_client::ClusterClient, raft_reply, RaftKind};
use super::raft_link::RaftLinks;
use crate::consensus::network::{unreachable_error, RpcError, RpcFuture};
use crate::consensus::raft_codec;
use crate::consensus::{
    ForwardError, GroupId, Node, NodeId, PeerTransport, Proposal, ProposeError, Response,
    TypeConfig,
};

/// Largest gRPC message either way: a snapshot chunk (4 MiB) or an append batch, with room.
pub const MAX_MESSAGE: usize = 64 << 20;

/// HTTP/2 flow-control windows of the cluster's gRPC connections, both ways (the client
/// channels here, the server in `ClusterNode::start`). h2's default of 64 KiB is smaller than
/// one AppendEntries of a publish burst (256 messages of 128 B are ~45 KiB, and every group
/// shares the connection's window), so the sender stalled for WINDOW_UPDATEs: measured on a
/// 3-node R3 cluster, an AppendEntries round trip took 6 ms against a 0.9 ms handler on the
/// follower; with these windows 2 ms, and async publishes went from ~30k to ~47k msgs/s.
pub const STREAM_WINDOW: u32 = 4 << 20;
pub const CONNECTION_WINDOW: u32 = 16 << 20;

/// How many requests a peer may cancel before the server has accepted them, on one
/// connection, before h2 takes it for a reset flood and closes the connection (h2's default:
/// 20). Raft RPCs time out (appends after 100 ms) and are cancelled in numbers when a node is
/// busy: measured with 1000 R3 streams on a loaded machine, the default closed the peer's
/// connection ("remotely-reset pending-accept streams reached limit") hundreds of times,
/// taking every group's heartbeats, the meta group and the route down with it. The peers are
/// this cluster's own nodes, not an untrusted client. Since the appends, heartbeats and votes
/// travel on one `RaftLink` stream per peer (ADR 0011's addendum) only the unary calls left
/// (pings, snapshot chunks, forwarded proposals) can be cancelled this way; the bound stays.
pub const MAX_PENDING_RESETS: usize = 100_000;

/// One lazily connected channel per peer address, shared by everything that talks to it
/// (Raft RPCs of all groups, forwarded proposals, the route). tonic reconnects a broken
/// channel by itself on the next call.
#[derive(Clone, Debug, Default)]
pub struct Channels {
    clients: Arc<parking_lot::Mutex<HashMap<String, ClusterClient<Channel>>>>,
}

impl Channels {
    /// The client for the node at `addr` (`host:port`).
    pub fn client(&self, addr: &str) -> Result<ClusterClient<Channel>, String> {
        let mut clients = self.clients.lock();
        if let Some(client) = clients.get(addr) {
            return Ok(client.clone());
        }
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .map_err(|e| format!("bad peer address {addr}: {e}"))?
            .connect_timeout(Duration::from_millis(500))
            .tcp_nodelay(true)
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            .http2_keep_alive_interval(Duration::from_secs(1))
            .keep_alive_timeout(Duration::from_secs(3))
            .keep_alive_while_idle(true);
        let client = ClusterClient::new(endpoint.connect_lazy())
            .max_decoding_message_size(MAX_MESSAGE)
            .max_encoding_message_size(MAX_MESSAGE);
        clients.insert(addr.to_string(), client.clone());
        Ok(client)
    }
}

/// The gRPC [`PeerTransport`]. See the module docs.
#[derive(Clone, Debug)]
pub struct GrpcTransport {
    local: NodeId,
    channels: Channels,
    links: RaftLinks,
    peers: Arc<parking_lot::RwLock<PeerTable>>,
}

impl GrpcTransport {
    pub fn new(
        local: NodeId,
        channels: Channels,
        links: RaftLinks,
        peers: Arc<parking_lot::RwLock<PeerTable>>,
    ) -> Self {
        GrpcTransport {
            local,
            channels,
            links,
            peers,
        }
    }

    /// Where `target` is reached from this node: its route address in the peer table (the
    /// address in a group's membership is whatever the node that created the group saw).
    fn addr_of(&self, target: NodeId, node: &Node) -> String {
        self.peers
            .read()
            .get(target)
            .map_or_else(|| node.addr.clone(), |peer| peer.cluster_addr.clone())
    }

    fn client_for(&self, target: NodeId, node: &Node) -> Result<ClusterClient<Channel>, String> {
        self.channels.client(&self.addr_of(target, node))
    }

    /// One Raft RPC: appends and votes on the peer's [`RaftLink`](super::raft_link::RaftLink),
    /// snapshot chunks (megabytes each, which would hold up every group's heartbeats on the
    /// link) as a `Raft` call of their own.
    fn call<Req, Resp, E>(
        &self,
        kind: RaftKind,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: Req,
        option: RPCOption,
    ) -> RpcFuture<Resp, RPCError<NodeId, Node, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned + Send + 'static,
        E: std::error::Error + DeserializeOwned + Send + 'static,
    {
        let request = proto::RaftRequest {
            group,
            from: self.local,
            kind: kind as i32,
            payload: raft_codec::encode(&rpc).to_vec(),
        };
        let addr = self.addr_of(target, &node);
        let client = self.channels.client(&addr);
        let link = match (kind, &client) {
            (RaftKind::InstallSnapshot, _) | (_, Err(_)) => None,
            (_, Ok(client)) => Some(self.links.link(&addr, client.clone())),
        };
        let ttl = option.hard_ttl();
        Box::pin(async move {
            let reply = match link {
                Some(link) => link
                    .call(request, ttl)
                    .await
                    .map_err(|e| unreachable_error(e.to_string()))?,
                None => {
                    let mut client = client.map_err(|e| unreachable_error(&e))?;
                    let mut request = tonic::Request::new(request);
                    request.set_timeout(ttl);
                    client
                        .raft(request)
                        .await
                        .map_err(|status| unreachable_error(status.to_string()))?
                        .into_inner()
                }
            };
            match reply.result {
                Some(raft_reply::Result::Outcome(bytes)) => {
                    let outcome: Result<Resp, RaftError<NodeId, E>> = raft_codec::decode(&bytes)
                        .map_err(|e| {
                            RPCError::Network(NetworkError::new(&std::io::Error::other(format!(
                                "undecodable raft reply: {e}"
                            ))))
                        })?;
                    outcome.map_err(|error| {
                        RPCError::RemoteError(RemoteError::new_with_node(target, node, error))
                    })
                }
                Some(raft_reply::Result::Unavailable(why)) => Err(unreachable_error(&why)),
                None => Err(unreachable_error("empty raft reply")),
            }
        })
    }
}

impl PeerTransport for GrpcTransport {
    fn append_entries(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcFuture<AppendEntriesResponse<NodeId>, RpcError> {
        self.call(RaftKind::AppendEntries, group, target, node, rpc, option)
    }

    fn vote(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcFuture<VoteResponse<NodeId>, RpcError> {
        self.call(RaftKind::Vote, group, target, node, rpc, option)
    }

    fn install_snapshot(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcFuture<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.call(RaftKind::InstallSnapshot, group, target, node, rpc, option)
    }

    fn forward_proposal(
        &self,
        group: GroupId,
        target: NodeId,
        node: Node,
        proposal: Proposal,
        hops: u32,
    ) -> RpcFuture<Vec<Response>, ProposeError> {
        let client = self.client_for(target, &node);
        Box::pin(async move {
            let mut client = client.map_err(ForwardError::NoChannel)?;
            let mut request = tonic::Request::new(proto::ProposeRequest {
                group,
                proposal: raft_codec::encode(&proposal).to_vec(),
                hops,
            });
            request.set_timeout(FORWARD_TIMEOUT);
            let reply = client
                .propose(request)
                .await
                .map_err(|status| ForwardError::Rpc(status.to_string()))?
                .into_inner();
            match reply.result {
                Some(proto::propose_reply::Result::Responses(bytes)) => raft_codec::decode(&bytes)
                    .map_err(|e| ForwardError::UndecodableReply(e.to_string()).into()),
                Some(proto::propose_reply::Result::Error(why)) => {
                    Err(ForwardError::Refused(why).into())
                }
                None => Err(ForwardError::EmptyReply.into()),
            }
        })
    }
}

/// How long a forwarded proposal may take (commit on a quorum, including an fsync each).
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(10);
