//! Answering for a stream whose group has no leader: right after the group starts, while an
//! election is on, or for as long as too few replicas run to elect one. Without this nobody
//! answers (only a leader does, see `routing.rs`) and clients time out. The same for the meta
//! group, whose leader answers account-wide requests (see the end).
//!
//! What nats-server does (`jetstream_api.go`, `jetstream_cluster.go`): a member of the
//! stream's group that knows no leader (`isGroupLeaderless`: its Raft node has no leader, and
//! either the group had one and JetStream has run for 10 s, or the group is older than 10 s)
//! answers instead of staying silent. `jsStreamInfoRequest` then replies with the member's own
//! stream info (the `cluster.leader` empty); `jsConsumerInfoRequest`, `jsMsgGetRequest`,
//! `jsMsgDeleteRequest`, `jsStreamPurgeRequest` and both leader stepdowns reply 10008 "JetStream
//! system temporarily unavailable". Every such member replies (a requester takes the first). A
//! pull request gets nothing (only the consumer's leader listens), and a publish finds no
//! subscriber (only a leader subscribes the stream's subjects: `stream.setLeader`), so a
//! client that asked for no-responders gets the 503 status, as from jetraft.
//!
//! jetraft answers the same way, with these differences:
//!
//! - **One reply.** Of the members that know no leader only one answers: the lowest node id
//!   among the group's voters this node can reach (itself, and every peer whose route is up in
//!   both directions, which is also the path requests and replies take). Nodes that see each
//!   other agree on it; only a partition that cuts some routes and not others can make two
//!   members answer (each the lowest it can reach) or none. nats-server has no such choice and
//!   sends one reply per leaderless member.
//! - **Consumer calls are stream calls.** A consumer lives in its stream's group here (see
//!   docs/adr/0001-consumers-in-the-stream-group.md), so `CONSUMER.CREATE`, `DELETE`, `LIST`
//!   and `STREAM.UPDATE`, which need that group, reply 10008 (nats-server's meta leader takes
//!   them); `CONSUMER.NAMES` is answered from the member's replica, as `STREAM.INFO` is.
//!   `CONSUMER.RESET`, a proposal to the group, replies 10008 too.
//! - **No early answer for a new group.** nats-server lets the preferred member of a group
//!   younger than 10 s answer `STREAM.INFO` from its replica before any leader is elected;
//!   here a new group waits like a restarted replica (below).
//!
//! **Never next to a leader.** openraft reports a leader only for a committed vote, and a
//! follower keeps its leader's committed vote until its own election timer fires, so a member
//! that hears from its leader (heartbeats every 100 ms) knows it. Two cases remain, each with
//! its wait (nats-server waits alike, with its own timings):
//!
//! - A member that knew a leader and lost it (its election timer fired after 0.9–1.2 s of
//!   silence) answers after [`LEADERLESS_AFTER`] without one. An election normally ends within
//!   one or two election timeouts (300–600 ms each), so an ordinary failover does not answer
//!   10008 next to the leader it is electing. (nats-server: at once, its elections take 4–9 s.)
//! - A member that has known no leader since its group started here (a new stream, or a node
//!   just restarted) answers only after [`NEW_REPLICA_AFTER`]: a leader may exist that has not
//!   reached it yet, its connections to the restarted node coming back with backoff (routes
//!   and Raft RPCs retry within 2 s). (nats-server: the same 10 s, `lostQuorumIntervalDefault`
//!   since the Raft node was created.)
//!
//! What remains is a new leader's first append still on its way to a member that has waited
//! out its time, a window of one round trip; a requester keeps the first reply either way.
//!
//! **The meta group.** Without a meta leader nats-server answers what its meta leader would
//! (`jsAccountInfoRequest`, `jsStreamCreateRequest`, `jsStreamUpdateRequest`,
//! `jsStreamNamesRequest`, `jsStreamDeleteRequest`, `jsConsumerNamesRequest`, ...: `if
//! js.isLeaderless()`, true once the meta group has had no leader and is older than 10 s) with
//! 10008 from every node, and requests naming a stream it does not know with 10008 too (maybe
//! it exists: the meta state may be behind), after half a second (`sendDelayedAPIErrResponse`);
//! a meta leader stepdown goes unanswered. jetraft does the same from the one node chosen as
//! above among all nodes (every node is a meta voter), at once. nats-server also refuses some
//! stream calls while the meta group has no leader even if the stream's group has one
//! (`jsMsgGetRequest`, `jsMsgDeleteRequest`, the stepdowns check `isLeaderless` first); here a
//! stream's leader serves its stream whatever the meta state.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::consensus::NodeId;
use crate::jetstream::leader_clock::Leaderless;
use crate::jsapi::response::{encode_error, ResponseType};
use crate::jsapi::subject::ApiRequest;
use crate::jsapi::{ApiError, ErrorKind};
use crate::server::message::Message;

