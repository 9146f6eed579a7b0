//! Which replica serves a stream. Every replica runs the stream's group; the one that leads it
//! subscribes the stream's subjects, runs its consumers' delivery and acks and its max_age
//! expiry, and answers the stream's API requests. Followers only apply the log.
//!
//! A watcher per stream group on every replica follows the group's Raft metrics and switches
//! serving on and off as leadership comes and goes. After a failover the new leader's delivery
//! starts from the replicated consumer state, so whatever was delivered but not acknowledged
//! is delivered again once its ack wait passes (at-least-once). The watcher also notes since
//! when the replica has known no leader at all, which decides who answers for a leaderless
//! stream (`api::leaderless`). Also here: what `/jsz` shows of each local replica.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use openraft::ServerState;
use tokio_util::sync::CancellationToken;

use super::publish;
use super::service::JetStream;
use crate::consensus::leadership::{leadership_of, quorum_lost_after};
use crate::consensus::RaftGroup;
use crate::server::subscription::Subscription;

/// What the leader of a stream runs: the subscriptions on the stream's subjects (ingest) and
/// its own tasks (max_age expiry), stopped by `stop` when leadership ends.
pub(super) struct Leading {
    ingest: Vec<Arc<Subscription>>,
    stop: CancellationToken,
}

/// Whether a replica of a group (a stream's, or the meta group) knows a leader, since when it
/// knows none, and whether it has known one since the group started here: what decides when
/// it answers for a group without a leader (`api::leaderless`). One per group on each node,
/// written by the group's leadership watcher.
#[derive(Debug, Clone, Copy)]
pub struct LeaderClock {
    /// `None` while a leader is known.
    no_leader_since: Option<Instant>,
    knew_leader: bool,
}

/// How a replica has been without a leader (see [`LeaderClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leaderless {
    /// How long it has known no leader (since the group started here, if it never knew one).
    pub lasted: Duration,
    /// Whether it knew a leader at some point since the group started here.
    pub knew_leader: bool,
}

impl LeaderClock {
    /// A group just started here: no leader known yet.
    pub fn started() -> LeaderClock {
        LeaderClock {
            no_leader_since: Some(Instant::now()),
            knew_leader: false,
        }
    }

    /// Records whether a leader is known now.
    pub fn note(&mut self, knows_leader: bool) {
        match (knows_leader, self.no_leader_since) {
            (true, Some(_)) => {
                self.no_leader_since = None;
                self.knew_leader = true;
            }
            (false, None) => self.no_leader_since = Some(Instant::now()),
            _ => {}
        }
    }

    /// `None` while a leader is known.
    pub fn leaderless(&self) -> Option<Leaderless> {
        self.no_leader_since.map(|since| Leaderless {
            lasted: since.elapsed(),
            knew_leader: self.knew_leader,
        })
    }

    pub fn knows_leader(&self) -> bool {
        self.no_leader_since.is_none()
    }
}

/// One stream replica on this node as it holds it (`/jsz`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplicaState {
    pub name: String,
    pub group: u64,
    /// This replica leads the stream.
    pub leader: bool,
    pub applied_index: u64,
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub last_seq: u64,
}

async fn watch(js: Weak<JetStream>, name: String, group: Arc<RaftGroup>, stop: CancellationToken) {
    let mut metrics = group.raft().metrics();
    let lost_after = quorum_lost_after(group.raft().config());
    // Since when this node has led in the current term without a quorum ack.
    let mut unacked_since: Option<(u64, Instant)> = None;
    loop {
        let lead = {
            let m = metrics.borrow_and_update();
            let unacked = m.state == ServerState::Leader && m.millis_since_quorum_ack.is_none();
            unacked_since = match unacked_since {
                Some((term, since)) if unacked && term == m.current_term => Some((term, since)),
                _ if unacked => Some((m.current_term, Instant::now())),
                _ => None,
            };
            let unacked_for = unacked_since.map_or(Duration::ZERO, |(_, since)| since.elapsed());
            leadership_of(&m, group.node(), lost_after, unacked_for)
        };
        match js.upgrade() {
            Some(js) => {
                js.note_leader_known(&name, lead.knows_leader);
                js.set_leading(&name, lead.leads);
            }
            None => return,
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return },
        }
    }
}

