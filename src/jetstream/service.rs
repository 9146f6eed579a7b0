//! `JetStream`: start-up, the streams this node runs, reconciliation against the meta
//! state, and shutdown. One per node started with `-js`.
//!
//! Start-up: open the node's Raft storage under the store directory (the WAL, sled and
//! snapshots: `consensus::NodeStorage`), start the meta group (every node of the cluster a
//! voter; one node: itself), start every stream group the meta state places on this node, and
//! subscribe `$JS.API.>`. Reconciliation runs after every meta change this node proposes and
//! whenever the meta machine applies an entry; it is idempotent.
//!
//! Every replica of a stream runs its group; only the replica that leads it serves it (see
//! `leadership`): the stream's subjects, its consumers' delivery and acks, max_age expiry. On a
//! single node that is always this node; in a cluster, interest propagation brings a client's
//! publish from any node to the leader.
//!
//! A stream the meta state lists but whose group cannot run here (its log is marked corrupt,
//! its state cannot be loaded) is *offline*: API calls on it answer 10194 "stream is offline:
//! <reason>" instead of "stream not found", and deleting it drops its data.
//!
//! Memory streams (`storage: memory`) run in a second registry over their own storage under
//! `<store_dir>/memory`: a WAL that never fsyncs and its own sled, wiped at every start. So
//! their PubAcks do not wait for a disk, and after a restart such a stream exists (its
//! definition is in the meta group) but is empty, as nats-server's memory streams are.
//!
//! The supervisor (`supervisor`, one task per node) restarts the meta group and stream
//! groups that stopped on a fatal storage error.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Mutex as AsyncMutex;

use super::api;
use super::delivery::DeliveryRegistry;
use super::meta::{MetaCommand, MetaMachine, MetaOutcome, MetaView, StreamAssignment, META_GROUP};
use super::offline::OfflineStream;
use super::payload::{self, JsonValue, META_COMMAND_V1};
use super::stream::{propose_error, StreamHandle};
use super::stream_machine::StreamMachine;
use crate::cluster::{ClusterNode, SINGLE_NODE_ID};
use crate::consensus::node_storage::StorageOpenError;
use crate::consensus::{
    Bootstrap, GroupOptions, GroupRegistry, NoPeers, Node, NodeId, NodeStorage, PeerTransport,
    RaftGroup,
};
use crate::jsapi::{ApiError, ErrorKind, StorageType};
use crate::server::router::Router;
use crate::server::subscription::Subscription;
use crate::server::ServerShared;
use crate::store::log::LogOptions;

