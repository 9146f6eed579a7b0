//! [`Pace`]: the timers of one replica of one group, as a pure state machine. The pacer's
//! task observes the group (its openraft metrics, when its leader was last heard, whether
//! that leader's node is alive) and asks [`Pace::step`] what to do: send a heartbeat, stand
//! for election, go quiet, or nothing. openraft's own timers are off (see the [pacer](super)).
//!
//! The rules, per [`Mode`]:
//!
//! - **Active**, as openraft's own timers would: a leader of several voters sends a heartbeat
//!   every [`HEARTBEAT`], except for [`AFTER_GROWTH`] after its log grew (the appends did
//!   what a heartbeat would); a follower stands for election once it has not heard its leader for
//!   the leader lease plus a random election timeout (plus [`LIVE_LEADER_GRACE`] while the
//!   leader's node answers pings); a replica that knows no leader, one
//!   random election timeout after the last election or wake (the first time, after the lease
//!   and a timeout: `Pace::startup_lease`). A leader whose log has not grown
//!   for [`QUIET_AFTER`] (200 ms), every entry applied and held by every voter (a voter whose node is
//!   dead is not waited for, as long as a quorum holds everything), goes **Quiet** — if a
//!   quorum of the voters' nodes answers its pings, since that is what it then serves by.
//! - **Quiet**: no heartbeats, no elections, and the replica is not even looked at (the pacer
//!   keeps it out of its rounds). A follower goes quiet when its leader's node lists the group
//!   as quiet in a ping at the follower's term. An event wakes it (a proposal, an RPC of the
//!   group, its leader's node dying, a peer coming back): **Waking**.
//! - **Waking**: Active, except that a woken follower gives its leader a lease plus a timeout
//!   from the wake (the leader was quiet: its last heartbeat is old), and elects after a short
//!   random delay ([`ELECT_JITTER`]) when its leader's node is dead. Waking ends when the
//!   leader has a quorum's acknowledgement again, or the follower heard its leader.
//!
//! Elections are paced twice, against election storms (issue 15: on a loaded machine, thousands
//! of groups electing at once made vote requests outlast their 300 ms timeout, so elections
//! failed and were retried every timeout, for minutes):
//!
//! - **Backoff**: each election a replica stands for without having seen a leader since the
//!   previous one doubles its next timeout, up to [`MAX_BACKOFF`] times; seeing a leader ends it.
//! - **A budget per node** ([`Observation::may_elect`], `pacer::ELECTIONS_PER_ROUND`): a replica
//!   due to elect while the node's budget is spent waits, still due, for the next round.

use std::ops::Range;
use std::time::{Duration, Instant};

use rand::Rng;

use crate::consensus::types::NodeId;

/// Leader heartbeat period of an active group (openraft's `heartbeat_interval` before).
pub const HEARTBEAT: Duration = Duration::from_millis(100);
/// openraft's leader lease: voters refuse another candidate for this long after they heard
/// the leader (openraft derives it from `election_timeout_max`).
pub const LEADER_LEASE: Duration = Duration::from_millis(600);
/// The random election timeout: a follower elects after the lease plus one of these.
pub const ELECTION_TIMEOUT: Range<Duration> =
    Duration::from_millis(300)..Duration::from_millis(600);
