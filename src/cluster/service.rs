//! [`ClusterService`]: the receiving side of the node-to-node protocol (`proto/cluster.proto`),
//! served by tonic on the node's cluster address. One per node.
//!
//! - `Hello`: this node's identity; refuses a caller from another cluster.
//! - `Raft`: looks the group up in the node's `GroupRegistry` and hands the RPC to its openraft
//!   instance. A group not (yet) running here — the node has not reconciled the meta entry that
//!   creates it — answers `unavailable`, which the sender treats as unreachable and retries.
//!   A vote request first waits a little for the group to start (`VOTE_WAITS_FOR_GROUP`).
//! - `Ping`: node liveness, and the quiet groups the caller leads (`liveness`).
//! - `Propose`: a proposal forwarded by a follower; applied here if this node leads the group,
//!   forwarded once more if it knows a newer leader.
//! - `Route`: the calling node's core-NATS route (see `route`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use tonic::{Request, Response, Status, Streaming};

use super::proto::{self, cluster_server::Cluster, raft_reply, RaftKind};
use super::ClusterNode;
use crate::consensus::{pacer, raft_codec, GroupId, Proposal, RaftGroup, TypeConfig};

/// How long a vote request for a group that does not run here waits for it to start. The first
/// replica of a new stream asks for votes as soon as it has started the group (`Bootstrap`),
/// and the other replicas start theirs when the stream's meta entry reaches them, usually a few
/// milliseconds later; answering `unavailable` at once would fail that election, and the next
/// comes an election timeout later. Below openraft's vote timeout (the election timeout's
/// minimum, 300 ms).
const VOTE_WAITS_FOR_GROUP: Duration = Duration::from_millis(200);
/// How often a waiting vote request looks for the group.
const GROUP_POLL: Duration = Duration::from_millis(5);
/// The longest an `Applied` request waits, whatever it asks.
const MAX_APPLIED_WAIT: Duration = Duration::from_secs(5);

/// See the module docs.
#[derive(Clone)]
pub struct ClusterService {
    node: Arc<ClusterNode>,
}

impl ClusterService {
    pub fn new(node: Arc<ClusterNode>) -> Self {
        ClusterService { node }
    }

    /// The running group `id`, waiting up to `wait` for it to start.
    async fn group_within(&self, id: GroupId, wait: Duration) -> Option<Arc<RaftGroup>> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(group) = self.node.group(id) {
                return Some(group);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(GROUP_POLL).await;
        }
    }
}

fn unavailable(why: impl Into<String>) -> Response<proto::RaftReply> {
    Response::new(proto::RaftReply {
        result: Some(raft_reply::Result::Unavailable(why.into())),
    })
}

fn outcome<T: serde::Serialize>(value: &T) -> Response<proto::RaftReply> {
    Response::new(proto::RaftReply {
        result: Some(raft_reply::Result::Outcome(
            raft_codec::encode(value).to_vec(),
        )),
    })
}

fn malformed(e: impl std::fmt::Display) -> Status {
    Status::invalid_argument(format!("malformed raft payload: {e}"))
}

