//! The pacer: one task per node drives the timers of every Raft group on it, and lets idle
//! groups go quiet (docs/adr/0013-quiet-groups.md).
//!
//! openraft 0.9 gives every group a tick task that wakes every 1.5 heartbeat periods even when
//! its timers are switched off, and a leader that heartbeats every follower each period: on
//! this machine 1000 idle R3 streams burnt 1.5 cores. Its intervals are fixed at start, so the
//! groups run with openraft's timers off (`GroupOptions::raft_config`) and the pacer takes
//! them over with `Raft::trigger()`:
//!
//! - [`decide`]: per replica, a pure state machine: heartbeats and elections of an active
//!   group as openraft's timers would do them, and when a group goes quiet.
//! - [`liveness`]: one ping per node pair replaces per-group liveness for quiet groups: a quiet
//!   leader serves while a quorum answers its node's pings ([`liveness::LEASE`]); a quiet
//!   follower wakes and elects once its leader's node is dead.
//! - `pings`: what the node pings tell the pacer and what it lists in them (leases, vote
//!   refusals of quiet followers, quiet lists, peers dead or back).
//! - [`signals`]: what the hot paths (proposals, RPCs) tell the pacer without its lock.
//!
//! A round runs every [`ROUND`] while any group is active; when all are quiet the task sleeps
//! until something wakes one. A quiet group costs no task wake-up, timer or message: its
//! leader lists it in the pings to its followers (`cluster::liveness`), which keeps them quiet
//! and tells them when it no longer leads it.

pub mod decide;
pub mod liveness;
mod pings;
mod signals;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::SeedableRng;

pub use decide::Mode;
use decide::{Action, Observation, Pace, Peer, Role};
pub use liveness::Liveness;
pub use signals::GroupSignals;
use signals::Wakes;

use super::types::{GroupId, NodeId, Raft};

/// How often the pacer looks at the active groups.
pub const ROUND: Duration = Duration::from_millis(50);

/// Most elections the node starts per [`ROUND`], the meta group's aside (see
/// [`decide`]'s module docs): 640 a second. A node whose peer died may have to elect thousands
/// of groups; started all at once, their vote requests queue behind each other past their
/// timeout and every election fails.
pub const ELECTIONS_PER_ROUND: usize = 32;

/// How many groups are in each mode (for `/jsz` and `/metrics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeCounts {
    pub active: usize,
    pub quiet: usize,
    pub waking: usize,
}

/// How long a quiet follower may hold a vote request whose refusal is about to end (see
/// [`Pacer::refuses_vote_within`]): below the candidate's vote timeout, which openraft sets
/// to the minimum election timeout (300 ms), so that the answer still arrives.
pub const VOTE_WAIT: Duration = Duration::from_millis(200);
const _: () = assert!(VOTE_WAIT.as_millis() + 50 < decide::ELECTION_TIMEOUT.start.as_millis());

/// The node's pacer (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<Inner>,
}

struct Inner {
    node: NodeId,
    liveness: Liveness,
    wakes: Arc<Wakes>,
    state: Mutex<Groups>,
}

/// A list of quiet groups with their terms, as pings carry it.
type QuietList = Vec<(GroupId, u64)>;

#[derive(Default)]
struct Groups {
    tracked: HashMap<GroupId, Tracked>,
    /// Groups that are not quiet: the ones a round looks at.
    active: HashSet<GroupId>,
    /// Bumped whenever a group changes mode or goes: what the caches below were built at.
    generation: u64,
    /// Per peer, the quiet list last built for its pings.
    sent: HashMap<NodeId, (u64, QuietList)>,
    /// Per peer, the quiet list its last ping carried and what this node answered, so that the
    /// same list at the same generation (an idle cluster) costs a comparison.
    heard: HashMap<NodeId, (u64, QuietList, Vec<GroupId>)>,
    /// Elections the node may still start until the next full round.
    election_budget: usize,
    /// Groups whose elections the budget does not hold back (`Pacer::elect_first`).
    first: HashSet<GroupId>,
}

/// Mirrors a replica's mode into its signals; a change bumps `generation`.
fn publish_mode(tracked: &Tracked, generation: &mut u64) {
    let mode = tracked.pace.mode();
    if tracked.signals.mode() != mode {
        tracked.signals.set_mode(mode);
        *generation += 1;
    }
}

struct Tracked {
    raft: Raft,
    signals: Arc<GroupSignals>,
    pace: Pace,
    /// The other voters when it went quiet as leader, and those of them behind then.
    quiet_peers: Vec<Peer>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Ends the task, which holds the pacer weakly.
        self.wakes.notify.notify_one();
    }
}

