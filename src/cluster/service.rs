//! [`ClusterService`]: the receiving side of the node-to-node protocol (`proto/cluster.proto`),
//! served by tonic on the node's cluster address. One per node.
//!
//! - `Hello`: this node's identity; refuses a caller from another cluster.
//! - `RaftLink`, one stream per peer (`raft_link`), and `Raft`, which snapshots still use:
//!   each call looks the group up in the node's `GroupRegistry` and hands the RPC to its
//!   openraft instance. A group not (yet) running here — the node has not reconciled the meta entry that
//!   creates it — answers `unavailable`, which the sender treats as unreachable and retries.
//!   A vote request first waits a little for the group to start (`VOTE_WAITS_FOR_GROUP`).
//! - `Ping`: node liveness, and the quiet groups the caller leads (`liveness`).
//! - `Propose`: a proposal forwarded by a follower; applied here if this node leads the group,
//!   forwarded once more if it knows a newer leader.
//! - `Route`: the calling node's core-NATS route (see `route`).

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Stream;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use tokio::sync::mpsc;
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

    /// Reads a peer's `RaftLink` stream until it ends or this node shuts down, answering each
    /// call on a task of its own (as a unary call had): a slow group holds up no other.
    async fn serve_calls(
        self,
        mut calls: Streaming<proto::RaftCalls>,
        answers: mpsc::UnboundedSender<proto::RaftAnswer>,
    ) {
        let shutdown = self.node.shutdown.clone();
        loop {
            let batch = tokio::select! {
                _ = shutdown.cancelled() => return,
                batch = calls.message() => batch,
            };
            let Ok(Some(batch)) = batch else {
                return;
            };
            for call in batch.calls {
                let (service, answers) = (self.clone(), answers.clone());
                tokio::spawn(async move {
                    let reply = match call.request {
                        Some(request) => service.answer(request).await,
                        None => unavailable("a raft call without a request"),
                    };
                    let _ = answers.send(proto::RaftAnswer {
                        id: call.id,
                        reply: Some(reply),
                    });
                });
            }
        }
    }

    /// One Raft RPC of one group, from either `Raft` or `RaftLink`.
    async fn answer(&self, request: proto::RaftRequest) -> proto::RaftReply {
        let Ok(kind) = RaftKind::try_from(request.kind) else {
            return unavailable("unknown raft rpc kind");
        };
        let wait = match kind {
            RaftKind::Vote => VOTE_WAITS_FOR_GROUP,
            _ => Duration::ZERO,
        };
        let Some(group) = self.group_within(request.group, wait).await else {
            return unavailable(format!("group {} does not run on this node", request.group));
        };
        let raft = group.raft();
        match kind {
            RaftKind::AppendEntries => {
                let rpc: AppendEntriesRequest<TypeConfig> = match decode(&request.payload) {
                    Ok(rpc) => rpc,
                    Err(malformed) => return malformed,
                };
                group.signals().heard_leader(Instant::now());
                outcome(&raft.append_entries(rpc).await)
            }
            RaftKind::Vote => {
                let rpc: VoteRequest<u64> = match decode(&request.payload) {
                    Ok(rpc) => rpc,
                    Err(malformed) => return malformed,
                };
                let candidate = rpc.vote.leader_id().voted_for();
                // A replica that lost its log and vote to corruption grants no vote until it
                // caught up with a leader (ADR 0015).
                if group.signals().is_amnesiac() {
                    return unavailable(format!(
                        "{} (group {})",
                        crate::consensus::amnesia::VOTE_REFUSED_AMNESIAC,
                        request.group
                    ));
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
                    return unavailable(format!(
                        "vote refused: group {} is quiet here and its leader is alive",
                        request.group
                    ));
                }
                group.signals().touch();
                outcome(&raft.vote(rpc).await)
            }
            RaftKind::InstallSnapshot => {
                let rpc: InstallSnapshotRequest<TypeConfig> = match decode(&request.payload) {
                    Ok(rpc) => rpc,
                    Err(malformed) => return malformed,
                };
                group.signals().heard_leader(Instant::now());
                outcome(&raft.install_snapshot(rpc).await)
            }
        }
    }
}

/// The answers of one `RaftLink` stream, sent as they come: each message carries every
/// answer ready by then (at most [`ANSWERS_PER_MESSAGE`]).
pub type AnswerStream =
    Pin<Box<dyn Stream<Item = Result<proto::RaftAnswers, Status>> + Send + 'static>>;

/// Most answers one `RaftAnswers` message carries.
const ANSWERS_PER_MESSAGE: usize = 1024;

fn answer_batches(
    queued: mpsc::UnboundedReceiver<proto::RaftAnswer>,
) -> impl Stream<Item = Result<proto::RaftAnswers, Status>> {
    futures::stream::unfold(queued, |mut queued| async move {
        let mut answers = vec![queued.recv().await?];
        while answers.len() < ANSWERS_PER_MESSAGE {
            match queued.try_recv() {
                Ok(answer) => answers.push(answer),
                Err(_) => break,
            }
        }
        Some((Ok(proto::RaftAnswers { answers }), queued))
    })
}

fn unavailable(why: impl Into<String>) -> proto::RaftReply {
    proto::RaftReply {
        result: Some(raft_reply::Result::Unavailable(why.into())),
    }
}

fn outcome<T: serde::Serialize>(value: &T) -> proto::RaftReply {
    proto::RaftReply {
        result: Some(raft_reply::Result::Outcome(
            raft_codec::encode(value).to_vec(),
        )),
    }
}

/// A request's payload, or the reply to a payload this node cannot decode: unavailable, as
/// such a peer cannot be served.
fn decode<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, proto::RaftReply> {
    raft_codec::decode(payload).map_err(|e| unavailable(format!("malformed raft payload: {e}")))
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
        Ok(Response::new(self.answer(request.into_inner()).await))
    }

    type RaftLinkStream = AnswerStream;

    async fn raft_link(
        &self,
        request: Request<Streaming<proto::RaftCalls>>,
    ) -> Result<Response<AnswerStream>, Status> {
        let (answers, queued) = mpsc::unbounded_channel();
        tokio::spawn(self.clone().serve_calls(request.into_inner(), answers));
        Ok(Response::new(Box::pin(answer_batches(queued))))
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
        let proposal: Proposal = raft_codec::decode(&request.proposal)
            .map_err(|e| Status::invalid_argument(format!("malformed proposal: {e}")))?;
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