#[derive(Debug, thiserror::Error)]
pub enum JetStreamError {
    #[error("cannot open the JetStream store: {0}")]
    Storage(#[from] StorageOpenError),
    #[error("cannot start group {group}: {message}")]
    Group { group: u64, message: String },
    #[error("raft group {group} is corrupt in the log")]
    Corrupt { group: u64 },
    #[error("storage task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A stream group running on this node (one of its replicas).
pub(super) struct RunningStream {
    pub(super) handle: Arc<StreamHandle>,
    pub(super) subjects: Vec<String>,
    /// Stops the stream's leadership watcher (when removed, or its group is replaced).
    pub(super) stop: tokio_util::sync::CancellationToken,
    /// Set while this replica leads the stream: what it serves (see `leadership`).
    pub(super) leading: Option<super::leadership::Leading>,
    /// Whether, and since when, this replica knows no leader of the stream's group (see
    /// `leadership` and `api::leaderless`).
    pub(super) leader_clock: super::leadership::LeaderClock,
}

/// Where memory streams keep their (unsynced, wiped at start) storage, under the store dir.
const MEMORY_DIR: &str = "memory";

pub struct JetStream {
    pub(super) shared: Arc<ServerShared>,
    /// This node's id in every group.
    pub(super) node: NodeId,
    /// `None` on a single node.
    pub(super) cluster: Option<Arc<ClusterNode>>,
    /// File streams and the meta group.
    pub(super) registry: Arc<GroupRegistry>,
    /// Memory streams (see the module doc).
    memory_registry: Arc<GroupRegistry>,
    /// Replaced (same id, same view) when the supervisor restarts a stopped meta group.
    meta_group: parking_lot::RwLock<Arc<RaftGroup>>,
    meta: MetaView,
    pub(super) streams: parking_lot::RwLock<HashMap<String, RunningStream>>,
    pub(super) offline: parking_lot::RwLock<HashMap<String, OfflineStream>>,
    /// Serializes reconciliation (start/stop of stream groups) and the supervisor's restarts.
    pub(super) reconciling: AsyncMutex<()>,
    api_subscription: parking_lot::Mutex<Option<Arc<Subscription>>>,
    delivery: Arc<DeliveryRegistry>,
    pub(crate) api_total: AtomicU64,
    pub(crate) api_errors: AtomicU64,
    /// API requests dropped because the API inbox was full (see `api::inbox`).
    pub(crate) api_dropped: Arc<super::queue::Dropped>,
    /// Whether, and since when, this node knows no meta leader (see `leadership` and
    /// `api::leaderless`).
    pub(super) meta_leader_clock: parking_lot::Mutex<super::leadership::LeaderClock>,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream").finish_non_exhaustive()
    }
}

impl JetStream {
    pub async fn start(
        shared: Arc<ServerShared>,
        log_options: LogOptions,
    ) -> Result<Arc<JetStream>, JetStreamError> {
        let dir = shared.config.store_dir.clone();
        let (storage, report) =
            tokio::task::spawn_blocking(move || NodeStorage::open(&dir, log_options)).await??;
        for corrupt in &report.corrupt_groups {
            tracing::error!(
                group = corrupt,
                "raft group is corrupt in the log: its stream stays offline until deleted"
            );
        }
        tracing::info!(
            store_dir = %shared.config.store_dir.display(),
            "JetStream storage opened: {report:?}"
        );
        let cluster = shared.cluster.get().cloned();
        let (node, transport): (NodeId, Arc<dyn PeerTransport>) = match &cluster {
            Some(cluster) => (cluster.node_id(), cluster.transport()),
            None => (SINGLE_NODE_ID, Arc::new(NoPeers)),
        };
        let mut options = GroupOptions::default();
        if let Some(every) = shared.config.raft_compact_every {
            options.snapshot_every = every.max(1);
            options.logs_kept_after_snapshot = every / 10;
        }
        let registry = Arc::new(GroupRegistry::new(
            node,
            storage,
            transport.clone(),
            options.clone(),
        ));
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
        let memory_registry =
            Arc::new(GroupRegistry::new(node, memory_storage, transport, options));
        if let Some(cluster) = &cluster {
            cluster.set_registries(vec![registry.clone(), memory_registry.clone()]);
        }
        let (machine, meta) = MetaMachine::new();
        let meta_group = start_meta_group(&registry, cluster.as_deref(), node, machine).await?;
        let delivery = DeliveryRegistry::new(shared.clone());
        let js = Arc::new(JetStream {
            delivery,
            shared,
            node,
            cluster,
            registry,
            memory_registry,
            meta_group: parking_lot::RwLock::new(meta_group),
            meta,
            streams: parking_lot::RwLock::new(HashMap::new()),
            offline: parking_lot::RwLock::new(HashMap::new()),
            reconciling: AsyncMutex::new(()),
            api_subscription: parking_lot::Mutex::new(None),
            api_total: AtomicU64::new(0),
            api_errors: AtomicU64::new(0),
            api_dropped: Arc::default(),
            meta_leader_clock: parking_lot::Mutex::new(super::leadership::LeaderClock::started()),
        });
        js.reconcile().await;
        js.shared.tasks.spawn(reconcile_on_meta_changes(
            Arc::downgrade(&js),
            js.meta.applied(),
            js.shared.shutdown.clone(),
        ));
        js.shared
            .tasks
            .spawn(super::leadership::watch_meta_leadership(
                Arc::downgrade(&js),
                js.shared.shutdown.clone(),
            ));
        *js.api_subscription.lock() = Some(api::attach(&js));
        js.shared.tasks.spawn(super::supervisor::supervise(
            Arc::downgrade(&js),
            js.shared.shutdown.clone(),
        ));
        tracing::info!(
            streams = js.stream_names().len(),
            "JetStream ready (meta group and stream groups started)"
        );
        Ok(js)
    }

    pub fn router(&self) -> &Router {
        &self.shared.router
    }

    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }

