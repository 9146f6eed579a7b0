//! What the node pings tell the pacer, and what it tells them (ADR 0013): whether a quiet
//! leader's lease holds, which vote requests a quiet follower refuses or holds, the groups a
//! ping lists as led quietly and what a follower makes of such a list, and the quiet groups
//! that wake when a peer dies or comes back. `cluster::liveness` sends and answers the pings.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::decide::Wake;
use super::{behind, observe, publish_mode, Groups, Pacer, QuietList};
use crate::consensus::types::{GroupId, NodeId};

impl Pacer {
    /// Whether a quiet leader of a group with `voters` may serve: a quorum answered this
    /// node's pings within the lease.
    pub fn lease_holds(&self, voters: impl IntoIterator<Item = NodeId>) -> bool {
        self.inner.liveness.lease_holds(voters, Instant::now())
    }

    /// Whether `node` is alive by the pings.
    pub fn is_alive(&self, node: NodeId) -> bool {
        self.inner.liveness.is_alive(node, Instant::now())
    }

    /// Whether this node refuses `candidate`'s vote request in `group`: the group is quiet
    /// here and its leader, another node, is alive. The candidate lost touch with a leader
    /// that this node still hears, which keeps serving with this node as its quorum; granting
    /// the vote would make two nodes serve the stream. A vote that is refused wakes nothing.
    ///
    /// A refusal that would end within `bound` (the leader's node is about to count as dead
    /// here too) is waited out instead. The survivors of a dead leader hear its last pings up
    /// to a ping period apart, so the first to stand often asks a voter that still has the
    /// leader alive for a few more milliseconds; refused, it stood again only after an
    /// election timeout (300-600 ms), and the voter's own election could split the vote with
    /// it: an idle stream's failover took up to 2 s. The vote is granted under the same rule
    /// (the leader's node is dead here), only later; `bound` must stay below the candidate's
    /// vote timeout.
    pub async fn refuses_vote_within(
        &self,
        group: GroupId,
        candidate: NodeId,
        bound: Duration,
    ) -> bool {
        let give_up = Instant::now() + bound;
        loop {
            match self.refused_until(group, candidate) {
                Some(until) if until > give_up => return true,
                Some(until) if until > Instant::now() => {
                    tokio::time::sleep_until(until.into()).await
                }
                _ => return false,
            }
        }
    }

    /// Until when this node refuses `candidate`'s vote in `group` unless the leader's node
    /// is heard again: the group is quiet here and its leader is another node (None: no
    /// refusal).
    fn refused_until(&self, group: GroupId, candidate: NodeId) -> Option<Instant> {
        let leader = {
            let state = self.inner.state.lock();
            state
                .tracked
                .get(&group)
                .and_then(|t| t.pace.quiet_with())?
                .1
        };
        if leader == candidate || leader == self.inner.node {
            return None;
        }
        self.inner.liveness.dead_from(leader)
    }

    /// The groups this node leads quietly with `peer` among their voters, with their terms:
    /// what a ping to `peer` lists.
    pub fn quiet_led_for(&self, peer: NodeId) -> QuietList {
        let me = self.inner.node;
        let mut state = self.inner.state.lock();
        if let Some((built_at, list)) = state.sent.get(&peer) {
            if *built_at == state.generation {
                return list.clone();
            }
        }
        let mut listed: QuietList = state
            .tracked
            .iter()
            .filter_map(|(id, t)| match t.pace.quiet_with() {
                Some((term, leader)) if leader == me => t
                    .quiet_peers
                    .iter()
                    .any(|p| p.id == peer)
                    .then_some((*id, term)),
                _ => None,
            })
            .collect();
        listed.sort_unstable();
        let generation = state.generation;
        state.sent.insert(peer, (generation, listed.clone()));
        listed
    }