impl Pacer {
    /// The pacer of node `node`; its task runs until the last clone is dropped.
    pub fn start(node: NodeId) -> Pacer {
        let wakes = Arc::new(Wakes::default());
        let inner = Arc::new(Inner {
            node,
            liveness: Liveness::new(node),
            wakes: wakes.clone(),
            state: Mutex::default(),
        });
        tokio::spawn(run(Arc::downgrade(&inner), wakes));
        Pacer { inner }
    }

    pub fn liveness(&self) -> &Liveness {
        &self.inner.liveness
    }

    /// Starts pacing a group that just started on this node; its signals are for the group.
    pub fn track(&self, group: GroupId, raft: Raft) -> Arc<GroupSignals> {
        let signals = Arc::new(GroupSignals::new(group, self.inner.wakes.clone()));
        let mut rng = StdRng::from_os_rng();
        let tracked = Tracked {
            raft,
            signals: signals.clone(),
            pace: Pace::new(Instant::now(), &mut rng),
            quiet_peers: Vec::new(),
        };
        let mut state = self.inner.state.lock();
        state.tracked.insert(group, tracked);
        state.active.insert(group);
        // A leader's quiet list heard before this group started here was answered without
        // it, and a list heard again at the same generation is answered from that cache: a
        // replica rebuilt after amnesia that started after its leader's first ping would
        // never tell the leader to wake, and never catch up (seen in cluster_corruption).
        state.generation += 1;
        drop(state);
        self.inner.wakes.notify.notify_one();
        signals
    }

    /// Lets `group`'s elections pass the node's election budget (the meta group: every stream
    /// create and placement waits for it, so it must not queue behind thousands of streams).
    pub fn elect_first(&self, group: GroupId) {
        self.inner.state.lock().first.insert(group);
    }

    /// Stops pacing `group` (stopped or dropped).
    pub fn untrack(&self, group: GroupId) {
        let mut state = self.inner.state.lock();
        state.tracked.remove(&group);
        state.active.remove(&group);
        state.generation += 1;
    }

    /// How many groups are in each mode.
    pub fn counts(&self) -> ModeCounts {
        let state = self.inner.state.lock();
        let mut counts = ModeCounts::default();
        for tracked in state.tracked.values() {
            match tracked.pace.mode() {
                Mode::Active => counts.active += 1,
                Mode::Quiet => counts.quiet += 1,
                Mode::Waking => counts.waking += 1,
            }
        }
        counts
    }
}

/// The pacer's task: a round every [`ROUND`] while a group is active, else waits for a wake.
/// A wake between rounds steps only the groups woken (a woken leader heartbeats at once): a
/// full round for each wake made a publish to each of many quiet streams step every active
/// group once per publish (issue 15).
async fn run(inner: Weak<Inner>, wakes: Arc<Wakes>) {
    let mut rng = StdRng::from_os_rng();
    let mut next_round = tokio::time::Instant::now();
    loop {
        let full = tokio::time::Instant::now() >= next_round;
        if full {
            next_round = tokio::time::Instant::now() + ROUND;
        }
        let any_active = match inner.upgrade() {
            Some(inner) => round(&inner, &mut rng, full).await,
            None => return,
        };
        if any_active {
            tokio::select! {
                _ = wakes.notify.notified() => {}
                _ = tokio::time::sleep_until(next_round) => {}
            }
        } else {
            wakes.notify.notified().await;
            // Nothing was active: the woken groups' first round is a full one.
            next_round = tokio::time::Instant::now();
        }
    }
}

