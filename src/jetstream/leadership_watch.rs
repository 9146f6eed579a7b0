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
        self.task
            .send(shared, Watch::new(name, group, stop), |added| {
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
        let lead = leadership_of(&m, self.group.node(), self.lost_after, unacked_for, quiet);
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
