//! Commit-only heartbeats held back for the next append.
//!
//! When a leader commits an entry, openraft 0.9 sends every follower an extra AppendEntries
//! without entries whose only news is the new commit index, and its replication stream waits
//! for that round trip before it sends the next entries. Under load the next append follows
//! within a millisecond or two and carries the commit index anyway, so the extra RPC costs
//! both nodes a gRPC call per entry and delays the next append by its round trip (with one
//! client publishing synchronously: the next publish's append waited behind it).
//!
//! [`CommitHold`] (one per group and peer, owned by that peer's `GroupNetwork`) decides per
//! request: an empty request that repeats the peer's last acknowledged position with the same
//! vote, shortly after that acknowledgement, and differs only by a higher commit index is
//! *held*: it is answered `Success` at once (which is what the peer answered a moment ago for
//! the same position) and sent for real after [`HOLD`] unless another request to the peer goes
//! first (that one carries a commit index at least as high). Anything else is sent as it is.
//!
//! What the held answer claims beyond the truth is only timing: openraft counts the answer as
//! the peer's acknowledgement at the time the request was made, while the peer's last real
//! acknowledgement answered a request at most [`RECENT`] plus a round trip older. The
//! lost-quorum rule ([`super::leadership::quorum_lost_after`]) leaves half the minimum
//! election timeout (150 ms) of margin, so it holds. A held request never advances what
//! openraft believes the peer has (its position is unchanged). Only one request is held at a
//! time and the one after it is sent, and a held answer does not refresh the acknowledgement
//! it was judged by, so early answers stop [`RECENT`] after the peer last really answered.
//! Followers learn a commit index later by at most [`HOLD`] when no append follows; they apply
//! it then (only a leader serves a stream, and a new leader applies its whole log before it
//! serves).

use std::time::{Duration, Instant};

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};

use super::types::{LogId, NodeId, TypeConfig, Vote};

/// How long a held commit-only request waits for the next append before it is sent itself.
pub const HOLD: Duration = Duration::from_millis(20);

/// How recent the peer's acknowledgement of the same position must be for a request to be
/// held (see the module docs: bounds what a held answer overstates).
pub const RECENT: Duration = Duration::from_millis(20);

/// What to do with one AppendEntries request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Send it now.
    Send,
    /// Answer `Success` now; send it after [`HOLD`] if [`CommitHold::still_held`] says so.
    Hold { ticket: u64 },
}

/// The acknowledged position of one peer in one group, and what was last sent to it.
#[derive(Debug, Default)]
pub struct CommitHold {
    /// The peer's last real acknowledgement: the position it matched, under which vote, when.
    acked: Option<(Option<LogId>, Vote, Instant)>,
    /// The highest commit index sent to the peer for real.
    commit_sent: Option<LogId>,
    /// Counts the requests planned; names each held one.
    ticket: u64,
    /// The ticket of the held request, while it is the latest request and not yet sent.
    held: Option<u64>,
}

impl CommitHold {
    /// Decides about `rpc` at `now` and records the decision.
    pub fn plan(&mut self, rpc: &AppendEntriesRequest<TypeConfig>, now: Instant) -> Plan {
        self.ticket += 1;
        let repeats_ack = matches!(
            &self.acked,
            Some((matched, vote, at))
                if *matched == rpc.prev_log_id
                    && *vote == rpc.vote
                    && now.saturating_duration_since(*at) <= RECENT
        );
        if rpc.entries.is_empty()
            && self.held.is_none()
            && repeats_ack
            && rpc.leader_commit > self.commit_sent
        {
            self.held = Some(self.ticket);
            return Plan::Hold {
                ticket: self.ticket,
            };
        }
        self.sent(rpc);
        Plan::Send
    }

    /// Whether the request held under `ticket` is still the latest one; if it is, it counts
    /// as sent from now on.
    pub fn still_held(&mut self, ticket: u64, rpc: &AppendEntriesRequest<TypeConfig>) -> bool {
        if self.held != Some(ticket) {
            return false;
        }
        self.sent(rpc);
        true
    }

    fn sent(&mut self, rpc: &AppendEntriesRequest<TypeConfig>) {
        self.held = None;
        if rpc.leader_commit > self.commit_sent {
            self.commit_sent = rpc.leader_commit;
        }
    }

    /// Records the peer's answer (`None`: no answer) at `now` to a request really sent, which
    /// `sent` describes.
    pub fn answered(
        &mut self,
        sent: Sent,
        answer: Option<&AppendEntriesResponse<NodeId>>,
        now: Instant,
    ) {
        self.acked = match answer {
            Some(AppendEntriesResponse::Success) => Some((sent.last, sent.vote, now)),
            _ => None,
        };
    }
}