/// How much longer a follower waits before it stands for election while its leader's node
/// answers pings: a leader slowed down (a loaded machine, a long fsync) or a follower that
/// missed heartbeats for a moment is not worth an election. openraft 0.9 has no pre-vote, so
/// a follower's election raises the term even when its log cannot win, and that term deposes
/// the leader at its next append; on a loaded machine a lagging follower did so over and over.
/// A dead leader's node (no ping for `liveness::DEAD_AFTER`) is not waited for; a live node
/// whose group is stuck is, this much longer.
pub const LIVE_LEADER_GRACE: Duration = Duration::from_secs(2);
/// How long a group's log must stay still before its leader makes it quiet. The followers
/// learn that the last entry is committed without a heartbeat (openraft sends the new commit
/// index to every follower as soon as it moves), so this is only how long a leader waits for
/// more: each active moment costs every follower a heartbeat per [`HEARTBEAT`] and the pacer a
/// step per round. At 2 s, one publish to each of 1000 quiet R3 streams cost ~40 heartbeat
/// RPCs per publish and most of the nodes' CPU; at 500 ms, ~10, still more RPCs than the
/// appends themselves (issue 15). A wake by a proposal costs no heartbeat of its own, so a
/// stream published to every few hundred milliseconds may go quiet in between for little.
pub const QUIET_AFTER: Duration = Duration::from_millis(200);
/// How long after its log last grew (or a proposal woke it) an active leader's next heartbeat
/// waits. The growth's appends, and the new commit index openraft sends every follower after
/// them, told the followers all a heartbeat would (their leader is alive, at this term) and
/// brought the leader a quorum's acknowledgement; a heartbeat a period later added nothing
/// but an RPC to each follower, up to half of a busy group's (issue 15: 1000 R3 streams
/// published to in turn). A log still for this long has gone quiet instead if its followers
/// hold it ([`QUIET_AFTER`] is no longer); a log that keeps growing sends none at all.
pub const AFTER_GROWTH: Duration = Duration::from_millis(200);
const _: () = assert!(AFTER_GROWTH.as_millis() >= QUIET_AFTER.as_millis());
/// Random delay before a woken follower whose leader's node died elects, so that the
/// followers of a dead leader do not all stand at once and split the vote.
pub const ELECT_JITTER: Range<Duration> = Duration::from_millis(0)..Duration::from_millis(300);

/// A replica's timer mode (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Active,
    Quiet,
    Waking,
}

/// What woke a quiet replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A proposal to the group.
    Proposal,
    /// Anything else: an RPC of the group, a stepdown, its leader's node dying, a peer
    /// coming back, a ping naming the group stale.
    Event,
}

/// Most a replica's election timeout is multiplied by after elections that found no leader
/// (see the module docs): 300-600 ms, then up to 2.4-4.8 s.
pub const MAX_BACKOFF: u32 = 8;

/// The replica's Raft role, from its metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Leader,
    /// A follower or candidate that is a voter of the group.
    Voter,
    /// Not a voter (a learner, or a new replica that has not learned its membership yet):
    /// it never elects.
    NonVoter,
}

/// Another voter of the group, as the leader sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub id: NodeId,
    /// Highest log index known to be on the peer.
    pub matched: Option<u64>,
    /// Whether the peer's node is alive (node liveness).
    pub alive: bool,
}

/// What the pacer sees of a replica at one instant.
#[derive(Clone, Debug)]
pub struct Observation<'a> {
    pub now: Instant,
    pub role: Role,
    pub term: u64,
    /// The known leader (this node's id while it leads).
    pub leader: Option<NodeId>,
    /// Whether the leader's node is alive (true when there is none or it is this node).
    pub leader_alive: bool,
    /// When this replica last heard its leader (an append or snapshot of the group).
    pub leader_contact: Option<Instant>,
    pub last_log: Option<u64>,
    pub last_applied: Option<u64>,
    /// The other voters (filled in for a leader).
    pub peers: &'a [Peer],
    /// A leader: how long ago a quorum last acknowledged it, if ever.
    pub since_quorum_ack: Option<Duration>,
    /// A leader: whether a quorum of the voters' nodes answers this node's pings (node
    /// liveness), which is what a quiet leader serves by.
    pub lease_holds: bool,
    /// Whether the node may start another election this round (see the module docs): a
    /// replica due to elect without it stays due.
    pub may_elect: bool,
}

/// What to do, from one [`Pace::step`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Nothing,
    Heartbeat,
    Elect,
    /// The replica went quiet: take it out of the rounds, list it in pings.
    Quiesce,
}

