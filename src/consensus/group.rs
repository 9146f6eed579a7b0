//! [`RaftGroup`]: one running Raft group on this node (the meta group or one stream's group):
//! its openraft instance over a [`GroupLogStore`] and a [`GroupStateMachine`]. One per group
//! hosted on the node; held by the [`GroupRegistry`](super::GroupRegistry).
//!
//! ```ignore
//! let group = RaftGroup::start(GroupStart { group: 7, node: 1, voters, .. }).await?;
//! let response = group.propose(Command::new(KIND, payload)).await?; // committed + applied
//! ```
//!
//! `propose` returns after the command was committed (fsynced on a quorum; on one node: fsynced
//! there) and applied to the state machine, so its response can be acknowledged to a client.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::error::{InitializeError, RaftError};
use openraft::{Config, SnapshotPolicy};
use tokio_util::task::TaskTracker;

use super::amnesia::{self, Amnesia, AmnesiacPeers};
use super::batcher::ProposalBatcher;
use super::compactor::Compactor;
use super::error::{ProposeError, StartError};
use super::log_store::GroupLogStore;
use super::machine::{GroupMachine, MachineView};
use super::network::{GroupNetworkFactory, PeerTransport};
use super::node_storage::NodeStorage;
use super::pacer::{decide, GroupSignals, Mode, Pacer};
use super::state_machine::GroupStateMachine;
use super::types::{Command, GroupId, Node, NodeId, Proposal, Raft, Response};
use super::watchdog::logged_if_slow;

/// Tunables of a group. The defaults suit a broker hosting many groups on small machines.
/// Heartbeats and elections are not among them: the node's [`Pacer`] drives them.
#[derive(Clone, Debug)]
pub struct GroupOptions {
    /// Build a snapshot (and so allow purging the log) every this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind the snapshot, for followers that lag a little.
    pub logs_kept_after_snapshot: u64,
    /// How long [`RaftGroup::start`] waits for a single-voter group to elect itself.
    pub leader_wait: Duration,
    /// Size of one snapshot chunk sent to a follower.
    pub snapshot_chunk: u64,
}

impl Default for GroupOptions {
    fn default() -> Self {
        GroupOptions {
            snapshot_every: 10_000,
            logs_kept_after_snapshot: 1_000,
            leader_wait: Duration::from_secs(10),
            // openraft's 3 MiB chunks with a 200 ms timeout retried forever on big snapshots
            // (see the reliability anchors); larger timeout set below.
            snapshot_chunk: 4 << 20,
        }
    }
}

/// openraft's heartbeat period as configured: a day, so that each group's tick task (which
/// openraft spawns and wakes every 1.5 periods even with its timers off) practically never
/// runs. The pacer sends the heartbeats ([`decide::HEARTBEAT`]).
const OPENRAFT_TICK_OFF: Duration = Duration::from_secs(24 * 3600);

impl GroupOptions {
    /// openraft's config of a group: its timers off (the pacer triggers heartbeats and
    /// elections), the election timeouts kept because openraft derives the leader lease (how
    /// long a voter refuses another candidate after hearing the leader) from their maximum.
    /// Not `validate()`d: it would insist on a heartbeat shorter than the election timeout,
    /// which only matters to the timers that are off.
    fn raft_config(&self, group: GroupId) -> Config {
        Config {
            cluster_name: format!("jetraft-group-{group}"),
            heartbeat_interval: OPENRAFT_TICK_OFF.as_millis() as u64,
            election_timeout_min: decide::ELECTION_TIMEOUT.start.as_millis() as u64,
            election_timeout_max: decide::LEADER_LEASE.as_millis() as u64,
            enable_tick: false,
            enable_heartbeat: false,
            enable_elect: false,
            install_snapshot_timeout: 5_000,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.logs_kept_after_snapshot,
            snapshot_max_chunk_size: self.snapshot_chunk,
            ..Config::default()
        }
    }
}