/// What [`CommitHold::answered`] needs to know of a request once it is handed to the
/// transport: the position the peer matches if it accepts all of it, and its vote.
#[derive(Clone, Copy, Debug)]
pub struct Sent {
    last: Option<LogId>,
    vote: Vote,
}

impl Sent {
    pub fn of(rpc: &AppendEntriesRequest<TypeConfig>) -> Sent {
        Sent {
            last: rpc
                .entries
                .last()
                .map(|entry| entry.log_id)
                .or(rpc.prev_log_id),
            vote: rpc.vote,
        }
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Entry, EntryPayload};

    use super::*;

    fn log_id(term: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, 1), index)
    }

    fn vote() -> Vote {
        let mut vote = Vote::new(1, 1);
        vote.commit();
        vote
    }

    fn request(prev: u64, entries: u64, commit: u64) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: vote(),
            prev_log_id: (prev > 0).then(|| log_id(1, prev)),
            leader_commit: (commit > 0).then(|| log_id(1, commit)),
            entries: (prev + 1..=prev + entries)
                .map(|index| Entry {
                    log_id: log_id(1, index),
                    payload: EntryPayload::Blank,
                })
                .collect(),
        }
    }

    /// Sends `rpc` through `hold` and has the peer accept it at `now`.
    fn accepted(hold: &mut CommitHold, rpc: &AppendEntriesRequest<TypeConfig>, now: Instant) {
        assert_eq!(hold.plan(rpc, now), Plan::Send);
        hold.answered(Sent::of(rpc), Some(&AppendEntriesResponse::Success), now);
    }

    #[test]
    fn a_commit_only_request_right_after_its_ack_is_held_until_the_next_append() {
        let now = Instant::now();
        let mut hold = CommitHold::default();
        accepted(&mut hold, &request(0, 3, 0), now);
        let commit = request(3, 0, 3);
        let Plan::Hold { ticket } = hold.plan(&commit, now) else {
            panic!("not held")
        };
        // The next append goes first: the held request is not sent any more.
        accepted(&mut hold, &request(3, 2, 3), now);
        assert!(!hold.still_held(ticket, &commit));
        // No append follows the next commit: the held request is sent after all.
        let stale = ticket;
        let commit = request(5, 0, 5);
        let Plan::Hold { ticket } = hold.plan(&commit, now) else {
            panic!("not held")
        };
        assert!(!hold.still_held(stale, &commit), "an earlier hold's timer");
        assert!(hold.still_held(ticket, &commit));
        assert!(!hold.still_held(ticket, &commit), "sent once");
    }

    #[test]
    fn heartbeats_without_a_new_commit_index_are_sent() {
        let now = Instant::now();
        let mut hold = CommitHold::default();
        accepted(&mut hold, &request(0, 3, 3), now);
        assert_eq!(hold.plan(&request(3, 0, 3), now), Plan::Send);
    }

    #[test]
    fn only_a_recent_real_ack_of_the_same_position_and_vote_lets_a_request_be_held() {
        let now = Instant::now();
        let mut hold = CommitHold::default();
        // Nothing acknowledged yet.
        assert_eq!(hold.plan(&request(3, 0, 3), now), Plan::Send);

        accepted(&mut hold, &request(0, 3, 0), now);
        // Too long after the ack.
        assert_eq!(
            hold.plan(&request(3, 0, 3), now + RECENT + Duration::from_millis(1)),
            Plan::Send
        );

        accepted(&mut hold, &request(0, 4, 0), now);
        // Another position than the one acknowledged.
        assert_eq!(hold.plan(&request(3, 0, 4), now), Plan::Send);

        accepted(&mut hold, &request(0, 5, 0), now);
        // Another vote (a new leader's term).
        let mut other_vote = request(5, 0, 5);
        other_vote.vote = Vote::new(2, 1);
        assert_eq!(hold.plan(&other_vote, now), Plan::Send);

        // The peer refused the last request.
        let rpc = request(0, 6, 0);
        assert_eq!(hold.plan(&rpc, now), Plan::Send);
        hold.answered(Sent::of(&rpc), Some(&AppendEntriesResponse::Conflict), now);
        assert_eq!(hold.plan(&request(6, 0, 6), now), Plan::Send);
    }

    #[test]
    fn one_answer_is_held_per_real_ack() {
        let now = Instant::now();
        let mut hold = CommitHold::default();
        accepted(&mut hold, &request(0, 3, 0), now);
        assert!(matches!(
            hold.plan(&request(3, 0, 2), now),
            Plan::Hold { .. }
        ));
        // A heartbeat while one is held is sent (and replaces the held one).
        assert_eq!(hold.plan(&request(3, 0, 3), now), Plan::Send);
    }
}