// tonic's `Status` is what its generated trait returns; it is large by design.
#[allow(clippy::result_large_err)]
#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn hello(
        &self,
        request: Request<proto::HelloRequest>,
    ) -> Result<Response<proto::HelloReply>, Status> {
        let local = self.node.node_info();
        if let Some(caller) = request.into_inner().node {
            if caller.cluster_name != local.cluster_name {
                return Err(Status::failed_precondition(format!(
                    "cluster name mismatch: this node is in '{}', the caller in '{}'",
                    local.cluster_name, caller.cluster_name
                )));
            }
            self.node
                .learn_client_url(caller.node_id, &caller.client_url);
        }
        Ok(Response::new(proto::HelloReply { node: Some(local) }))
    }

    async fn raft(
        &self,
        request: Request<proto::RaftRequest>,
    ) -> Result<Response<proto::RaftReply>, Status> {
        let request = request.into_inner();
        let kind = RaftKind::try_from(request.kind)
            .map_err(|_| Status::invalid_argument("unknown raft rpc kind"))?;
        let wait = match kind {
            RaftKind::Vote => VOTE_WAITS_FOR_GROUP,
            _ => Duration::ZERO,
        };
        let Some(group) = self.group_within(request.group, wait).await else {
            return Ok(unavailable(format!(
                "group {} does not run on this node",
                request.group
            )));
        };
        let raft = group.raft();
        Ok(match kind {
            RaftKind::AppendEntries => {
                let rpc: AppendEntriesRequest<TypeConfig> =
                    raft_codec::decode(&request.payload).map_err(malformed)?;
                group.signals().heard_leader(Instant::now());
                outcome(&raft.append_entries(rpc).await)
            }
            RaftKind::Vote => {
                let rpc: VoteRequest<u64> =
                    raft_codec::decode(&request.payload).map_err(malformed)?;
                let candidate = rpc.vote.leader_id().voted_for();
                // A replica that lost its log and vote to corruption grants no vote until it
                // caught up with a leader (ADR 0015).
                if group.signals().is_amnesiac() {
                    return Ok(unavailable(format!(
                        "{} (group {})",
                        crate::consensus::amnesia::VOTE_REFUSED_AMNESIAC,
                        request.group
                    )));
                }
                let refused = match candidate {
                    Some(c) => {
                        group
                            .pacer()
                            .refuses_vote_within(request.group, c, pacer::VOTE_WAIT)
                            .await
                    }
                    None => false,
                };
                if refused {
                    return Ok(unavailable(format!(
                        "vote refused: group {} is quiet here and its leader is alive",
                        request.group
                    )));
                }
                group.signals().touch();
                outcome(&raft.vote(rpc).await)
            }
            RaftKind::InstallSnapshot => {
                let rpc: InstallSnapshotRequest<TypeConfig> =
                    raft_codec::decode(&request.payload).map_err(malformed)?;
                group.signals().heard_leader(Instant::now());
                outcome(&raft.install_snapshot(rpc).await)
            }
        })
    }

    async fn propose(
        &self,
        request: Request<proto::ProposeRequest>,
    ) -> Result<Response<proto::ProposeReply>, Status> {
        let request = request.into_inner();
        let reply = |result| -> Result<Response<proto::ProposeReply>, Status> {
            Ok(Response::new(proto::ProposeReply {
                result: Some(result),
            }))
        };
        let Some(group) = self.node.group(request.group) else {
            return reply(proto::propose_reply::Result::Error(format!(
                "group {} does not run on this node",
                request.group
            )));
        };
        let proposal: Proposal = raft_codec::decode(&request.proposal).map_err(malformed)?;
        match group
            .propose_all_forwarded(proposal.commands, request.hops)
            .await
        {
            Ok(responses) => reply(proto::propose_reply::Result::Responses(
                raft_codec::encode(&responses).to_vec(),
            )),
            Err(error) => reply(proto::propose_reply::Result::Error(error.to_string())),
        }
    }

    async fn elect(
        &self,
        request: Request<proto::ElectRequest>,
    ) -> Result<Response<proto::ElectReply>, Status> {
        let group_id = request.into_inner().group;
        let Some(group) = self.node.group(group_id) else {
            let error = format!("group {group_id} does not run on this node");
            return Ok(Response::new(proto::ElectReply { error }));
        };
        if group.signals().is_amnesiac() {
            let error = format!("group {group_id} is being rebuilt here: it may not stand yet");
            return Ok(Response::new(proto::ElectReply { error }));
        }
        // A stepdown of a quiet group: this replica is woken to stand.
        group.signals().touch();
        let error = match group.raft().trigger().elect().await {
            Ok(()) => String::new(),
            Err(fatal) => fatal.to_string(),
        };
        Ok(Response::new(proto::ElectReply { error }))
    }

    async fn ping(
        &self,
        request: Request<proto::PingRequest>,
    ) -> Result<Response<proto::PingReply>, Status> {
        let stale_groups = self.node.pinged(request.into_inner());
        Ok(Response::new(proto::PingReply { stale_groups }))
    }

    async fn applied(
        &self,
        request: Request<proto::AppliedRequest>,
    ) -> Result<Response<proto::AppliedReply>, Status> {
        let proto::AppliedRequest {
            group,
            index,
            wait_ms,
        } = request.into_inner();
        let wait = Duration::from_millis(u64::from(wait_ms)).min(MAX_APPLIED_WAIT);
        let Some(group) = self.node.group(group) else {
            return Ok(Response::new(proto::AppliedReply::default()));
        };
        let reached = group.wait_applied(index, wait).await;
        let applied = group.applied_index();
        Ok(Response::new(proto::AppliedReply { reached, applied }))
    }

    async fn route(
        &self,
        request: Request<Streaming<proto::RouteBatch>>,
    ) -> Result<Response<proto::RouteClosed>, Status> {
        self.node.serve_route(request.into_inner()).await
    }
}