/// The timers of one replica (see the module docs).
#[derive(Clone, Debug)]
pub struct Pace {
    mode: Mode,
    next_heartbeat: Instant,
    /// The last log index seen and since when it has not moved.
    log_still: Option<(Option<u64>, Instant)>,
    /// The current random election timeout (drawn again after each election, times the
    /// backoff).
    timeout: Duration,
    /// Elections stood since a leader was last seen (see the module docs).
    failed_elections: u32,
    /// Last election this replica stood for, or its start / wake.
    last_start: Instant,
    /// When a woken follower whose leader died elects.
    jitter_until: Option<Instant>,
    /// The term and leader the replica went quiet with.
    quiet_with: Option<(u64, NodeId)>,
    /// The term and leader seen at the last step: a change (a vote granted, a new leader)
    /// restarts the election timer, as openraft's vote time does.
    seen: Option<(u64, Option<NodeId>)>,
    /// True until the replica stood for election or knew a leader: until then a voter that
    /// knows no leader waits the lease before its timeout, as if it had just heard one. A
    /// replica that starts next to a leader elected meanwhile may not hear it at once
    /// (openraft backs replication to a peer off for 500 ms after an RPC that failed because
    /// the group did not run there yet); standing for election at once, it would take the
    /// leader's term with a higher node id, which openraft's leader ids rank higher, and
    /// depose that leader from a log it cannot win with — again at each retry, as long as
    /// its retries outpace the other voters' elections.
    startup_lease: bool,
}

