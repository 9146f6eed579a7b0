//! One task per node follows the leadership of every stream group running here (a task per
//! group cost each idle stream a task and its wake-ups; issue 15). Each group's watch is a
//! future in the task's `FuturesUnordered` that resolves when something the group's
//! leadership depends on changed: its Raft metrics, its pacing mode, or (while the group is
//! not active) the node's liveness of its peers. The task then re-reads the group, switches
//! serving on or off (`leadership`) and waits again. Only changed groups are polled.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use openraft::ServerState;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::catalog::Catalog;
use super::node_task::NodeTask;
use crate::consensus::leadership::{leadership_of, quorum_lost_after, Leadership};
use crate::consensus::pacer::Mode;
use crate::consensus::{Node, NodeId, RaftGroup};

/// The node's one leadership watcher task, started by the first watch.
#[derive(Default)]
pub(super) struct LeadershipWatchers {
    task: NodeTask<Watch>,
}

impl LeadershipWatchers {
    /// Follows `group` (stream `name`) until `stop`, starting the node's task if needed.
    pub(super) fn watch(
        &self,
        catalog: &Arc<Catalog>,
        name: &str,
        group: Arc<RaftGroup>,
        stop: CancellationToken,
    ) {
        let shared = catalog.shared();
        let mut watch = Watch::new(name, group, stop);
        // Decided now, by the rule the task follows after: serving starts before this returns
        // when it can, and the task's first report repeats the decision.
        watch.report(catalog);
        self.task.send(shared, watch, |added| {
            run(Arc::downgrade(catalog), added, shared.shutdown.clone())
        });
    }
}

/// The task: report each group once when added and again at each change.
async fn run(
    catalog: Weak<Catalog>,
    mut added: mpsc::UnboundedReceiver<Watch>,
    shutdown: CancellationToken,
) {
    let mut watching = FuturesUnordered::new();
    loop {
        let mut next = tokio::select! {
            _ = shutdown.cancelled() => return,
            watch = added.recv() => match watch {
                Some(watch) => watch,
                None => return,
            },
            // An empty set yields None: the branch is off until the next watch is added.
            Some(changed) = watching.next() => match changed {
                Some(watch) => watch,
                None => continue, // stopped, or its group is gone
            },
        };
        let Some(catalog) = catalog.upgrade() else {
            return;
        };
        next.report(&catalog);
        drop(catalog);
        watching.push(next.changed());
    }
}

/// One group's watch: what it listens to and how long it has led without a quorum ack.
struct Watch {
    name: String,
    group: Arc<RaftGroup>,
    stop: CancellationToken,
    metrics: watch::Receiver<openraft::RaftMetrics<NodeId, Node>>,
    // A quiet group's metrics do not move: its mode and the node's liveness do.
    modes: watch::Receiver<Mode>,
    liveness: watch::Receiver<u64>,
    lost_after: Duration,
    /// Since when this node has led in the current term without a quorum ack.
    unacked_since: Option<(u64, Instant)>,
    /// The term this node leads in and the log index it must have applied before it serves
    /// in it (see [`CatchUp`]).
    catch_up: Option<CatchUp>,
}

/// A leader serves only once it has applied its whole log as it stood when it first led in
/// the term: what an earlier leader (or this node, before a restart) committed may not be
/// applied here yet, and a `STREAM.INFO`, a get or a delivery would read a state that lacks
/// acknowledged messages. A new leader's blank entry is the last of that log, so this is
/// Raft's rule that a leader serves reads once an entry of its term is committed; a leader
/// restored at startup (same term, its vote restored) waits for the entries it had not
/// applied before the restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct CatchUp {
    term: u64,
    index: u64,
}

impl CatchUp {
    /// The catch-up after `previous` for a replica that is `leader` now, by its metrics.
    pub(super) fn next(
        previous: Option<CatchUp>,
        leader: bool,
        term: u64,
        last_log_index: Option<u64>,
    ) -> Option<CatchUp> {
        match previous {
            Some(catch_up) if leader && catch_up.term == term => Some(catch_up),
            _ if leader => Some(CatchUp {
                term,
                index: last_log_index.unwrap_or(0),
            }),
            _ => None,
        }
    }