/// Wakes what was woken, steps every active group (`full`) or only the woken ones, then sends
/// the heartbeats and starts the elections decided (outside the lock). Returns whether any
/// group is still active.
async fn round(inner: &Inner, rng: &mut StdRng, full: bool) -> bool {
    let now = Instant::now();
    let me = inner.node;
    let mut due = Vec::new();
    let any_active = {
        let mut state = inner.state.lock();
        let Groups {
            tracked,
            active,
            generation,
            election_budget,
            first,
            ..
        } = &mut *state;
        if full {
            *election_budget = ELECTIONS_PER_ROUND;
        }
        let mut woken = Vec::new();
        for (id, wake) in inner.wakes.take() {
            if let Some(t) = tracked.get_mut(&id) {
                if t.pace.mode() == Mode::Quiet {
                    woken.push(id);
                }
                t.pace.wake(now, wake);
                publish_mode(t, generation);
                active.insert(id);
            }
        }
        let stepped: Vec<GroupId> = match full {
            true => active.iter().copied().collect(),
            false => woken,
        };
        let mut peers = Vec::new();
        let mut quieted = Vec::new();
        for id in stepped.iter() {
            let Some(t) = tracked.get_mut(id) else {
                quieted.push(*id);
                continue;
            };
            let mut obs = observe(&t.raft, &t.signals, &inner.liveness, me, now, &mut peers);
            let budgeted = !first.contains(id);
            obs.may_elect = !budgeted || *election_budget > 0;
            let action = t.pace.step(&obs, me, rng);
            if action == Action::Elect && budgeted {
                *election_budget = election_budget.saturating_sub(1);
            }
            if matches!(action, Action::Elect | Action::Quiesce) {
                tracing::debug!(
                    group = ?id,
                    ?action,
                    term = obs.term,
                    leader = ?obs.leader,
                    leader_alive = obs.leader_alive,
                    campaigns = t.signals.campaigns(),
                    "pacer decided"
                );
            }
            publish_mode(t, generation);
            match action {
                Action::Nothing => {}
                Action::Quiesce => {
                    t.quiet_peers = peers.clone();
                    quieted.push(*id);
                }
                Action::Elect if !t.signals.campaigns() => {}
                Action::Heartbeat | Action::Elect => {
                    due.push((*id, t.raft.clone(), action, obs.term))
                }
            }
        }
        for id in quieted {
            active.remove(&id);
        }
        !active.is_empty()
    };
    for (id, raft, action, term) in due {
        // A vote granted (or a leader heard) since the decision moved the term on: electing
        // now would depose the leader this replica just voted for, and the stream would be
        // without one for another election (seen after a failover: the two survivors'
        // jitters a few milliseconds apart).
        if action == Action::Elect && raft.metrics().borrow().current_term != term {
            continue;
        }
        let sent = match action {
            Action::Elect => raft.trigger().elect().await,
            _ => raft.trigger().heartbeat().await,
        };
        if sent.is_err() {
            // The group stopped (a storage failure, or shut down without being untracked).
            let mut state = inner.state.lock();
            state.tracked.remove(&id);
            state.active.remove(&id);
        }
    }
    any_active
}

/// Whether a follower holds entries it has not applied yet.
fn behind(raft: &Raft) -> bool {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    m.last_applied.map(|id| id.index) < m.last_log_index
}

/// How long ago a quorum acknowledged the leader, at `now`. From the instant, not
/// `millis_since_quorum_ack`: that one counts from when the metrics were reported, and a quiet
/// group reports none, so a leader woken after seconds of quiet would read its last
/// acknowledgement as one a moment old, count itself acknowledged since the wake, go active
/// and (`leadership_of`) stop serving until its first append was acknowledged.
fn since_quorum_ack(
    m: &openraft::RaftMetrics<NodeId, super::types::Node>,
    now: Instant,
) -> Option<Duration> {
    m.quorum_acked_at
        .map(|at| now.saturating_duration_since(at))
}

/// What the pacer sees of a replica now; `peers` is reused to hold the other voters.
fn observe<'a>(
    raft: &Raft,
    signals: &GroupSignals,
    liveness: &Liveness,
    me: NodeId,
    now: Instant,
    peers: &'a mut Vec<Peer>,
) -> Observation<'a> {
    let metrics = raft.metrics();
    let m = metrics.borrow();
    peers.clear();
    let mut voter = false;
    for id in m.membership_config.membership().voter_ids() {
        if id == me {
            voter = true;
            continue;
        }
        let matched = m
            .replication
            .as_ref()
            .and_then(|replication| replication.get(&id).cloned().flatten())
            .map(|log_id| log_id.index);
        peers.push(Peer {
            id,
            matched,
            alive: liveness.is_alive(id, now),
        });
    }
    let role = match m.state {
        openraft::ServerState::Leader => Role::Leader,
        _ if voter => Role::Voter,
        _ => Role::NonVoter,
    };
    let lease_holds = role == Role::Leader
        && liveness.lease_holds(
            std::iter::once(me).chain(peers.iter().map(|peer| peer.id)),
            now,
        );
    Observation {
        now,
        role,
        term: m.current_term,
        leader: m.current_leader,
        leader_alive: m
            .current_leader
            .is_none_or(|leader| liveness.is_alive(leader, now)),
        leader_contact: signals.leader_contact(),
        last_log: m.last_log_index,
        last_applied: m.last_applied.map(|log_id| log_id.index),
        peers,
        since_quorum_ack: since_quorum_ack(&m, now),
        lease_holds,
        may_elect: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quorum_ack_is_dated_by_its_instant_not_by_a_stale_report() {
        let now = Instant::now();
        let mut m = openraft::RaftMetrics::new_initial(1);
        assert_eq!(since_quorum_ack(&m, now), None);
        // Reported a millisecond after the ack, then nothing for five seconds (quiet).
        m.millis_since_quorum_ack = Some(1);
        m.quorum_acked_at = now.checked_sub(Duration::from_secs(5));
        assert_eq!(since_quorum_ack(&m, now), Some(Duration::from_secs(5)));
    }
}