    /// A ping from `leader` listing the groups it leads quietly (with their terms). Quiet
    /// followers of `leader` whose group is not listed wake (it no longer leads it quietly);
    /// active followers of listed groups at the same term go quiet. Returns the listed groups
    /// this node knows at a higher term: `leader` was deposed without hearing of it.
    pub fn leader_lists(&self, leader: NodeId, quiet: &[(GroupId, u64)]) -> Vec<GroupId> {
        let now = Instant::now();
        let me = self.inner.node;
        let mut state = self.inner.state.lock();
        if let Some((at, list, stale)) = state.heard.get(&leader) {
            if *at == state.generation && list.as_slice() == quiet {
                return stale.clone();
            }
        }
        let listed: HashMap<GroupId, u64> = quiet.iter().copied().collect();
        let mut stale = Vec::new();
        let Groups {
            tracked,
            active,
            generation,
            heard,
            ..
        } = &mut *state;
        let mut woke = false;
        for (id, t) in tracked.iter_mut() {
            if let Some((term, quiet_leader)) = t.pace.quiet_with() {
                if quiet_leader == leader && quiet_leader != me && listed.get(id) != Some(&term) {
                    t.pace.wake(now, Wake::Event);
                    publish_mode(t, generation);
                    active.insert(*id);
                    woke = true;
                }
            }
        }
        // The task may be waiting for a wake with nothing active: without this it would not
        // step the woken groups, and one whose leader then died would never elect (seen in
        // jetstream_schedule's leader-change test, 1 run in 25).
        if woke {
            self.inner.wakes.notify.notify_one();
        }
        for (id, term) in quiet {
            let Some(t) = tracked.get_mut(id) else {
                continue;
            };
            if t.pace.quiet_with() == Some((*term, leader)) {
                continue; // already quiet with it: nothing to look at
            }
            let mut peers = Vec::new();
            let obs = observe(
                &t.raft,
                &t.signals,
                &self.inner.liveness,
                me,
                now,
                &mut peers,
            );
            // A replica rebuilt after amnesia, or one that holds entries it has not applied
            // (its sled lost them; the log still has them), needs the leader's appends or its
            // commit index to catch up: a quiet leader sends neither, so it is told to wake as
            // if deposed (ADR 0015).
            if obs.term > *term || t.signals.is_amnesiac() || behind(&t.raft) {
                stale.push(*id);
            } else if t.pace.leader_is_quiet(&obs, leader, *term) {
                publish_mode(t, generation);
                active.remove(id);
            }
        }
        heard.insert(leader, (*generation, quiet.to_vec(), stale.clone()));
        stale
    }

    /// Wakes `groups` (a peer said it knows them at a higher term).
    pub fn wake(&self, groups: &[GroupId]) {
        for group in groups {
            self.inner.wakes.push(*group, Wake::Event);
        }
    }

    /// Something arrived from `peer` at `now` (its ping).
    pub fn heard_from(&self, peer: NodeId, now: Instant) {
        if self.inner.liveness.heard_from(peer, now) {
            self.peer_returned(peer);
        }
    }

    /// `peer` answered a ping sent at `sent`.
    pub fn answered(&self, peer: NodeId, sent: Instant, now: Instant) {
        if self.inner.liveness.answered(peer, sent, now) {
            self.peer_returned(peer);
        }
    }

    /// One ping round ended: peers not heard for too long are dead, and the quiet groups they
    /// led wake to elect another leader.
    pub fn refresh(&self, now: Instant) {
        let died = self.inner.liveness.refresh(now);
        if died.is_empty() {
            return;
        }
        let state = self.inner.state.lock();
        let mut woken = 0;
        for (id, t) in &state.tracked {
            if t.pace
                .quiet_with()
                .is_some_and(|(_, leader)| died.contains(&leader))
            {
                self.inner.wakes.push(*id, Wake::Event);
                woken += 1;
            }
        }
        tracing::info!(
            ?died,
            woken,
            "peer nodes not heard from: their quiet groups wake"
        );
    }

    /// `peer` is alive again: quiet groups led here that it is behind in wake to catch it up.
    fn peer_returned(&self, peer: NodeId) {
        let me = self.inner.node;
        let state = self.inner.state.lock();
        for (id, t) in &state.tracked {
            let led_here = t.pace.quiet_with().is_some_and(|(_, leader)| leader == me);
            if led_here && t.quiet_peers.iter().any(|p| p.id == peer && !p.alive) {
                self.inner.wakes.push(*id, Wake::Event);
            }
        }
    }
}