    /// Whether a replica that applied up to `applied` has caught up.
    pub(super) fn done(&self, applied: Option<u64>) -> bool {
        applied.unwrap_or(0) >= self.index
    }
}

impl Watch {
    fn new(name: &str, group: Arc<RaftGroup>, stop: CancellationToken) -> Watch {
        Watch {
            name: name.to_owned(),
            metrics: group.raft().metrics(),
            modes: group.signals().modes(),
            liveness: group.pacer().liveness().changes(),
            lost_after: quorum_lost_after(group.raft().config()),
            unacked_since: None,
            catch_up: None,
            group,
            stop,
        }
    }

    /// Reads the group's leadership now and serves (or stops serving) accordingly.
    fn report(&mut self, catalog: &Arc<Catalog>) {
        let (lead, stopped) = self.read();
        if stopped {
            catalog.group_stopped.notify_one();
        }
        super::leadership::note_leader_known(catalog, &self.name, lead.knows_leader);
        match lead.leads {
            true => super::leadership::start_serving(catalog, &self.name),
            false => super::leadership::stop_serving(catalog, &self.name),
        }
    }

    fn read(&mut self) -> (Leadership, bool) {
        let m = self.metrics.borrow_and_update();
        let unacked = m.state == ServerState::Leader && m.millis_since_quorum_ack.is_none();
        self.unacked_since = match self.unacked_since {
            Some((term, since)) if unacked && term == m.current_term => Some((term, since)),
            _ if unacked => Some((m.current_term, Instant::now())),
            _ => None,
        };
        let unacked_for = self
            .unacked_since
            .map_or(Duration::ZERO, |(_, since)| since.elapsed());
        self.modes.borrow_and_update();
        self.liveness.borrow_and_update();
        let quiet = self.group.quiet_contact(&m);
        let mut lead = leadership_of(&m, self.group.node(), self.lost_after, unacked_for, quiet);
        let leader = m.state == ServerState::Leader;
        self.catch_up = CatchUp::next(self.catch_up, leader, m.current_term, m.last_log_index);
        let applied = m.last_applied.map(|id| id.index);
        lead.leads &= self.catch_up.is_none_or(|catch_up| catch_up.done(applied));
        (lead, m.running_state.is_err())
    }

    /// Waits for the next change; None once stopped or the group is gone.
    async fn changed(mut self) -> Option<Watch> {
        let active = self.group.signals().mode() == Mode::Active;
        let changed = tokio::select! {
            _ = self.stop.cancelled() => false,
            changed = self.metrics.changed() => changed.is_ok(),
            changed = self.modes.changed() => changed.is_ok(),
            // Liveness matters only to a group that is not active.
            changed = self.liveness.changed(), if !active => changed.is_ok(),
        };
        changed.then_some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::CatchUp;

    #[test]
    fn a_new_leader_serves_once_it_applied_its_log_as_it_stood() {
        // Elected in term 3 with entries up to 10 (its blank entry the last): not before 10.
        let catch_up = CatchUp::next(None, true, 3, Some(10)).unwrap();
        assert!(!catch_up.done(Some(9)));
        assert!(catch_up.done(Some(10)));
        // Later appends in the same term do not move the mark: a busy leader keeps serving.
        let again = CatchUp::next(Some(catch_up), true, 3, Some(500));
        assert_eq!(again, Some(catch_up));
        assert!(again.unwrap().done(Some(10)));
    }

    #[test]
    fn a_new_term_or_a_follower_starts_over() {
        let catch_up = CatchUp::next(None, true, 3, Some(10));
        assert_eq!(CatchUp::next(catch_up, false, 3, Some(10)), None);
        let next_term = CatchUp::next(catch_up, true, 4, Some(12)).unwrap();
        assert!(!next_term.done(Some(11)));
        assert!(next_term.done(Some(12)));
        // An empty log: nothing to apply first.
        assert!(CatchUp::next(None, true, 1, None).unwrap().done(None));
    }
}