    /// Consumers' delivery: pull requests, push delivery, acks.
    pub fn delivery(&self) -> &Arc<DeliveryRegistry> {
        &self.delivery
    }

    pub fn meta(&self) -> &MetaView {
        &self.meta
    }

    /// The running stream called `name`.
    pub fn stream(&self, name: &str) -> Option<Arc<StreamHandle>> {
        self.streams.read().get(name).map(|s| s.handle.clone())
    }

    /// The running stream called `name` for an API call: 10059 if no such stream exists,
    /// 10194 if it exists but cannot run here.
    pub fn running_stream(&self, name: &str) -> Result<Arc<StreamHandle>, ApiError> {
        if let Some(handle) = self.stream(name) {
            return Ok(handle);
        }
        match self.offline.read().get(name) {
            Some(offline) => Err(offline.error()),
            None => Err(ApiError::new(ErrorKind::StreamNotFound)),
        }
    }

    /// Streams that cannot run here, with the reason (STREAM.LIST's `offline`).
    pub fn offline_streams(&self) -> std::collections::BTreeMap<String, String> {
        self.offline
            .read()
            .iter()
            .map(|(name, offline)| (name.clone(), offline.reason.clone()))
            .collect()
    }

    pub fn stream_names(&self) -> Vec<String> {
        self.meta
            .read(|state| state.streams().keys().cloned().collect())
    }

    pub fn assignment(&self, name: &str) -> Option<StreamAssignment> {
        self.meta.read(|state| state.stream(name).cloned())
    }

    /// The registry running a stream's group: memory streams have their own.
    pub(super) fn registry_for(&self, storage: StorageType) -> &GroupRegistry {
        match storage {
            StorageType::File => &self.registry,
            StorageType::Memory => &self.memory_registry,
        }
    }

    /// This node's id in every group.
    pub fn node_id(&self) -> NodeId {
        self.node
    }

    /// The cluster this node belongs to, if any.
    pub fn cluster(&self) -> Option<&Arc<ClusterNode>> {
        self.cluster.as_ref()
    }

    /// The meta group (for leader stepdown and cluster info): the one running now.
    pub fn meta_group(&self) -> Arc<RaftGroup> {
        self.meta_group.read().clone()
    }

    /// Restarts the (stopped) meta group in place: a new machine on the same view, the group
    /// re-opened from its log and sled state. The caller swaps it in (`replace_meta_group`).
    pub(super) async fn restart_meta_group(&self) -> Result<Arc<RaftGroup>, JetStreamError> {
        let machine = MetaMachine::for_view(&self.meta);
        start_meta_group(&self.registry, self.cluster.as_deref(), self.node, machine).await
    }

    pub(super) fn replace_meta_group(&self, group: Arc<RaftGroup>) {
        *self.meta_group.write() = group;
    }

    /// The node-wide WAL's counters (writes, appends, fsyncs): what `/varz` reports.
    pub fn log_stats(&self) -> crate::store::log::LogStats {
        self.registry.storage().log.stats()
    }

    /// API requests dropped since start because the API inbox was full.
    pub fn api_dropped(&self) -> u64 {
        self.api_dropped.total()
    }