/// Everything needed to start a group.
pub struct GroupStart {
    pub group: GroupId,
    /// This node's id.
    pub node: NodeId,
    /// The group's voters, used only when the group is new (first start anywhere).
    pub voters: BTreeMap<NodeId, Node>,
    pub storage: NodeStorage,
    pub transport: Arc<dyn PeerTransport>,
    pub machine: Box<dyn GroupMachine>,
    pub options: GroupOptions,
    /// Which voters initialize the group's membership if it is new.
    pub bootstrap: Bootstrap,
    /// The node's pacer, which drives the group's heartbeats and elections.
    pub pacer: Pacer,
}

/// Which voters of a new group initialize its membership when they start it. openraft makes a
/// voter that initializes stand for election at once (term 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bootstrap {
    /// Every voter, at once (a group with no voter list to pick from). Simultaneous
    /// candidates may split the first vote, and one that starts late may depose a leader
    /// elected meanwhile; [`Bootstrap::First`] avoids both.
    EveryVoter,
    /// This voter at once, so it leads within one vote round trip (the placement's first
    /// replica: first replicas are spread, so leaders are). The other voters start without a
    /// membership, grant it their vote and learn the membership from its first append. One
    /// that has seen neither after [`BOOTSTRAP_FALLBACK`] (the first voter is down)
    /// initializes the membership itself. A voter that started late never runs an election of
    /// its own next to a leader elected meanwhile: one at a higher term would depose that
    /// leader, leaving the group without one for an election timeout.
    First(NodeId),
}

/// How long a voter of a new [`Bootstrap::First`] group waits for the first voter before it
/// initializes the membership itself: several vote round trips and an election timeout.
pub const BOOTSTRAP_FALLBACK: Duration = Duration::from_secs(2);

impl Bootstrap {
    /// Whether `node` initializes a new group with `voters` as soon as it starts it.
    fn initializes_at_once(self, node: NodeId, voters: &BTreeMap<NodeId, Node>) -> bool {
        match self {
            Bootstrap::EveryVoter => true,
            Bootstrap::First(first) => first == node || !voters.contains_key(&first),
        }
    }
}

/// One running group. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct RaftGroup {
    group: GroupId,
    node: NodeId,
    raft: Raft,
    log: GroupLogStore,
    view: MachineView,
    batcher: ProposalBatcher,
    /// For forwarding proposals to the leader.
    transport: Arc<dyn PeerTransport>,
    pacer: Pacer,
    signals: Arc<GroupSignals>,
    /// Peers that refused this replica's vote requests as amnesiac (ADR 0018).
    amnesiac_peers: Arc<AmnesiacPeers>,
    compactor: Compactor,
    /// Tracks the state machine and its snapshot builders, which openraft drops on tasks of
    /// its own after its core ended: [`shutdown`](Self::shutdown) waits for them, so a stopped
    /// group holds nothing of the database (`GroupStateMachine::hold`).
    machine_held: TaskTracker,
}

/// [`Bootstrap::First`] on a voter that is not first: initializes the membership after
/// [`BOOTSTRAP_FALLBACK`] unless the group has heard from a candidate or leader by then.
fn initialize_unless_joined(raft: Raft, group: GroupId, voters: BTreeMap<NodeId, Node>) {
    tokio::spawn(async move {
        tokio::time::sleep(BOOTSTRAP_FALLBACK).await;
        // openraft counts a granted vote as initialized too; an error means the group stopped.
        if !matches!(raft.is_initialized().await, Ok(false)) {
            return;
        }
        match raft.initialize(voters).await {
            Ok(()) => tracing::info!(group, "first voter silent: initialized the membership"),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
            Err(e) => tracing::debug!(group, "late initialize failed: {e}"),
        }
    });
}