use crate::jetstream::JetStream;

/// How long a replica that knew a leader must have known none before it answers for the group.
pub const LEADERLESS_AFTER: Duration = Duration::from_secs(1);
/// How long a replica that has known no leader since its group started here waits before it
/// answers for the group.
pub const NEW_REPLICA_AFTER: Duration = Duration::from_secs(10);

/// Whether a replica without a leader has waited long enough to answer (see the module docs).
pub fn waited_out(leaderless: Leaderless) -> bool {
    let wait = match leaderless.knew_leader {
        true => LEADERLESS_AFTER,
        false => NEW_REPLICA_AFTER,
    };
    leaderless.lasted >= wait
}

/// Whether this node answers for stream `stream`, which it does not lead: it runs a replica,
/// has known no leader long enough ([`waited_out`]), and is the lowest voter it can reach.
pub fn answers_for_stream(js: &JetStream, stream: &str) -> bool {
    if !js.stream_leaderless(stream).is_some_and(waited_out) {
        return false;
    }
    let Some(voters) = stream_voters(js, stream) else {
        return false;
    };
    is_lowest_reachable(js.node_id(), &voters, |peer| js.topology().reaches(peer))
}

/// The voters of `stream`'s group as this replica knows them: its group's membership, or,
/// while it knows none (a replica rebuilt empty after corruption, ADR 0015, learns it only
/// from a leader), the stream's placement, which it always has.
fn stream_voters(js: &JetStream, stream: &str) -> Option<BTreeSet<NodeId>> {
    let voters = js.stream(stream)?.group().voter_ids();
    if !voters.is_empty() {
        return Some(voters);
    }
    Some(js.assignment(stream)?.replicas.into_iter().collect())
}

/// Whether this node answers what the meta leader would, there being none: it has known no
/// meta leader long enough ([`waited_out`]) and is the lowest meta voter it can reach.
pub fn answers_for_meta(js: &JetStream) -> bool {
    js.meta_leaderless().is_some_and(waited_out)
        && is_lowest_reachable(js.node_id(), &js.meta_group().voter_ids(), |peer| {
            js.topology().reaches(peer)
        })
}

/// Whether `me` is the lowest of `voters` that are `me` or `reachable`.
pub fn is_lowest_reachable(
    me: NodeId,
    voters: &BTreeSet<NodeId>,
    reachable: impl Fn(NodeId) -> bool,
) -> bool {
    voters.contains(&me)
        && voters
            .iter()
            .copied()
            .find(|&voter| voter == me || reachable(voter))
            == Some(me)
}

/// The reply for a request naming a stream that has no leader (see the module docs); `None`
/// when none is sent.
pub async fn answer_for_stream(
    js: &Arc<JetStream>,
    request: &ApiRequest,
    msg: &Message,
) -> Option<Vec<u8>> {
    use ApiRequest as R;
    let no_majority = request
        .stream()
        .and_then(|stream| lost_to_corruption(js, stream));
    if let Some(reason) = no_majority {
        if !matches!(request, R::ConsumerMsgNext { .. } | R::DirectGet { .. }) {
            js.count_api_call(true);
            let response_type = request.response_type().unwrap_or(ResponseType::System);
            let error = ApiError::with(ErrorKind::StreamOfflineReason, &[&reason]);
            return Some(encode_error(response_type, &error));
        }
    }
    match request {
        // What only the stream's group (through its leader) can do.
        R::StreamUpdate { .. }
        | R::StreamPurge { .. }
        | R::StreamMsgGet { .. }
        | R::StreamMsgDelete { .. }
        | R::StreamLeaderStepdown { .. }
        | R::ConsumerCreate { .. }
        | R::ConsumerInfo { .. }
        | R::ConsumerDelete { .. }
        | R::ConsumerList { .. }
        | R::ConsumerLeaderStepdown { .. }
        | R::ConsumerReset { .. } => Some(unavailable(js, request)),
        // Only a leader delivers: the pull request waits unanswered, as on nats-server.
        R::ConsumerMsgNext { .. } => None,
        // Answered as the leader would, from this replica: `STREAM.INFO`, `CONSUMER.NAMES`,
        // direct gets (nats-server lets any replica answer those), and what jetraft does not
        // support with its error.
        _ => super::route(js, request, msg).await,
    }
}