/// Follows whether this node knows a meta leader (`api::leaderless` answers for the meta
/// group too), from the meta group in place: the supervisor may swap in a restarted one,
/// which is noticed within [`META_GROUP_RECHECK`].
pub(super) async fn watch_meta_leadership(js: Weak<JetStream>, shutdown: CancellationToken) {
    loop {
        let Some(group) = js.upgrade().map(|js| js.meta_group()) else {
            return;
        };
        let mut metrics = group.raft().metrics();
        let mut reporting = true;
        loop {
            metrics.borrow_and_update();
            let Some(js) = js.upgrade() else { return };
            let knows_leader = group.leadership().knows_leader;
            js.note_meta_leader_known(knows_leader);
            if !Arc::ptr_eq(&js.meta_group(), &group) {
                break;
            }
            drop(js);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // A stopped group's metrics end; its replacement is picked up by the recheck.
                changed = metrics.changed(), if reporting => reporting = changed.is_ok(),
                _ = tokio::time::sleep(META_GROUP_RECHECK) => {}
            }
        }
    }
}

/// How often the meta watcher looks for a restarted meta group.
const META_GROUP_RECHECK: Duration = Duration::from_secs(1);

impl JetStream {
    /// Starts following the leadership of stream `name`'s `group` until `stop`. A group that
    /// leads already (a single voter) is served before this returns, so a create's reply never
    /// precedes the stream's subscriptions.
    pub(super) fn watch_leadership(
        self: &Arc<Self>,
        name: &str,
        group: Arc<RaftGroup>,
        stop: CancellationToken,
    ) {
        self.set_leading(name, group.leader() == Some(self.node));
        self.shared
            .tasks
            .spawn(watch(Arc::downgrade(self), name.to_owned(), group, stop));
    }

    /// The stream's group was replaced (restarted after a storage failure): stop serving from
    /// the old one and follow the new one.
    pub(super) fn rewatch_leadership(self: &Arc<Self>, name: &str, group: Arc<RaftGroup>) {
        let stop = self.shared.shutdown.child_token();
        let previous = {
            let mut streams = self.streams.write();
            let Some(stream) = streams.get_mut(name) else {
                return;
            };
            stream.stop.cancel();
            stream.stop = stop.clone();
            stream.leading.take()
        };
        if let Some(previous) = previous {
            self.stop_leading(name, previous);
        }
        self.watch_leadership(name, group, stop);
    }

    /// Starts or stops serving stream `name` as its leader. Idempotent.
    pub(super) fn set_leading(self: &Arc<Self>, name: &str, leading: bool) {
        let (handle, subjects) = {
            let streams = self.streams.read();
            let Some(stream) = streams.get(name) else {
                return;
            };
            if stream.leading.is_some() == leading {
                return;
            }
            (stream.handle.clone(), stream.subjects.clone())
        };
        if !leading {
            let previous = self
                .streams
                .write()
                .get_mut(name)
                .and_then(|stream| stream.leading.take());
            if let Some(previous) = previous {
                self.stop_leading(name, previous);
                tracing::info!(stream = %name, "no longer leading the stream");
            }
            return;
        }
        // Subscribing may re-enter the router; no lock of ours is held meanwhile.
        let ingest = publish::attach(self, &handle, &subjects);
        self.delivery().attach_stream(&handle);
        let stop = self.shared.shutdown.child_token();
        self.shared
            .tasks
            .spawn(super::expiry::run(handle.clone(), stop.clone()));
        let started = Leading { ingest, stop };
        let mut streams = self.streams.write();
        match streams.get_mut(name) {
            Some(stream) if stream.leading.is_none() => {
                stream.leading = Some(started);
                drop(streams);
                tracing::info!(stream = %name, "leading the stream");
            }
            _ => {
                drop(streams);
                self.stop_leading(name, started);
            }
        }
    }