/// An amnesiac replica (`amnesia.rs`): waits until it has caught up with a leader, then
/// leaves the register and may vote and campaign again.
fn watch_amnesia(
    raft: Raft,
    group: GroupId,
    node: NodeId,
    amnesia: Arc<Amnesia>,
    signals: Arc<GroupSignals>,
) {
    tracing::warn!(
        group,
        "replica rebuilt from its peers: no vote or election until caught up"
    );
    tokio::spawn(async move {
        let caught_up = raft
            .wait(None)
            .metrics(
                |m| {
                    amnesia::caught_up(
                        node,
                        m.vote.leader_id().term,
                        m.vote.is_committed(),
                        m.current_leader,
                        m.last_applied,
                    )
                },
                "caught up after amnesia",
            )
            .await;
        if caught_up.is_err() {
            return; // the group stopped; it stays amnesiac
        }
        let cleared = {
            let amnesia = amnesia.clone();
            tokio::task::spawn_blocking(move || amnesia.clear(group)).await
        };
        match cleared {
            Ok(Ok(())) => {
                signals.set_amnesiac(false);
                tracing::warn!(
                    group,
                    "rebuilt replica caught up with its leader: votes again"
                );
            }
            Ok(Err(e)) => tracing::error!(group, "cannot record the caught-up replica: {e}"),
            Err(e) => tracing::error!(group, "cannot record the caught-up replica: {e}"),
        }
    });
}

/// How often a proposal may be forwarded before it fails: a leader change in the middle is
/// followed once more, a loop is not.
pub const MAX_FORWARD_HOPS: u32 = 2;

impl RaftGroup {
    /// Open the group's storage, start its openraft instance, initialize its membership if the
    /// group is new, and for a single-voter group wait until it leads.
    pub async fn start(start: GroupStart) -> Result<RaftGroup, StartError> {
        let GroupStart {
            group,
            node,
            voters,
            storage,
            transport,
            machine,
            options,
            bootstrap,
            pacer,
        } = start;
        let config = Arc::new(options.raft_config(group));
        let log = GroupLogStore::new(group, node, storage.log.clone());
        let mut state_machine = GroupStateMachine::open(
            group,
            storage.state.clone(),
            storage.snapshot_dir(group),
            machine,
        )
        .await?;
        state_machine.compact_with(storage.compactor.clone());
        let machine_held = TaskTracker::new();
        state_machine.hold(machine_held.token());
        let view = state_machine.view();
        let amnesiac_peers = Arc::new(AmnesiacPeers::default());
        let network = GroupNetworkFactory::new(group, transport.clone(), amnesiac_peers.clone());
        // openraft reads the current snapshot's metadata while it starts: no dump for that.
        let dumps = state_machine.dump_gate();
        dumps.close();
        let raft = Raft::new(node, config, network, log.clone(), state_machine).await;
        dumps.open();
        let raft = raft?;
        let signals = pacer.track(group, raft.clone());
        storage.compactor.track(
            group,
            node,
            raft.clone(),
            options.logs_kept_after_snapshot,
            storage.log.live_bytes(group),
        );
        let started = RaftGroup {
            group,
            node,
            batcher: ProposalBatcher::new(raft.clone(), log.durable()),
            transport,
            raft,
            log,
            view,
            pacer,
            signals,
            amnesiac_peers,
            compactor: storage.compactor.clone(),
            machine_held,
        };
        let single_voter = voters.len() == 1 && voters.contains_key(&node);
        if storage.amnesia.is_amnesiac(group) {
            if single_voter {
                // No peer holds its data: nothing to rebuild it from (ADR 0015).
                started.shutdown().await?;
                return Err(StartError::Amnesiac { group });
            }
            // Neither initialize nor campaign nor vote until caught up with a leader.
            started.signals.set_amnesiac(true);
            watch_amnesia(
                started.raft.clone(),
                group,
                node,
                storage.amnesia.clone(),
                started.signals.clone(),
            );
            return Ok(started);
        }
        let began = async {
            let initialized = started.raft.is_initialized().await?;
            if !initialized && bootstrap.initializes_at_once(node, &voters) {
                match started.raft.initialize(voters).await {
                    Ok(()) => {}
                    // Another voter initialized first: fine.
                    Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {}
                    Err(e) => return Err(e.into()),
                }
            } else if !initialized {
                initialize_unless_joined(started.raft.clone(), group, voters);
            } else if single_voter {
                // A restarted single voter would wait an election timeout before leading again.
                started.raft.trigger().elect().await?;
            }
            if single_voter {
                started.wait_for_leader(options.leader_wait).await?;
            }
            Ok::<(), StartError>(())
        }
        .await;
        if let Err(e) = began {
            // Nothing of a failed start runs on: not its core, nor its machine holding the
            // database, nor the group's pacing and compaction.
            if let Err(stop) = started.shutdown().await {
                tracing::debug!(group, error = %stop, "failed start did not stop cleanly");
            }
            return Err(e);
        }
        Ok(started)
    }

