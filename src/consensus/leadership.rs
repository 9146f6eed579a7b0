//! Whether a replica of a group serves as its leader and whether it knows a leader, from the
//! group's openraft metrics: openraft 0.9 keeps a leader cut off from its quorum in office
//! until it hears a higher term, so a leader that has not heard from a quorum for
//! [`quorum_lost_after`] counts as neither (see docs/adr/0006-lost-quorum-step-down.md, "A
//! leader cut off from its quorum stops serving after 750 ms").

use std::time::Duration;

use openraft::ServerState;

use super::types::{Node, NodeId};

/// What a replica makes of its group's leadership (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Leadership {
    /// This replica leads and is in contact with a quorum: it serves.
    pub leads: bool,
    /// A leader is known (another node, or this one while it leads with a quorum).
    pub knows_leader: bool,
}

/// How a quiet (or waking) replica is in contact with its group, by node liveness instead of
/// openraft's acknowledgements, which a quiet group does not exchange (see the pacer).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QuietContact {
    /// A quorum of the voters answered this node's pings within the lease.
    pub lease_holds: bool,
    /// The known leader's node is alive (true if there is none).
    pub leader_alive: bool,
}

/// How long a leader may go without hearing from a quorum before it stops serving, from its
/// group's Raft config: the leader lease (followers refuse votes for that long after they heard
/// from the leader) plus half the minimum election timeout. A follower stands for election
/// after the lease plus a timeout (at least the minimum), counted from the last heartbeat it
/// got, which the leader sent before it got the acks it counts from: so a leader cut off from
/// its followers stops serving before any other replica can have been elected, and clients
/// never see two leaders answer. nats-server's leader steps down after 10 s without a quorum,
/// while its followers elect another after 4–9 s.
pub fn quorum_lost_after(config: &openraft::Config) -> Duration {
    Duration::from_millis(config.election_timeout_max + config.election_timeout_min / 2)
}

/// Whether this replica serves the stream as its leader, and whether it knows a leader, from
/// the group's latest metrics. A leader of several voters that has not heard from a quorum for
/// `lost_after` neither serves nor counts as a known leader: to this node the group has none
/// (for a stream, `api::leaderless` takes over) until a quorum answers again. openraft recomputes
/// `millis_since_quorum_ack` whenever its core reports metrics, which a leader cut off from its
/// followers keeps doing (every failed heartbeat is an event); a core blocked on a slow fsync
/// reports nothing meanwhile and is not taken for one that lost its quorum (it commits nothing
/// then either). A leader just elected has no quorum ack yet (openraft does not count the
/// votes): it counts as in contact, having just heard from a quorum, unless `unacked_for`
/// (how long it has led without one, where the caller tracks it) passes `lost_after`.
///
/// A quiet group (`quiet` is Some) goes by node liveness instead: its leader serves while its
/// lease holds, and a follower knows its leader while that leader's node is alive.
pub fn leadership_of(
    m: &openraft::RaftMetrics<NodeId, Node>,
    node: NodeId,
    lost_after: Duration,
    unacked_for: Duration,
    quiet: Option<QuietContact>,
) -> Leadership {
    let leader =
        m.state == ServerState::Leader && m.current_leader == Some(node) && m.running_state.is_ok();
    let voters = m.membership_config.membership().voter_ids().count();
    let in_contact = match (quiet, m.millis_since_quorum_ack) {
        (Some(quiet), _) => quiet.lease_holds,
        (None, Some(ms)) => Duration::from_millis(ms) <= lost_after,
        (None, None) => unacked_for <= lost_after,
    };
    let leader_alive = quiet.is_none_or(|quiet| leader || quiet.leader_alive);
    let quorum = !leader || voters <= 1 || in_contact;
    // openraft reports a leader only for a committed vote: a candidate, or a voter that
    // granted a vote to one, knows none until a leader's first append.
    Leadership {
        leads: leader && quorum,
        knows_leader: m.current_leader.is_some() && quorum && leader_alive,
    }
}
