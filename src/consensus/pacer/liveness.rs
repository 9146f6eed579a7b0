//! [`Liveness`]: which peer nodes this node hears from, once per node pair instead of once per
//! Raft group. The cluster pings every peer every [`PING_EVERY`] (`cluster::liveness`) and
//! reports here what it heard; quiet groups rely on it (see the [pacer](super)).
//!
//! Two questions, with two different clocks, so that a quiet leader always stops serving
//! before a follower may start an election against it:
//!
//! - **Is a peer alive?** It is while something was heard from it within [`DEAD_AFTER`]: a
//!   ping it sent, or its answer to ours. A follower wakes a quiet group to elect a new leader
//!   only once its leader's node is not alive.
//! - **Does a leader still hold its lease?** A quiet leader serves while a quorum of its
//!   group's voters (itself included) answered a ping *sent* within [`LEASE`]. A voter that
//!   answered a ping sent at `t` heard from the leader at `t` or later, so it does not think
//!   the leader dead before `t + DEAD_AFTER`, after `t + LEASE`: by then the leader stopped.
//!
//! A node just started counts every peer as heard at its start, so nothing is declared dead
//! before the first pings had a chance.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use tokio::sync::watch;

use crate::consensus::types::NodeId;

/// How often the cluster pings each peer.
pub const PING_EVERY: Duration = Duration::from_millis(150);
/// A quiet leader serves while a quorum answered a ping sent this recently (the lost-quorum
/// rule of ADR 0006, 750 ms, applied to node pings).
pub const LEASE: Duration = Duration::from_millis(750);
/// A peer not heard from for this long is dead: quiet groups it led elect another leader.
/// Longer than [`LEASE`] (see the module docs), and several pings long so that a busy node
/// missing one or two is not taken for dead.
pub const DEAD_AFTER: Duration = Duration::from_millis(1_000);

#[derive(Clone, Copy, Debug)]
struct Seen {
    /// Last time anything arrived from the peer.
    heard: Instant,
    /// Send time of the newest of our pings it answered.
    answered_ping_sent: Option<Instant>,
    /// Whether it counted as alive, and as answering within the lease, when last evaluated.
    alive: bool,
    in_lease: bool,
}

impl Seen {
    fn new(heard: Instant) -> Seen {
        Seen {
            heard,
            answered_ping_sent: None,
            alive: true,
            in_lease: false,
        }
    }

    /// Re-evaluates `alive` and `in_lease` at `now`; returns whether either changed.
    fn evaluate(&mut self, now: Instant) -> bool {
        let alive = now.saturating_duration_since(self.heard) <= DEAD_AFTER;
        let in_lease = self
            .answered_ping_sent
            .is_some_and(|sent| now.saturating_duration_since(sent) <= LEASE);
        let changed = alive != self.alive || in_lease != self.in_lease;
        (self.alive, self.in_lease) = (alive, in_lease);
        changed
    }
}

/// See the module docs. One per node, shared by the pinger, the RPC service and the pacer.
#[derive(Debug)]
pub struct Liveness {
    node: NodeId,
    started: Instant,
    peers: RwLock<HashMap<NodeId, Seen>>,
    /// Bumped whenever a peer turns alive or dead, or enters or leaves the lease.
    changes: watch::Sender<u64>,
}

impl Liveness {
    /// The liveness table of `node`, started now.
    pub fn new(node: NodeId) -> Liveness {
        Liveness::started_at(node, Instant::now())
    }