    pub fn id(&self) -> GroupId {
        self.group
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The openraft handle, for the transport's RPC dispatch and for metrics.
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Read access to the group's state-machine keys (sled), from any task.
    pub fn view(&self) -> MachineView {
        self.view.clone()
    }

    /// The index of the last entry this replica applied (0 before any).
    pub fn applied_index(&self) -> u64 {
        self.raft
            .metrics()
            .borrow()
            .last_applied
            .map_or(0, |log| log.index)
    }

    /// Waits, at most `wait`, until this replica has applied its log up to `index`; whether it
    /// did.
    pub async fn wait_applied(&self, index: u64, wait: Duration) -> bool {
        self.raft
            .wait(Some(wait))
            .applied_index_at_least(Some(index), "applied")
            .await
            .is_ok()
    }

    /// Waits, at most `wait`, until this replica has applied its log as it stands now (for a
    /// leader just elected: up to its blank entry, the rule it serves by); whether it did.
    pub async fn wait_caught_up(&self, wait: Duration) -> bool {
        let last = self.raft.metrics().borrow().last_log_index;
        match last {
            Some(index) => self.wait_applied(index, wait).await,
            None => true,
        }
    }

    /// Wait until the group has a leader (any node).
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, StartError> {
        let metrics = self
            .raft
            .wait(Some(timeout))
            .metrics(|m| m.current_leader.is_some(), "leader elected")
            .await
            .map_err(|_| StartError::NoLeader {
                group: self.group,
                waited: timeout,
            })?;
        Ok(metrics.current_leader.expect("waited for a leader"))
    }

    /// Whether this replica serves as leader and knows one, by the lost-quorum rule of
    /// [`leadership_of`](super::leadership::leadership_of). A leader just elected counts as in
    /// contact (a caller that tracks for how long it has led without an ack uses the function).
    pub fn leadership(&self) -> super::leadership::Leadership {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        super::leadership::leadership_of(
            &metrics,
            self.node,
            super::leadership::quorum_lost_after(self.raft.config()),
            Duration::ZERO,
            self.quiet_contact(&metrics),
        )
    }

    /// The replicas of this group known unable to vote because they lost their state to
    /// corruption (ADR 0015): this one if it is amnesiac, and the peers that refused its
    /// vote requests as amnesiac lately.
    pub fn amnesiac_replicas(&self) -> BTreeSet<NodeId> {
        let mut replicas = self.amnesiac_peers.recent(Instant::now());
        if self.signals.is_amnesiac() {
            replicas.insert(self.node);
        }
        replicas
    }

    /// The group's pacing signals: its mode, and the doors proposals and RPCs wake it by.
    pub fn signals(&self) -> &Arc<GroupSignals> {
        &self.signals
    }

    /// The node's pacer.
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    /// How a quiet (or waking) replica is in contact, by node liveness: whether its lease
    /// holds (a leader) and whether its leader's node is alive (a follower). None while the
    /// group is active: openraft's own acknowledgements say it then.
    pub fn quiet_contact(
        &self,
        metrics: &openraft::RaftMetrics<NodeId, Node>,
    ) -> Option<super::leadership::QuietContact> {
        if self.signals.mode() == Mode::Active {
            return None;
        }
        let voters = metrics.membership_config.membership().voter_ids();
        Some(super::leadership::QuietContact {
            lease_holds: self.pacer.lease_holds(voters),
            leader_alive: metrics
                .current_leader
                .is_none_or(|leader| self.pacer.is_alive(leader)),
        })
    }

    /// The current leader, if known.
    pub fn leader(&self) -> Option<NodeId> {
        self.raft.metrics().borrow().current_leader
    }

    /// Propose one command; returns its response once committed and applied. Concurrent
    /// proposals to the group are packed into shared Raft entries (see
    /// [`batcher`](super::batcher)); each still gets its own response.
    /// On a follower the command is forwarded to the leader.
    pub async fn propose(&self, command: Command) -> Result<Response, ProposeError> {
        self.signals.proposed();
        if let Some((leader, node)) = self.other_leader() {
            let mut responses = self.forward_to(leader, node, vec![command], 0).await?;
            return responses.pop().ok_or(ProposeError::MissingResponses {
                commands: 1,
                answered: 0,
            });
        }
        self.batcher.propose(command).await
    }

    /// Propose several commands to go into one Raft entry together (contiguous, in order; the
    /// entry may carry other proposals' commands too, see `batcher.rs`); returns their
    /// responses once committed and applied. On a follower they are forwarded to the leader.
    pub async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Response>, ProposeError> {
        self.propose_all_forwarded(commands, 0).await
    }

    /// [`propose_all`](Self::propose_all) for a proposal that was forwarded `hops` times.
    ///
    /// Only a proposal this replica never appended is forwarded: if leadership is lost while
    /// the entry waits for its commit, the error is returned instead, because the entry may
    /// still be committed by the next leader and forwarding it would apply it twice.
    pub async fn propose_all_forwarded(
        &self,
        commands: Vec<Command>,
        hops: u32,
    ) -> Result<Vec<Response>, ProposeError> {
        self.signals.proposed();
        if let Some((leader, node)) = self.other_leader() {
            return self.forward_to(leader, node, commands, hops).await;
        }
        self.batcher.propose_all(commands).await
    }

    /// The leader, when it is known and another node.
    fn other_leader(&self) -> Option<(NodeId, Node)> {
        let metrics = self.raft.metrics();
        let metrics = metrics.borrow();
        let leader = metrics
            .current_leader
            .filter(|leader| *leader != self.node)?;
        let node = metrics
            .membership_config
            .membership()
            .get_node(&leader)?
            .clone();
        Some((leader, node))
    }

    async fn forward_to(
        &self,
        leader: NodeId,
        node: Node,
        commands: Vec<Command>,
        hops: u32,
    ) -> Result<Vec<Response>, ProposeError> {
        if hops >= MAX_FORWARD_HOPS {
            return Err(ProposeError::NotLeader {
                leader: Some(leader),
                leader_node: Some(node),
            });
        }
        self.transport
            .forward_proposal(self.group, leader, node, Proposal { commands }, hops + 1)
            .await
    }

    /// Stop the group (its data stays). Persists the committed index for a quick restart.
    /// Returns once the state machine and any snapshot build of it are gone too, so nothing of
    /// the group holds the database any more.
    pub async fn shutdown(&self) -> Result<(), StartError> {
        self.pacer.untrack(self.group);
        self.compactor.untrack(self.group);
        let group = self.group;
        logged_if_slow(group, "stopping openraft's core", self.raft.shutdown()).await?;
        let flushed = logged_if_slow(
            group,
            "persisting the committed index",
            self.log.flush_committed(),
        );
        if let Err(e) = flushed.await {
            tracing::warn!(group, error = %e, "committed index not persisted at shutdown");
        }
        // openraft's state-machine task ends after the core (its queue closed), a snapshot
        // build once its sync is done: neither is joined by `Raft::shutdown`.
        self.machine_held.close();
        let machine_ended = self.machine_held.wait();
        logged_if_slow(
            group,
            "the state machine's task and snapshot build ending",
            machine_ended,
        )
        .await;
        Ok(())
    }

    /// The voters of a single-node group on `node`.
    pub fn single_voter(node: NodeId, addr: impl ToString) -> BTreeMap<NodeId, Node> {
        let mut voters = BTreeMap::new();
        voters.insert(node, Node::new(addr));
        voters
    }

    /// Voter ids of the group's current membership.
    pub fn voter_ids(&self) -> BTreeSet<NodeId> {
        self.raft
            .metrics()
            .borrow()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }
}