/// Why `stream`'s group cannot elect a leader, if corruption is the cause (ADR 0018): this
/// replica lost its state and no leader is there to rebuild it, or too few replicas are left
/// that did not (ADR 0015: an amnesiac replica neither votes nor stands until a leader
/// rebuilt it). Counted from what this replica knows: itself, and the peers that refused its
/// vote requests as amnesiac lately. Requests about it then answer 10194 naming the
/// corruption (nats-server's `JSStreamOfflineReasonErrF`), not an info without a leader.
fn lost_to_corruption(js: &JetStream, stream: &str) -> Option<String> {
    let voters = stream_voters(js, stream)?;
    let amnesiac = js.stream(stream)?.group().amnesiac_replicas();
    let lost: Vec<String> = amnesiac
        .intersection(&voters)
        .map(|node| node.to_string())
        .collect();
    let quorum = voters.len() / 2 + 1;
    let no_majority = voters.len() - lost.len() < quorum;
    (no_majority || amnesiac.contains(&js.node_id())).then(|| {
        format!(
            "{} of {} replicas (node ids {}) lost their state to corruption and no leader is left to rebuild them from; the damaged data is kept under quarantine/",
            lost.len(),
            voters.len(),
            lost.join(", ")
        )
    })
}

/// The reply for a request the meta leader would answer, there being none (see the module
/// docs); `None` when none is sent.
pub async fn answer_for_meta(
    js: &Arc<JetStream>,
    request: &ApiRequest,
    msg: &Message,
) -> Option<Vec<u8>> {
    use ApiRequest as R;
    match request {
        // Only a meta leader listens for these on nats-server; a pull request waits.
        R::MetaLeaderStepdown | R::ServerRemove | R::ConsumerMsgNext { .. } => None,
        // A stream this node does not run: no direct-get responder (no-responders).
        R::DirectGet { .. } => super::route(js, request, msg).await,
        _ => Some(unavailable(js, request)),
    }
}

/// 10008, with the response type of `request`.
fn unavailable(js: &JetStream, request: &ApiRequest) -> Vec<u8> {
    js.count_api_call(true);
    let response_type = request.response_type().unwrap_or(ResponseType::System);
    encode_error(response_type, &ApiError::new(ErrorKind::ClusterNotAvail))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn voters(ids: &[NodeId]) -> BTreeSet<NodeId> {
        ids.iter().copied().collect()
    }

    #[test]
    fn the_lowest_reachable_voter_answers() {
        let all = voters(&[7, 3, 9]);
        let everyone = |_| true;
        assert!(is_lowest_reachable(3, &all, everyone));
        assert!(!is_lowest_reachable(7, &all, everyone));
        assert!(!is_lowest_reachable(9, &all, everyone));
    }

    #[test]
    fn unreachable_voters_do_not_count() {
        let all = voters(&[3, 7, 9]);
        // 3 is down: 7 and 9 still see each other, and 7 answers.
        let without_3 = |peer| peer != 3;
        assert!(is_lowest_reachable(7, &all, without_3));
        assert!(!is_lowest_reachable(9, &all, without_3));
        // Alone, a voter answers for itself.
        assert!(is_lowest_reachable(9, &all, |_| false));
    }

    #[test]
    fn a_replica_that_never_knew_a_leader_waits_longer() {
        let lost = |secs: f64| Leaderless {
            lasted: Duration::from_secs_f64(secs),
            knew_leader: true,
        };
        let never = |secs: f64| Leaderless {
            lasted: Duration::from_secs_f64(secs),
            knew_leader: false,
        };
        assert!(!waited_out(lost(0.5)));
        assert!(waited_out(lost(1.0)));
        assert!(!waited_out(never(1.0)));
        assert!(!waited_out(never(9.9)));
        assert!(waited_out(never(10.0)));
    }

    #[test]
    fn only_voters_answer() {
        assert!(!is_lowest_reachable(1, &voters(&[3, 7]), |_| true));
        assert!(!is_lowest_reachable(1, &voters(&[]), |_| true));
    }
}