    /// [`Liveness::new`] as if started at `started` (tests).
    pub fn started_at(node: NodeId, started: Instant) -> Liveness {
        Liveness {
            node,
            started,
            peers: RwLock::default(),
            changes: watch::channel(0).0,
        }
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// Something arrived from `peer` (a ping of its own). Returns whether it was dead.
    pub fn heard_from(&self, peer: NodeId, now: Instant) -> bool {
        self.update(peer, now, |seen| seen.heard = seen.heard.max(now))
    }

    /// `peer` answered our ping sent at `sent`. Returns whether it was dead.
    pub fn answered(&self, peer: NodeId, sent: Instant, now: Instant) -> bool {
        self.update(peer, now, |seen| {
            seen.heard = seen.heard.max(now);
            seen.answered_ping_sent = Some(seen.answered_ping_sent.map_or(sent, |t| t.max(sent)));
        })
    }

    fn update(&self, peer: NodeId, now: Instant, change: impl FnOnce(&mut Seen)) -> bool {
        if peer == self.node {
            return false;
        }
        let (was_alive, changed) = {
            let mut peers = self.peers.write();
            let seen = peers.entry(peer).or_insert(Seen::new(self.started));
            change(seen);
            let was_alive = seen.alive;
            (was_alive, seen.evaluate(now))
        };
        if changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
        !was_alive
    }

    /// Whether `peer` counts as alive at `now` (this node always does).
    pub fn is_alive(&self, peer: NodeId, now: Instant) -> bool {
        if peer == self.node {
            return true;
        }
        let heard = self
            .peers
            .read()
            .get(&peer)
            .map_or(self.started, |seen| seen.heard);
        now.saturating_duration_since(heard) <= DEAD_AFTER
    }

    /// When `peer` counts as dead if nothing more is heard from it (this node never does).
    pub fn dead_from(&self, peer: NodeId) -> Option<Instant> {
        if peer == self.node {
            return None;
        }
        let heard = self
            .peers
            .read()
            .get(&peer)
            .map_or(self.started, |seen| seen.heard);
        Some(heard + DEAD_AFTER + Duration::from_millis(1))
    }

    /// Whether a quorum of `voters` (this node counts if it is one) answered a ping sent within
    /// [`LEASE`] of `now`: a quiet leader of a group with these voters may serve.
    pub fn lease_holds(&self, voters: impl IntoIterator<Item = NodeId>, now: Instant) -> bool {
        let peers = self.peers.read();
        let (mut voters_seen, mut in_lease) = (0usize, 0usize);
        for voter in voters {
            voters_seen += 1;
            let fresh = voter == self.node
                || peers
                    .get(&voter)
                    .and_then(|seen| seen.answered_ping_sent)
                    .is_some_and(|sent| now.saturating_duration_since(sent) <= LEASE);
            in_lease += usize::from(fresh);
        }
        in_lease * 2 > voters_seen
    }

    /// Re-evaluates every peer at `now` and returns those that turned dead since the last
    /// call (peers turning alive are noticed as they are heard). Bumps [`Liveness::changes`]
    /// when a peer died or left the lease (leases lapse without any event); the pinger calls
    /// this once per round.
    pub fn refresh(&self, now: Instant) -> Vec<NodeId> {
        let mut died = Vec::new();
        let mut changed = false;
        {
            let mut peers = self.peers.write();
            for (peer, seen) in peers.iter_mut() {
                let was_alive = seen.alive;
                changed |= seen.evaluate(now);
                if was_alive && !seen.alive {
                    died.push(*peer);
                }
            }
        }
        if changed {
            self.changes.send_modify(|generation| *generation += 1);
        }
        died
    }

    /// Registers `peer` (so that it can be declared dead without ever having been heard).
    pub fn track(&self, peer: NodeId) {
        if peer == self.node {
            return;
        }
        self.peers
            .write()
            .entry(peer)
            .or_insert(Seen::new(self.started));
    }

    /// Notified when a peer turns alive or dead, or enters or leaves the lease.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: NodeId = 1;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_peer_is_alive_until_dead_after_without_news() {
        let t0 = Instant::now();
        let live = Liveness::started_at(ME, t0);
        live.track(2);
        assert!(live.is_alive(2, t0 + DEAD_AFTER));
        assert!(!live.is_alive(2, t0 + DEAD_AFTER + ms(1)));
        live.heard_from(2, t0 + ms(900));
        assert!(live.is_alive(2, t0 + ms(1_800)));
        assert_eq!(live.refresh(t0 + ms(1_800)), Vec::<NodeId>::new());
        assert_eq!(live.refresh(t0 + ms(1_901)), vec![2]);
        // Reported once.
        assert_eq!(live.refresh(t0 + ms(2_000)), Vec::<NodeId>::new());
        assert!(live.is_alive(ME, t0 + ms(10_000)));
    }

    #[test]
    fn a_peer_is_dead_from_the_instant_dead_from_names() {
        let t0 = Instant::now();
        let live = Liveness::started_at(ME, t0);
        live.track(2);
        live.heard_from(2, t0 + ms(300));
        let dead = live.dead_from(2).expect("a peer");
        assert!(live.is_alive(2, dead - ms(1)));
        assert!(!live.is_alive(2, dead));
        live.heard_from(2, t0 + ms(500));
        assert_eq!(
            live.dead_from(2),
            Some(dead + ms(200)),
            "moves with what is heard"
        );
        assert_eq!(live.dead_from(ME), None);
    }

    #[test]
    fn the_lease_counts_answers_by_the_time_the_ping_was_sent() {
        let t0 = Instant::now();
        let live = Liveness::started_at(ME, t0);
        let voters = [ME, 2, 3];
        assert!(!live.lease_holds(voters, t0), "nobody answered yet");
        // Sent at 100, answered at 600: the lease runs from 100.
        live.answered(2, t0 + ms(100), t0 + ms(600));
        assert!(live.lease_holds(voters, t0 + ms(850)));
        assert!(!live.lease_holds(voters, t0 + ms(851)));
        // An older answer arriving late does not move the lease back.
        live.answered(2, t0 + ms(50), t0 + ms(700));
        assert!(live.lease_holds(voters, t0 + ms(850)));
        // A single voter always holds its lease; two of two need both.
        assert!(live.lease_holds([ME], t0 + ms(10_000)));
        assert!(live.lease_holds([ME, 2], t0 + ms(800)));
        assert!(!live.lease_holds([ME, 3], t0 + ms(800)));
    }

    #[test]
    fn a_peer_heard_again_turns_alive_and_is_announced() {
        let t0 = Instant::now();
        let live = Liveness::started_at(ME, t0);
        let mut changes = live.changes();
        live.track(2);
        assert_eq!(live.refresh(t0 + ms(1_500)), vec![2]);
        changes.borrow_and_update();
        assert!(live.heard_from(2, t0 + ms(1_600)), "it was dead");
        assert!(changes.has_changed().unwrap());
        assert!(!live.heard_from(2, t0 + ms(1_700)), "it was alive");
        assert!(live.is_alive(2, t0 + ms(1_600)));
    }
}
