//! `JetStream`: the lifecycle of this node's JetStream over its `Catalog`. Start-up, meta
//! proposals, reconciliation against the meta state, shutdown; the one place that spawns the
//! API (`api::attach`), the leadership watchers and the supervisor. One per node with `-js`.
//!
//! Start-up: open the node's Raft storage under the store directory (the WAL, sled and
//! snapshots: `consensus::NodeStorage`), start the meta group (every node of the topology a
//! voter; one node: itself), start every stream group the meta state places on this node, and
//! subscribe `$JS.API.>`. Reconciliation runs after every meta change this node proposes and
//! whenever the meta machine applies an entry; it is idempotent.
//!
//! Every replica of a stream runs its group; only the replica that leads it serves it (see
//! `leadership`): the stream's subjects, its consumers' delivery and acks, max_age expiry. On a
//! single node that is always this node; in a cluster, interest propagation brings a client's
//! publish from any node to the leader.
//!
//! Memory streams (`storage: memory`) run in a second registry over their own storage under
//! `<store_dir>/memory`: a WAL that never fsyncs and its own sled, wiped at every start. So
//! their PubAcks do not wait for a disk, and after a restart such a stream exists (its
//! definition is in the meta group) but is empty, as nats-server's memory streams are.
//!
//! `JetStream` dereferences to its `Catalog`, so API handlers and monitoring read the catalog
//! through it. The one import circle left in `jetstream/` is here: `api` handlers propose
//! through `JetStream::propose_meta` (which reconciles before a create answers, so the new
//! stream is served by then), and this file starts the API.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Weak};

use tokio_util::sync::CancellationToken;

use super::api;
use super::catalog::{origins_of, Catalog, Groups, Origins, RunningStream};
use super::error::JetStreamError;
use super::groups;
use super::leadership;
use super::meta::{MetaCommand, MetaMachine, MetaOutcome, StreamAssignment, META_GROUP};
use super::offline::OfflineStream;
use super::payload::{self, META_COMMAND_V1};
use super::stream::{propose_error, StreamHandle};
use super::supervisor;
use super::topology::Topology;
use crate::cluster::ClusterNode;
use crate::consensus::node_storage::StorageOpenError;
use crate::consensus::pacer::Pacer;
use crate::consensus::watchdog::logged_if_slow;
use crate::consensus::{GroupOptions, GroupRegistry, NodeStorage};
use crate::jsapi::{ApiError, ErrorKind, StorageType};
use crate::server::subscription::Subscription;
use crate::server::ServerShared;
use crate::store::log::LogOptions;

/// Where memory streams keep their (unsynced, wiped at start) storage, under the store dir.
const MEMORY_DIR: &str = "memory";

/// How long [`JetStream::close`] waits for the state databases to be let go of before it
/// reports what still holds one (a bug) and returns.
const STORE_CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The longest a meta change's proposer waits to apply it itself (see
/// [`JetStream::propose_meta`]); past it, the change still arrives, a moment later.
const META_CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long starting a stream waits for a group that leads here to apply its log before the
/// stream is served (a single voter's own blank entry: one fsync).
const LEADER_CATCH_UP_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// See the module docs.
pub struct JetStream {
    catalog: Arc<Catalog>,
    api_subscription: parking_lot::Mutex<Option<Arc<Subscription>>>,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream").finish_non_exhaustive()
    }
}

impl std::ops::Deref for JetStream {
    type Target = Catalog;

    fn deref(&self) -> &Catalog {
        &self.catalog
    }
}

