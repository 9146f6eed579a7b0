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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::Mutex as AsyncMutex;

use super::api;
use super::codec::{self, JsonValue, META_COMMAND_V1};
use super::delivery::DeliveryRegistry;
use super::meta::{MetaCommand, MetaMachine, MetaOutcome, MetaView, StreamAssignment, META_GROUP};
use super::publish;
use super::stream::{propose_error, StreamHandle};
use super::stream_machine::StreamMachine;
use crate::cluster::{ClusterNode, SINGLE_NODE_ID};
use crate::consensus::node_storage::StorageOpenError;
use crate::consensus::{
    GroupOptions, GroupRegistry, NoPeers, Node, NodeId, NodeStorage, PeerTransport, RaftGroup,
};
use crate::jsapi::{ApiError, ErrorKind};
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
    #[error("storage task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A stream group running on this node (one of its replicas).
struct RunningStream {
    handle: Arc<StreamHandle>,
    subjects: Vec<String>,
    /// Stops the stream's leadership watcher when the stream is removed.
    stop: tokio_util::sync::CancellationToken,
    /// Set while this replica leads the stream: what it serves.
    leading: Option<Leading>,
}

/// What the leader of a stream runs: the subscriptions on the stream's subjects (ingest) and
/// its own tasks (max_age expiry), stopped by `stop` when leadership ends.
struct Leading {
    ingest: Vec<Arc<Subscription>>,
    stop: tokio_util::sync::CancellationToken,
}

pub struct JetStream {
    shared: Arc<ServerShared>,
    /// This node's id in every group.
    node: NodeId,
    /// `None` on a single node.
    cluster: Option<Arc<ClusterNode>>,
    registry: Arc<GroupRegistry>,
    meta_group: Arc<RaftGroup>,
    meta: MetaView,
    streams: parking_lot::RwLock<HashMap<String, RunningStream>>,
    /// Serializes reconciliation (start/stop of stream groups).
    reconciling: AsyncMutex<()>,
    api_subscription: parking_lot::Mutex<Option<Arc<Subscription>>>,
    delivery: Arc<DeliveryRegistry>,
    pub(crate) api_total: AtomicU64,
    pub(crate) api_errors: AtomicU64,
}

impl std::fmt::Debug for JetStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JetStream").finish_non_exhaustive()
    }
}