    /// Ends what a leader serves: ingest, expiry, delivery (waiting pulls get `409 Leadership
    /// Change`).
    pub(super) fn stop_leading(&self, name: &str, leading: Leading) {
        leading.stop.cancel();
        for sub in &leading.ingest {
            self.router().unsubscribe(sub);
        }
        self.delivery().leadership_lost(name);
        self.delivery().detach_stream(name);
    }

    /// Records whether this replica of stream `name` knows a leader of its group.
    fn note_leader_known(&self, name: &str, knows_leader: bool) {
        let changed = self
            .streams
            .read()
            .get(name)
            .is_some_and(|stream| stream.leader_clock.knows_leader() != knows_leader);
        if changed {
            if let Some(stream) = self.streams.write().get_mut(name) {
                stream.leader_clock.note(knows_leader);
            }
        }
    }

    /// How this replica of stream `name` has been without a leader of its group; `None` if it
    /// knows one, or does not run the stream.
    pub fn stream_leaderless(&self, name: &str) -> Option<Leaderless> {
        self.streams.read().get(name)?.leader_clock.leaderless()
    }

    fn note_meta_leader_known(&self, knows_leader: bool) {
        self.meta_leader_clock.lock().note(knows_leader);
    }

    /// How this node has been without a meta leader; `None` if it knows one.
    pub fn meta_leaderless(&self) -> Option<Leaderless> {
        self.meta_leader_clock.lock().leaderless()
    }

    /// Whether this node serves stream `name` now (it runs the stream's group and leads it).
    pub fn leads_stream(&self, name: &str) -> bool {
        self.streams
            .read()
            .get(name)
            .is_some_and(|stream| stream.leading.is_some())
    }

    /// Whether this node leads the meta group (and so answers account and stream-set requests).
    pub fn is_meta_leader(&self) -> bool {
        self.meta_group().leadership().leads
    }

    /// The meta leader's name, empty while there is none.
    pub fn meta_leader_name(&self) -> String {
        let group = self.meta_group();
        let leader = group.leader().filter(|_| group.leadership().knows_leader);
        match (leader, &self.cluster) {
            (None, _) => String::new(),
            (Some(_), None) => self.shared.identity.server_name.clone(),
            (Some(id), Some(cluster)) => cluster.peer_name(id).unwrap_or_else(|| id.to_string()),
        }
    }

    /// Every stream replica on this node with its local state (`/jsz`).
    pub fn replica_states(&self) -> Vec<ReplicaState> {
        let streams = self.streams.read();
        let mut states: Vec<ReplicaState> = streams
            .iter()
            .map(|(name, stream)| {
                let group = stream.handle.group();
                let (messages, bytes, first_seq, last_seq) = stream.handle.view().read(|state| {
                    let summary = state.stream().summary();
                    (
                        summary.messages,
                        summary.bytes,
                        summary.first_seq,
                        summary.last_seq,
                    )
                });
                let applied_index = group
                    .raft()
                    .metrics()
                    .borrow()
                    .last_applied
                    .map_or(0, |log| log.index);
                ReplicaState {
                    name: name.clone(),
                    group: group.id(),
                    leader: stream.leading.is_some(),
                    applied_index,
                    messages,
                    bytes,
                    first_seq,
                    last_seq,
                }
            })
            .collect();
        states.sort_by(|a, b| a.name.cmp(&b.name));
        states
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_remembers_a_leader_it_knew() {
        let mut clock = LeaderClock::started();
        let started = clock.leaderless().expect("no leader at start");
        assert!(!started.knew_leader);
        clock.note(true);
        assert!(clock.knows_leader());
        assert_eq!(clock.leaderless(), None);
        clock.note(false);
        let lost = clock.leaderless().expect("leader lost");
        assert!(lost.knew_leader);
        assert!(lost.lasted < Duration::from_secs(1));
    }

    #[test]
    fn no_leader_is_timed_from_when_it_was_first_missed() {
        let mut clock = LeaderClock::started();
        clock.note(true);
        clock.note(false);
        let first = clock.no_leader_since;
        clock.note(false);
        assert_eq!(clock.no_leader_since, first);
    }
}