impl Pace {
    /// A replica started (or restarted) at `now`: active.
    pub fn new(now: Instant, rng: &mut impl Rng) -> Pace {
        Pace {
            mode: Mode::Active,
            next_heartbeat: now,
            log_still: None,
            timeout: draw(rng, ELECTION_TIMEOUT),
            failed_elections: 0,
            last_start: now,
            jitter_until: None,
            quiet_with: None,
            seen: None,
            startup_lease: true,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The term and leader this replica went quiet with (None unless quiet).
    pub fn quiet_with(&self) -> Option<(u64, NodeId)> {
        self.quiet_with.filter(|_| self.mode == Mode::Quiet)
    }

    /// `wake` woke the replica at `now` (a no-op unless quiet). A leader woken by anything
    /// but a proposal heartbeats at once (a peer came back, a follower knows a higher term);
    /// a proposal's own append reaches the followers at once, so its first heartbeat waits
    /// [`AFTER_GROWTH`], as after any append.
    pub fn wake(&mut self, now: Instant, wake: Wake) {
        if self.mode != Mode::Quiet {
            return;
        }
        self.mode = Mode::Waking;
        self.quiet_with = None;
        self.last_start = now;
        self.next_heartbeat = match wake {
            Wake::Proposal => now + AFTER_GROWTH,
            Wake::Event => now,
        };
        self.log_still = None;
        self.jitter_until = None;
    }

    /// The leader's node listed the group as quiet at `term`: an active follower of that
    /// leader at that term goes quiet. Returns whether it did.
    pub fn leader_is_quiet(&mut self, obs: &Observation<'_>, leader: NodeId, term: u64) -> bool {
        let follows = obs.role == Role::Voter && obs.leader == Some(leader) && obs.term == term;
        if self.mode == Mode::Quiet || !follows {
            return false;
        }
        self.go_quiet(obs.term, leader);
        true
    }

    fn go_quiet(&mut self, term: u64, leader: NodeId) {
        self.mode = Mode::Quiet;
        self.quiet_with = Some((term, leader));
        self.jitter_until = None;
    }

    /// One round: what to do now (nothing for a quiet replica, which is not stepped).
    pub fn step(&mut self, obs: &Observation<'_>, me: NodeId, rng: &mut impl Rng) -> Action {
        if self.mode == Mode::Quiet {
            return Action::Nothing;
        }
        let seen = Some((obs.term, obs.leader));
        if self.seen != seen {
            if self.seen.is_some() {
                self.last_start = self.last_start.max(obs.now);
            }
            self.seen = seen;
        }
        if obs.leader.is_some() {
            self.startup_lease = false;
            if self.failed_elections > 0 {
                self.failed_elections = 0;
                self.timeout = draw(rng, ELECTION_TIMEOUT);
            }
        }
        match obs.role {
            Role::Leader if obs.leader == Some(me) => self.step_leader(obs, me),
            Role::Leader | Role::Voter => self.step_voter(obs, me, rng),
            Role::NonVoter => Action::Nothing,
        }
    }

    fn step_leader(&mut self, obs: &Observation<'_>, me: NodeId) -> Action {
        let now = obs.now;
        self.jitter_until = None;
        if self.mode == Mode::Waking && (obs.peers.is_empty() || self.acked_since_wake(obs)) {
            self.mode = Mode::Active;
        }
        match self.log_still {
            Some((index, _)) if index == obs.last_log => {}
            Some(_) => {
                self.log_still = Some((obs.last_log, now));
                self.next_heartbeat = self.next_heartbeat.max(now + AFTER_GROWTH);
            }
            None => self.log_still = Some((obs.last_log, now)),
        }
        if self.may_go_quiet(obs) {
            self.go_quiet(obs.term, me);
            return Action::Quiesce;
        }
        if !obs.peers.is_empty() && now >= self.next_heartbeat {
            self.next_heartbeat = now + HEARTBEAT;
            return Action::Heartbeat;
        }
        Action::Nothing
    }

    fn acked_since_wake(&self, obs: &Observation<'_>) -> bool {
        let since_wake = obs.now.saturating_duration_since(self.last_start);
        obs.since_quorum_ack.is_some_and(|ack| ack <= since_wake)
    }

    fn may_go_quiet(&self, obs: &Observation<'_>) -> bool {
        let Some((_, still_since)) = self.log_still else {
            return false;
        };
        if obs.now.saturating_duration_since(still_since) < QUIET_AFTER
            || obs.last_applied != obs.last_log
            || !obs.lease_holds
        {
            return false;
        }
        let holds_all = |peer: &&Peer| peer.matched == obs.last_log;
        if obs.peers.iter().any(|peer| peer.alive && !holds_all(&peer)) {
            return false;
        }
        let voters = obs.peers.len() + 1;
        let holding = obs.peers.iter().filter(holds_all).count() + 1;
        holding * 2 > voters
    }

    fn step_voter(&mut self, obs: &Observation<'_>, me: NodeId, rng: &mut impl Rng) -> Action {
        let now = obs.now;
        let other_leader = obs.leader.filter(|leader| *leader != me);
        if self.mode == Mode::Waking
            && other_leader.is_some()
            && obs.leader_contact.is_some_and(|at| at > self.last_start)
        {
            self.mode = Mode::Active;
        }
        let due = match other_leader {
            // A woken follower of a dead leader: a short random delay, then elect.
            Some(_) if self.mode == Mode::Waking && !obs.leader_alive => *self
                .jitter_until
                .get_or_insert_with(|| now + draw(rng, ELECT_JITTER)),
            Some(_) => {
                let heard = obs
                    .leader_contact
                    .map_or(self.last_start, |at| at.max(self.last_start));
                let grace = match obs.leader_alive {
                    true => LIVE_LEADER_GRACE,
                    false => Duration::ZERO,
                };
                heard + LEADER_LEASE + self.timeout + grace
            }
            None if self.startup_lease => self.last_start + LEADER_LEASE + self.timeout,
            None => self.last_start + self.timeout,
        };
        if now < due || !obs.may_elect {
            return Action::Nothing;
        }
        self.last_start = now;
        self.failed_elections = self.failed_elections.saturating_add(1);
        self.timeout = draw(rng, ELECTION_TIMEOUT) * backoff(self.failed_elections);
        self.jitter_until = None;
        self.startup_lease = false;
        Action::Elect
    }
}

/// The multiplier of the election timeout after `failed` elections without a leader: 1 after
/// the first (a split vote is retried as soon as before), then doubling up to [`MAX_BACKOFF`].
fn backoff(failed: u32) -> u32 {
    1u32.checked_shl(failed.saturating_sub(1))
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF)
}

fn draw(rng: &mut impl Rng, range: Range<Duration>) -> Duration {
    let (low, high) = (range.start.as_millis() as u64, range.end.as_millis() as u64);
    Duration::from_millis(rng.random_range(low..high.max(low + 1)))
}

#[cfg(test)]
#[path = "tests_decide.rs"]
mod tests;