impl JetStream {
    pub async fn start(shared: Arc<ServerShared>) -> Result<Arc<JetStream>, JetStreamError> {
        let dir = shared.config.store_dir.clone();
        let (storage, report) =
            tokio::task::spawn_blocking(move || NodeStorage::open(&dir, LogOptions::default()))
                .await??;
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
        let registry = Arc::new(GroupRegistry::new(node, storage, transport, options));
        if let Some(cluster) = &cluster {
            cluster.set_registry(registry.clone());
        }
        let meta_voters = match &cluster {
            Some(cluster) => cluster.peers().ids(),
            None => vec![node],
        };
        let (machine, meta) = MetaMachine::new();
        let meta_group = registry
            .start(
                META_GROUP,
                voters(cluster.as_deref(), &meta_voters),
                Box::new(machine),
            )
            .await
            .map_err(|e| JetStreamError::Group {
                group: META_GROUP,
                message: e.to_string(),
            })?;
        let delivery = DeliveryRegistry::new(shared.clone());
        let js = Arc::new(JetStream {
            delivery,
            shared,
            node,
            cluster,
            registry,
            meta_group,
            meta,
            streams: parking_lot::RwLock::new(HashMap::new()),
            reconciling: AsyncMutex::new(()),
            api_subscription: parking_lot::Mutex::new(None),
            api_total: AtomicU64::new(0),
            api_errors: AtomicU64::new(0),
        });
        js.reconcile().await;
        js.shared.tasks.spawn(reconcile_on_meta_changes(
            Arc::downgrade(&js),
            js.meta.applied(),
            js.shared.shutdown.clone(),
        ));
        *js.api_subscription.lock() = Some(api::attach(&js));
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

    pub fn stream_names(&self) -> Vec<String> {
        self.meta
            .read(|state| state.streams().keys().cloned().collect())
    }

    pub fn assignment(&self, name: &str) -> Option<StreamAssignment> {
        self.meta.read(|state| state.stream(name).cloned())
    }

    /// The node-wide WAL's counters (writes, appends, fsyncs): what `/varz` reports.
    pub fn log_stats(&self) -> crate::store::log::LogStats {
        self.registry.storage().log.stats()
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
            .meta_group
            .propose(codec::command(META_COMMAND_V1, &command))
            .await
            .map_err(propose_error)?;
        let outcome = codec::decode_response::<MetaOutcome>(&response).unwrap_or_else(|e| {
            tracing::error!("undecodable meta response: {e}");
            Err(ApiError::new(ErrorKind::ClusterNotAvail))
        })?;
        self.reconcile().await;
        Ok(outcome)
    }

    /// Starts the stream groups the meta state places on this node and it does not run yet,
    /// stops and deletes those it no longer should run, and re-subscribes streams whose
    /// subjects changed.
    pub async fn reconcile(self: &Arc<Self>) {
        let _serialized = self.reconciling.lock().await;
        let wanted: HashMap<String, StreamAssignment> = self.meta.read(|state| {
            state
                .streams()
                .iter()
                .filter(|(_, assignment)| assignment.replicas.contains(&self.node))
                .map(|(name, assignment)| (name.clone(), assignment.clone()))
                .collect()
        });

        let gone: Vec<(String, u64)> = {
            let running = self.streams.read();
            running
                .iter()
                .filter(|(name, stream)| {
                    wanted.get(*name).map(|a| a.group) != Some(stream.handle.group().id())
                })
                .map(|(name, stream)| (name.clone(), stream.handle.group().id()))
                .collect()
        };
        for (name, group) in gone {
            let removed = self.streams.write().remove(&name);
            if let Some(mut stream) = removed {
                stream.stop.cancel();
                if let Some(leading) = stream.leading.take() {
                    self.stop_leading(&name, leading);
                }
            }
            if let Err(e) = self.registry.drop_group(group).await {
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
                        tracing::error!(stream = %name, "cannot start stream group: {e}");
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
        let (machine, view) = StreamMachine::new(assignment.config.clone());
        let group = self
            .registry
            .start(
                assignment.group,
                voters(self.cluster.as_deref(), &assignment.replicas),
                Box::new(machine),
            )
            .await
            .map_err(|e| JetStreamError::Group {
                group: assignment.group,
                message: e.to_string(),
            })?;
        let handle = Arc::new(StreamHandle::new(name.to_owned(), group.clone(), view));
        let stop = self.shared.shutdown.child_token();
        self.streams.write().insert(
            name.to_owned(),
            RunningStream {
                handle,
                subjects: assignment.config.subjects.clone(),
                stop: stop.clone(),
                leading: None,
            },
        );
        // A single voter leads already: serve before the create reply goes out.
        self.set_leading(name, group.leader() == Some(self.node));
        self.shared.tasks.spawn(super::leadership::watch(
            Arc::downgrade(self),
            name.to_owned(),
            group,
            stop,
        ));
        tracing::info!(stream = %name, group = assignment.group, "stream group started");
        Ok(())
    }

    /// Starts or stops serving stream `name` as its leader. Idempotent.
    pub(crate) fn set_leading(self: &Arc<Self>, name: &str, leading: bool) {
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
        if leading {
            // Subscribing may re-enter the router; no lock of ours is held meanwhile.
            let ingest = publish::attach(self, &handle, &subjects);
            self.delivery.attach_stream(&handle);
            let stop = self.shared.shutdown.child_token();
            self.shared
                .tasks
                .spawn(super::expiry::run(handle.clone(), stop.clone()));
            let mut streams = self.streams.write();
            match streams.get_mut(name) {
                Some(stream) if stream.leading.is_none() => {
                    stream.leading = Some(Leading { ingest, stop });
                    drop(streams);
                    tracing::info!(stream = %name, "leading the stream");
                }
                _ => {
                    drop(streams);
                    self.stop_leading(name, Leading { ingest, stop });
                }
            }
        } else {
            let previous = self
                .streams
                .write()
                .get_mut(name)
                .and_then(|stream| stream.leading.take());
            if let Some(previous) = previous {
                self.stop_leading(name, previous);
                tracing::info!(stream = %name, "no longer leading the stream");
            }
        }
    }

    fn stop_leading(&self, name: &str, leading: Leading) {
        leading.stop.cancel();
        for sub in &leading.ingest {
            self.router().unsubscribe(sub);
        }
        self.delivery.detach_stream(name);
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
        self.meta_group.leader() == Some(self.node)
    }

    /// The meta leader's name, empty while there is none.
    pub fn meta_leader_name(&self) -> String {
        match (self.meta_group.leader(), &self.cluster) {
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
                ReplicaState {
                    name: name.clone(),
                    group: group.id(),
                    leader: stream.leading.is_some(),
                    applied_index: group
                        .raft()
                        .metrics()
                        .borrow()
                        .last_applied
                        .map_or(0, |log| log.index),
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

    /// This node's id in every group.
    pub fn node_id(&self) -> NodeId {
        self.node
    }

    /// The cluster this node belongs to, if any.
    pub fn cluster(&self) -> Option<&Arc<ClusterNode>> {
        self.cluster.as_ref()
    }

    /// The meta group (for leader stepdown and cluster info).
    pub fn meta_group(&self) -> &Arc<RaftGroup> {
        &self.meta_group
    }

    /// Number of nodes streams can be placed on.
    pub fn cluster_size(&self) -> usize {
        self.cluster
            .as_ref()
            .map_or(1, |cluster| cluster.peers().nodes.len())
    }

    /// The meta command creating `config`, placed on `num_replicas` nodes.
    pub fn create_stream_command(
        &self,
        config: crate::jsapi::StreamConfig,
    ) -> Result<MetaCommand, ApiError> {
        let Some(cluster) = &self.cluster else {
            return Ok(create_stream_command(config));
        };
        let existing = self.assignment(&config.name);
        let replicas = match existing {
            // Idempotent create: same placement; a different config is refused by the meta
            // machine anyway.
            Some(existing) => existing.replicas,
            None => {
                let hosted = self.meta.read(|state| {
                    let mut hosted = std::collections::BTreeMap::new();
                    for assignment in state.streams().values() {
                        for node in &assignment.replicas {
                            *hosted.entry(*node).or_insert(0usize) += 1;
                        }
                    }
                    hosted
                });
                let wanted = usize::try_from(config.num_replicas.max(1)).unwrap_or(usize::MAX);
                super::placement::place(&cluster.peers().ids(), &hosted, wanted, &config.name)?
            }
        };
        Ok(MetaCommand::CreateStreamOn {
            config: JsonValue(config),
            created_nanos: super::now_nanos(),
            replicas,
        })
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

    /// Stops serving the API and stops every group (their data stays).
    pub async fn shutdown(&self) {
        if let Some(sub) = self.api_subscription.lock().take() {
            self.router().unsubscribe(&sub);
        }
        self.delivery.shutdown();
        let streams: Vec<(String, RunningStream)> = self.streams.write().drain().collect();
        for (name, mut stream) in streams {
            stream.stop.cancel();
            if let Some(leading) = stream.leading.take() {
                self.stop_leading(&name, leading);
            }
        }
        self.registry.shutdown_all().await;
        tracing::info!("JetStream stopped");
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