impl JetStream {
    /// Starts JetStream on this node: a cluster of one without `cluster`.
    pub async fn start(
        shared: Arc<ServerShared>,
        cluster: Option<Arc<ClusterNode>>,
        log_options: LogOptions,
    ) -> Result<Arc<JetStream>, JetStreamError> {
        let topology = Topology::new(shared.identity.server_name.clone(), cluster);
        // A damaged store is rebuilt from the peers when there are any (ADR 0015); on a
        // node alone it stays where it is and the node does not start (nothing dropped).
        let rebuild = topology.node_ids().len() > 1;
        let dir = shared.config.store_dir.clone();
        let (storage, report) = tokio::task::spawn_blocking(move || {
            NodeStorage::open_or_rebuild(&dir, log_options, rebuild)
        })
        .await??;
        for corrupt in &report.corrupt_groups {
            tracing::error!(
                group = corrupt,
                "raft group is corrupt in the log: rebuilt from its peers if replicated, else its stream stays offline until deleted"
            );
        }
        tracing::info!(
            store_dir = %shared.config.store_dir.display(),
            "JetStream storage opened: {report:?}"
        );
        let node = topology.node_id();
        let transport = topology.transport();
        let mut options = GroupOptions::default();
        if let Some(every) = shared.config.raft_compact_every {
            options.snapshot_every = every.max(1);
            options.logs_kept_after_snapshot = every / 10;
        }
        // One pacer for the node's groups, file and memory.
        let pacer = Pacer::start(node);
        let registry = Arc::new(GroupRegistry::new(
            node,
            storage,
            transport.clone(),
            options.clone(),
            pacer.clone(),
        ));
        let memory_storage = open_memory_storage(&shared).await?;
        let memory_registry = Arc::new(GroupRegistry::new(
            node,
            memory_storage,
            transport,
            options,
            pacer.clone(),
        ));
        topology.serve_registries(vec![registry.clone(), memory_registry.clone()], &pacer);
        let (machine, meta) = MetaMachine::new();
        let meta_group = groups::open_meta_group(&registry, &topology, machine).await?;
        let groups = Groups {
            registry,
            memory_registry,
            meta_group,
            meta,
        };
        let js = Arc::new(JetStream {
            catalog: Arc::new(Catalog::new(shared, topology, groups)),
            api_subscription: parking_lot::Mutex::new(None),
        });
        js.reconcile_all().await;
        let shutdown = js.shared().shutdown.clone();
        js.shared().tasks.spawn(reconcile_on_meta_changes(
            Arc::downgrade(&js),
            js.meta().applied(),
            shutdown.clone(),
        ));
        js.shared().tasks.spawn(leadership::watch_meta_leadership(
            Arc::downgrade(&js.catalog),
            shutdown.clone(),
        ));
        *js.api_subscription.lock() = Some(api::attach(&js));
        js.shared()
            .tasks
            .spawn(supervise(Arc::downgrade(&js), shutdown));
        tracing::info!(
            streams = js.stream_names().len(),
            "JetStream ready (meta group and stream groups started)"
        );
        Ok(js)
    }

    /// The catalog this lifecycle runs (what `JetStream` dereferences to).
    pub fn catalog(&self) -> &Arc<Catalog> {
        &self.catalog
    }

    /// Proposes a meta command, then brings the local stream groups in line with the result.
    /// Returns once this node has applied it too (bounded, see [`catch_up_with_meta_leader`]).
    ///
    /// [`catch_up_with_meta_leader`]: Self::catch_up_with_meta_leader
    pub async fn propose_meta(&self, command: MetaCommand) -> Result<MetaOutcome, ApiError> {
        let group = self.meta_group();
        let proposed = group.propose(payload::command(META_COMMAND_V1, &command));
        let response = logged_if_slow(META_GROUP, "a meta proposal", proposed)
            .await
            .map_err(propose_error)?;
        self.catch_up_with_meta_leader().await;
        let outcome = payload::decode_response::<MetaOutcome>(&response).unwrap_or_else(|e| {
            tracing::error!("undecodable meta response: {e}");
            Err(ApiError::new(ErrorKind::ClusterNotAvail))
        })?;
        self.reconcile().await;
        Ok(outcome)
    }

    /// Waits, at most [`META_CATCH_UP_WAIT`], until this node has applied the meta log as far as
    /// the meta leader has. A proposal a meta follower forwards returns once the leader applied
    /// it, and the follower learns the commit with the leader's next append or heartbeat; what
    /// it answers next (a stream it leads, after that stream's update) reads its own meta state.
    async fn catch_up_with_meta_leader(&self) {
        let group = self.meta_group();
        let leader = group.raft().metrics().borrow().current_leader;
        let Some(leader) = leader.filter(|leader| *leader != self.node_id()) else {
            return;
        };
        if let Some(index) = self.topology().applied_index(leader, META_GROUP).await {
            group.wait_applied(index, META_CATCH_UP_WAIT).await;
        }
    }