    pub fn count_api_call(&self, failed: bool) {
        self.api_total.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.api_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Proposes a meta command, then brings the local stream groups in line with the result.
    pub async fn propose_meta(
        self: &Arc<Self>,
        command: MetaCommand,
    ) -> Result<MetaOutcome, ApiError> {
        let response = self
            .meta_group()
            .propose(payload::command(META_COMMAND_V1, &command))
            .await
            .map_err(propose_error)?;
        let outcome = payload::decode_response::<MetaOutcome>(&response).unwrap_or_else(|e| {
            tracing::error!("undecodable meta response: {e}");
            Err(ApiError::new(ErrorKind::ClusterNotAvail))
        })?;
        self.reconcile().await;
        Ok(outcome)
    }

    /// Starts the stream groups the meta state places on this node and it does not run yet,
    /// stops and deletes those it should no longer run, and re-subscribes streams whose
    /// subjects changed.
    pub async fn reconcile(self: &Arc<Self>) {
        let _serialized = self.reconciling.lock().await;
        let wanted: std::collections::BTreeMap<String, StreamAssignment> =
            self.meta.read(|state| {
                state
                    .streams()
                    .iter()
                    .filter(|(_, assignment)| assignment.replicas.contains(&self.node))
                    .map(|(name, assignment)| (name.clone(), assignment.clone()))
                    .collect()
            });

        let gone: Vec<(String, u64, StorageType)> = {
            let running = self.streams.read();
            running
                .iter()
                .filter(|(name, stream)| {
                    wanted.get(*name).map(|a| a.group) != Some(stream.handle.group().id())
                })
                .map(|(name, stream)| {
                    let storage = stream
                        .handle
                        .view()
                        .read(|group| group.stream().config().storage);
                    (name.clone(), stream.handle.group().id(), storage)
                })
                .collect()
        };
        let gone_offline: Vec<(String, OfflineStream)> = {
            let mut offline = self.offline.write();
            let names: Vec<String> = offline
                .iter()
                .filter(|(name, stream)| wanted.get(*name).map(|a| a.group) != Some(stream.group))
                .map(|(name, _)| name.clone())
                .collect();
            names
                .into_iter()
                .filter_map(|name| offline.remove(&name).map(|s| (name, s)))
                .collect()
        };
        for (name, stream) in gone_offline {
            stream.close(self.router());
            let group = stream.group;
            // Dropping the group also clears the log's corruption mark.
            if let Err(e) = self.registry_for(stream.storage).drop_group(group).await {
                tracing::error!(stream = %name, group, "cannot delete offline stream group: {e}");
            }
            tracing::info!(stream = %name, group, "offline stream removed");
        }
        for (name, group, storage) in gone {
            let removed = self.streams.write().remove(&name);
            if let Some(mut stream) = removed {
                stream.stop.cancel();
                if let Some(leading) = stream.leading.take() {
                    self.stop_leading(&name, leading);
                }
            }
            self.delivery.detach_stream(&name);
            if let Err(e) = self.registry_for(storage).drop_group(group).await {
                tracing::error!(stream = %name, group, "cannot delete stream group: {e}");
            }
            tracing::info!(stream = %name, group, "stream removed");
        }

        for (name, assignment) in wanted {
            let subjects = assignment.config.subjects.clone();
            let running_subjects = self.streams.read().get(&name).map(|s| s.subjects.clone());
            match running_subjects {
                Some(current) if current == subjects => {}
                Some(_) => self.resubscribe(&name, subjects),
                None => {
                    if let Err(e) = self.start_stream(&name, &assignment).await {
                        tracing::error!(
                            stream = %name,
                            group = assignment.group,
                            "stream is offline: {e}"
                        );
                        if let Some(old) = self.offline.write().remove(&name) {
                            old.close(self.router());
                        }
                        let offline = OfflineStream::new(
                            &self.shared,
                            &name,
                            assignment.group,
                            assignment.config.storage,
                            e.to_string(),
                            &subjects,
                        );
                        self.offline.write().insert(name.clone(), offline);
                    }
                }
            }
        }
    }

    async fn start_stream(
        self: &Arc<Self>,
        name: &str,
        assignment: &StreamAssignment,
    ) -> Result<(), JetStreamError> {
        let (group, view) = self.start_group(assignment).await?;
        if let Some(offline) = self.offline.write().remove(name) {
            offline.close(self.router());
        }
        let handle = Arc::new(StreamHandle::new(name.to_owned(), group.clone(), view));
        let stop = self.shared.shutdown.child_token();
        self.streams.write().insert(
            name.to_owned(),
            RunningStream {
                handle,
                subjects: assignment.config.subjects.clone(),
                stop: stop.clone(),
                leading: None,
                leader_clock: super::leadership::LeaderClock::started(),
            },
        );
        self.watch_leadership(name, group, stop);
        tracing::info!(stream = %name, group = assignment.group, "stream group started");
        Ok(())
    }

    /// Starts (or restarts) a stream's group from its log and sled state. A group the log
    /// marked corrupt is not started: its data cannot be trusted.
    pub(super) async fn start_group(
        &self,
        assignment: &StreamAssignment,
    ) -> Result<(Arc<RaftGroup>, super::stream_machine::StreamView), JetStreamError> {
        let registry = self.registry_for(assignment.config.storage);
        if registry.storage().log.is_corrupt(assignment.group) {
            return Err(JetStreamError::Corrupt {
                group: assignment.group,
            });
        }
        let (machine, view) = StreamMachine::new(assignment.config.clone());
        // The placement's first replica stands for election at once; placement spreads first
        // replicas, so leaders spread.
        let bootstrap = match assignment.replicas.first() {
            Some(first) if self.cluster.is_some() => Bootstrap::First(*first),
            _ => Bootstrap::EveryVoter,
        };
        let group = registry
            .start(
                assignment.group,
                voters(self.cluster.as_deref(), &assignment.replicas),
                bootstrap,
                Box::new(machine),
            )
            .await
            .map_err(|e| JetStreamError::Group {
                group: assignment.group,
                message: e.to_string(),
            })?;
        Ok((group, view))
    }

    fn resubscribe(self: &Arc<Self>, name: &str, subjects: Vec<String>) {
        let leading = {
            let mut streams = self.streams.write();
            let Some(stream) = streams.get_mut(name) else {
                return;
            };
            stream.subjects = subjects;
            stream.leading.take()
        };
        // Serve again under the new subjects.
        if let Some(leading) = leading {
            self.stop_leading(name, leading);
            self.set_leading(name, true);
        }
    }

    /// Before the connections close: waiting pull requests get `409 Server Shutdown`.
    pub async fn signal_shutdown(&self) {
        self.delivery
            .signal_shutdown(std::time::Duration::from_secs(1))
            .await;
    }

    /// Stops serving the API and stops every group (their data stays).
    pub async fn shutdown(&self) {
        if let Some(sub) = self.api_subscription.lock().take() {
            self.router().unsubscribe(&sub);
        }
        self.delivery.shutdown();
        for (_, offline) in self.offline.write().drain() {
            offline.close(self.router());
        }
        let streams: Vec<(String, RunningStream)> = self.streams.write().drain().collect();
        for (name, mut stream) in streams {
            stream.stop.cancel();
            if let Some(leading) = stream.leading.take() {
                self.stop_leading(&name, leading);
            }
        }
        self.memory_registry.shutdown_all().await;
        self.registry.shutdown_all().await;
        tracing::info!("JetStream stopped");
    }
}

/// Starts (or restarts) the meta group: every node of the cluster a voter (one node:
/// itself).
async fn start_meta_group(
    registry: &GroupRegistry,
    cluster: Option<&ClusterNode>,
    node: NodeId,
    machine: MetaMachine,
) -> Result<Arc<RaftGroup>, JetStreamError> {
    let nodes = match cluster {
        Some(cluster) => cluster.peers().ids(),
        None => vec![node],
    };
    registry
        .start(
            META_GROUP,
            voters(cluster, &nodes),
            Bootstrap::EveryVoter,
            Box::new(machine),
        )
        .await
        .map_err(|e| JetStreamError::Group {
            group: META_GROUP,
            message: e.to_string(),
        })
}

/// The voters of a group placed on `nodes`: on a single node, itself; in a cluster, each node
/// with its cluster address from the peer table.
fn voters(
    cluster: Option<&ClusterNode>,
    nodes: &[NodeId],
) -> std::collections::BTreeMap<NodeId, Node> {
    let Some(cluster) = cluster else {
        return RaftGroup::single_voter(SINGLE_NODE_ID, "local");
    };
    let peers = cluster.peers();
    nodes
        .iter()
        .map(|id| {
            let addr = peers
                .get(*id)
                .map_or_else(String::new, |peer| peer.cluster_addr.clone());
            (*id, Node::new(addr))
        })
        .collect()
}

/// Reconciles whenever the meta machine applied an entry (in a cluster, most meta changes are
/// proposed by another node).
async fn reconcile_on_meta_changes(
    js: std::sync::Weak<JetStream>,
    mut applied: tokio::sync::watch::Receiver<u64>,
    shutdown: tokio_util::sync::CancellationToken,
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

/// Encodes a new stream's meta command.
pub fn create_stream_command(config: crate::jsapi::StreamConfig) -> MetaCommand {
    MetaCommand::CreateStream {
        config: JsonValue(config),
        created_nanos: super::now_nanos(),
    }
}