    /// Brings the streams whose assignment changed since the last pass in line with the meta
    /// state (every stream after the meta state was loaded): see [`reconcile_all`].
    ///
    /// [`reconcile_all`]: Self::reconcile_all
    pub async fn reconcile(&self) {
        let turn = self.catalog.reconciling.lock();
        let _serialized = logged_if_slow(META_GROUP, "the reconciliation's turn", turn).await;
        let changed = self.catalog.meta().take_changed();
        match changed.all {
            true => self.reconcile_scope(None).await,
            false if changed.names.is_empty() => {}
            false => self.reconcile_scope(Some(&changed.names)).await,
        }
    }

    /// Starts the stream groups the meta state places on this node and it does not run yet,
    /// stops and deletes those it should no longer run, re-subscribes streams whose subjects
    /// changed, and retries offline streams: a pass over every stream.
    pub async fn reconcile_all(&self) {
        let _serialized = self.catalog.reconciling.lock().await;
        // This pass covers whatever changed meanwhile.
        let _ = self.catalog.meta().take_changed();
        self.reconcile_scope(None).await;
    }

    /// One reconciliation pass over the streams in `scope` (None: every stream). The caller
    /// holds `catalog.reconciling`.
    async fn reconcile_scope(&self, scope: Option<&BTreeSet<String>>) {
        let catalog = &self.catalog;
        let node = catalog.node_id();
        let in_scope = |name: &str| scope.is_none_or(|names| names.contains(name));
        let wanted: BTreeMap<String, StreamAssignment> = catalog.meta().read(|state| {
            let placed_here = |assignment: &&StreamAssignment| assignment.replicas.contains(&node);
            match scope {
                None => state
                    .streams()
                    .iter()
                    .filter(|(_, assignment)| placed_here(assignment))
                    .map(|(name, assignment)| (name.clone(), assignment.clone()))
                    .collect(),
                Some(names) => names
                    .iter()
                    .filter_map(|name| {
                        let assignment = state.stream(name).filter(placed_here)?;
                        Some((name.clone(), assignment.clone()))
                    })
                    .collect(),
            }
        });
        let group_of = |name: &str| wanted.get(name).map(|a| a.group);

        let running: Vec<(String, Arc<StreamHandle>)> = match scope {
            None => catalog.running_groups(),
            Some(names) => names
                .iter()
                .filter_map(|name| {
                    let handle = catalog.read_stream(name, |stream| stream.handle.clone())?;
                    Some((name.clone(), handle))
                })
                .collect(),
        };
        let gone: Vec<(String, u64, StorageType)> = running
            .into_iter()
            .filter(|(name, handle)| group_of(name) != Some(handle.group().id()))
            .map(|(name, handle)| {
                let storage = handle.view().read(|group| group.stream().config().storage);
                (name, handle.group().id(), storage)
            })
            .collect();
        let gone_offline = catalog.take_offline_unless(|name, stream| {
            !in_scope(name) || group_of(name) == Some(stream.group)
        });
        for (name, stream) in gone_offline {
            stream.close(catalog.router());
            let group = stream.group;
            // Dropping the group also clears the log's corruption mark.
            if let Err(e) = catalog.registry_for(stream.storage).drop_group(group).await {
                tracing::error!(stream = %name, group, "cannot delete offline stream group: {e}");
            }
            tracing::info!(stream = %name, group, "offline stream removed");
        }
        for (name, group, storage) in gone {
            take_down_running(catalog, &name);
            if let Err(e) = catalog.registry_for(storage).drop_group(group).await {
                tracing::error!(stream = %name, group, "cannot delete stream group: {e}");
            }
            tracing::info!(stream = %name, group, "stream removed");
        }

        for (name, assignment) in wanted {
            let subjects = assignment.config.subjects.clone();
            let origins = origins_of(&assignment.config);
            let running = catalog.read_stream(&name, |s| (s.subjects.clone(), s.origins.clone()));
            match running {
                Some(current) if current == (subjects.clone(), origins.clone()) => {}
                Some(_) => self.resubscribe(&name, subjects, origins),
                None => {
                    if let Err(e) = self.start_stream(&name, &assignment).await {
                        set_offline(catalog, &name, &assignment, e.to_string());
                    }
                }
            }
        }
    }

    async fn start_stream(
        &self,
        name: &str,
        assignment: &StreamAssignment,
    ) -> Result<(), JetStreamError> {
        let catalog = &self.catalog;
        let (group, view) = groups::open_stream_group(catalog, assignment).await?;
        // A leader serves once it has applied its log as it stood when elected (its blank
        // entry last, `leadership_watch::CatchUp`): a single voter, which leads already and
        // commits alone, gets there before the create answers, so the reply never precedes
        // the stream's subscriptions. A replicated group is not waited for: its commits need
        // its peers, and streams start one after another (a restart of 1000 R3 streams took
        // 54 s instead of 0.3 waiting for each in turn while the peers started).
        let single_voter = group.voter_ids().len() == 1;
        if single_voter
            && group.leader() == Some(catalog.node_id())
            && !group.wait_caught_up(LEADER_CATCH_UP_WAIT).await
        {
            tracing::warn!(stream = %name, "a new leader has not applied its log yet: it serves once it has");
        }
        if let Some(offline) = catalog.take_offline(name) {
            offline.close(catalog.router());
        }
        let handle = Arc::new(StreamHandle::new(name.to_owned(), group.clone(), view));
        let stop = catalog.shared().shutdown.child_token();
        catalog.insert_stream(
            name.to_owned(),
            RunningStream::started(
                handle,
                assignment.config.subjects.clone(),
                origins_of(&assignment.config),
                stop.clone(),
            ),
        );
        leadership::watch_leadership(catalog, name, group, stop);
        tracing::info!(stream = %name, group = assignment.group, "stream group started");
        Ok(())
    }

    fn resubscribe(&self, name: &str, subjects: Vec<String>, origins: Origins) {
        let catalog = &self.catalog;
        let leading = catalog
            .update_stream(name, |stream| {
                stream.subjects = subjects;
                stream.origins = origins;
                stream.leading.take()
            })
            .flatten();
        // Serve again under the new subjects and origins.
        if let Some(leading) = leading {
            leadership::end_leading(catalog, name, leading);
            leadership::start_serving(catalog, name);
        }
    }

    /// Before the connections close: waiting pull requests get `409 Server Shutdown`.
    pub async fn signal_shutdown(&self) {
        self.delivery()
            .signal_shutdown(std::time::Duration::from_secs(1))
            .await;
    }

    /// Stops serving the API and stops every group (their data stays).
    pub async fn shutdown(&self) {
        let catalog = &self.catalog;
        if let Some(sub) = self.api_subscription.lock().take() {
            catalog.router().unsubscribe(&sub);
        }
        catalog.delivery().shutdown();
        for (_, offline) in catalog.take_offline_unless(|_, _| false) {
            offline.close(catalog.router());
        }
        let mut stores = Vec::new();
        for (name, mut stream) in catalog.take_all_streams() {
            stream.stop.cancel();
            stores.push(stream.handle.view().store().clone());
            if let Some(leading) = stream.leading.take() {
                leadership::end_leading(catalog, &name, leading);
            }
        }
        catalog.stop_all_groups().await;
        // Readers that outlive the stop (a task still finishing) keep no state store open.
        for store in stores {
            store.close();
        }
        tracing::info!("JetStream stopped");
    }

    /// After [`shutdown`](Self::shutdown), once the node's tasks ended, on the node's last
    /// handle: drops it and waits until nothing holds the state databases (file and memory
    /// streams') any more, sled's own file included (`consensus::state_db::Closing`), so a
    /// node started at once on the same directory finds them free. A handle kept elsewhere
    /// is reported after [`STORE_CLOSE_WAIT`] rather than waited for forever.
    pub async fn close(self: Arc<Self>) {
        let closing: Vec<_> = [StorageType::File, StorageType::Memory]
            .into_iter()
            .map(|storage| self.registry_for(storage).storage().state.closing())
            .collect();
        drop(self);
        for store in closing {
            match tokio::time::timeout(STORE_CLOSE_WAIT, store.wait()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "waiting for a state db to close"),
                Err(_) => tracing::error!(
                    waited = ?STORE_CLOSE_WAIT,
                    "a state db is still held after shutdown (a restart here would find it locked)"
                ),
            }
        }
    }
}

/// Opens the memory streams' storage, wiped first (see the module docs).
/// Stops serving the running stream `name` here: its stop token, its leading, its consumers'
/// delivery. Its group is the caller's to stop or drop.
pub(super) fn take_down_running(catalog: &Catalog, name: &str) {
    if let Some(mut stream) = catalog.remove_stream(name) {
        stream.stop.cancel();
        if let Some(leading) = stream.leading.take() {
            leadership::end_leading(catalog, name, leading);
        }
    }
    catalog.delivery().detach_stream(name);
}

/// Records stream `name` as offline here (API calls answer 10194 with `reason`, publishes
/// on its subjects get that error), replacing an earlier offline record.
pub(super) fn set_offline(
    catalog: &Catalog,
    name: &str,
    assignment: &StreamAssignment,
    reason: String,
) {
    tracing::error!(stream = %name, group = assignment.group, "stream is offline: {reason}");
    if let Some(old) = catalog.take_offline(name) {
        old.close(catalog.router());
    }
    let offline = OfflineStream::new(
        catalog.shared(),
        name,
        assignment.group,
        assignment.config.storage,
        reason,
        &assignment.config.subjects,
    );
    catalog.insert_offline(name.to_owned(), offline);
}

async fn open_memory_storage(shared: &ServerShared) -> Result<NodeStorage, JetStreamError> {
    let memory_dir = shared.config.store_dir.join(MEMORY_DIR);
    let memory_options = LogOptions {
        fsync: false,
        // Nothing is fsynced, so there is no journal commit to avoid.
        preallocate: 0,
        ..LogOptions::default()
    };
    let (memory_storage, _) = tokio::task::spawn_blocking(move || {
        match std::fs::remove_dir_all(&memory_dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(StorageOpenError::Io {
                    action: "wipe memory stream storage",
                    path: memory_dir,
                    source: e,
                })
            }
        }
        NodeStorage::open(&memory_dir, memory_options)
    })
    .await??;
    Ok(memory_storage)
}

/// Reconciles whenever the meta machine applied an entry (in a cluster, most meta changes are
/// proposed by another node).
async fn reconcile_on_meta_changes(
    js: Weak<JetStream>,
    mut applied: tokio::sync::watch::Receiver<u64>,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            changed = applied.changed() => if changed.is_err() { return },
        }
        let Some(js) = js.upgrade() else { return };
        js.reconcile().await;
    }
}

/// The supervisor's task (see `supervisor`), until shutdown: restarts stopped groups, and
/// now and then reconciles to retry offline streams that may start now.
async fn supervise(js: Weak<JetStream>, shutdown: CancellationToken) {
    let mut next_offline_retry = tokio::time::Instant::now() + supervisor::RETRY_OFFLINE_EVERY;
    let Some((stopped, damage)) = js.upgrade().map(|js| {
        let catalog = js.catalog();
        let storage = catalog.registry_for(StorageType::File).storage();
        (
            catalog.group_stopped.clone(),
            storage.state.damage().clone(),
        )
    }) else {
        return;
    };
    let mut pass_after = supervisor::SUPERVISE_EVERY;
    loop {
        // A stopped group is reported by its leadership watcher; the periodic pass is the
        // safety net (and retries what failed to restart).
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = stopped.notified() => {}
            _ = damage.reported() => {}
            _ = tokio::time::sleep(pass_after) => {}
        }
        let Some(js) = js.upgrade() else { return };
        supervisor::restart_meta_if_stopped(js.catalog()).await;
        supervisor::restart_stopped_streams(js.catalog()).await;
        pass_after = match supervisor::any_stopped(js.catalog()) {
            true => supervisor::RETRY_RESTART_AFTER,
            false => supervisor::SUPERVISE_EVERY,
        };
        if tokio::time::Instant::now() >= next_offline_retry {
            next_offline_retry = tokio::time::Instant::now() + supervisor::RETRY_OFFLINE_EVERY;
            if supervisor::offline_worth_retrying(js.catalog()) {
                js.reconcile_all().await;
            }
        }
    }
}
