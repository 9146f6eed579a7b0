//! The catalog: what this node's JetStream holds, and every read of it. The topology, the
//! group registries (file streams and the meta group; memory streams), the meta group and its
//! view (which streams exist and where they are placed), the stream groups running here
//! (`RunningStream`) and the offline ones (`OfflineStream`), consumers' delivery, the API
//! counters, and whether each group knows a leader.
//!
//! The catalog starts and stops nothing. The lifecycle above it (`lifecycle`: start-up,
//! reconciliation, shutdown), the leadership watcher (`leadership`) and the supervisor
//! (`supervisor`) change what it holds through its few `pub(super)` methods; API handlers,
//! delivery and monitoring only read it.
//!
//! A stream the meta state lists but whose group cannot run here (its log is marked corrupt,
//! its state cannot be loaded) is *offline*: API calls on it answer 10194 `stream is offline:
//! <reason>` instead of "stream not found".

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use openraft::ServerState;
use tokio::sync::Mutex as AsyncMutex;
use tokio_util::sync::CancellationToken;

use super::delivery::DeliveryRegistry;
use super::expiry::Expiry;
use super::info;
use super::leader_clock::{LeaderClock, Leaderless};
use super::leadership_watch::LeadershipWatchers;
use super::meta::{MetaView, StreamAssignment};
use super::offline::OfflineStream;
use super::queue::Dropped;
use super::replica_state::ReplicaState;
use super::stream::StreamHandle;
use super::stream_machine::{BlockCache, CacheStats};
use super::topology::Topology;
use crate::consensus::pacer::Mode;
use crate::consensus::{GroupRegistry, NodeId, RaftGroup};
use crate::jsapi::requests::StreamInfoRequest;
use crate::jsapi::stream_config::StreamSource;
use crate::jsapi::{ApiError, ErrorKind, StorageType, StreamInfo};
use crate::server::router::Router;
use crate::server::subscription::Subscription;
use crate::server::ServerShared;

/// A stream's mirror (if any) and sources, as its config has them.
pub(super) type Origins = (Option<StreamSource>, Vec<StreamSource>);

/// The origins of `config`.
pub(super) fn origins_of(config: &crate::jsapi::stream_config::StreamConfig) -> Origins {
    (config.mirror.clone(), config.sources.clone())
}

/// A stream group running on this node (one of its replicas).
pub(super) struct RunningStream {
    pub(super) handle: Arc<StreamHandle>,
    pub(super) subjects: Vec<String>,
    /// The stream's mirror and sources: what its leader copies from (`sourcing/`).
    pub(super) origins: Origins,
    /// Ends the watch of the stream's leadership (when removed, or its group is replaced).
    pub(super) stop: CancellationToken,
    /// Set while this replica leads the stream: what it serves (see `leadership`).
    pub(super) leading: Option<Leading>,
    /// Whether, and since when, this replica knows no leader of the stream's group (see
    /// `leadership` and `api::leaderless`).
    pub(super) leader_clock: LeaderClock,
}

impl RunningStream {
    /// A stream group just started here, not served yet, its leader not known yet.
    pub(super) fn started(
        handle: Arc<StreamHandle>,
        subjects: Vec<String>,
        origins: Origins,
        stop: CancellationToken,
    ) -> RunningStream {
        RunningStream {
            handle,
            subjects,
            origins,
            stop,
            leading: None,
            leader_clock: LeaderClock::started(),
        }
    }
}

/// What the leader of a stream runs: the subscriptions on the stream's subjects (ingest) and
/// its work in the node's tasks (max_age expiry, copying from origins), stopped by `stop` when leadership ends (`leadership`).
pub(super) struct Leading {
    pub(super) ingest: Vec<Arc<Subscription>>,
    pub(super) stop: CancellationToken,
}

/// See the module docs.
pub struct Catalog {
    shared: Arc<ServerShared>,
    topology: Topology,
    /// File streams and the meta group.
    registry: Arc<GroupRegistry>,
    /// Memory streams: their own storage, never fsynced, wiped at start (see `lifecycle`).
    memory_registry: Arc<GroupRegistry>,
    /// Replaced (same id, same view) when the supervisor restarts a stopped meta group.
    meta_group: parking_lot::RwLock<Arc<RaftGroup>>,
    meta: MetaView,
    streams: parking_lot::RwLock<HashMap<String, RunningStream>>,
    offline: parking_lot::RwLock<HashMap<String, OfflineStream>>,
    /// Serializes reconciliation (start/stop of stream groups) and the supervisor's restarts.
    pub(super) reconciling: AsyncMutex<()>,
    /// Notified by the leadership watcher when it sees a group stopped: the supervisor wakes.
    pub(super) group_stopped: Arc<tokio::sync::Notify>,
    delivery: Arc<DeliveryRegistry>,
    /// The node's one task following every stream group's leadership (`leadership_watch`).
    leadership_watchers: LeadershipWatchers,
    /// The node's one max_age task, for the streams this node leads (`expiry`).
    expiry: Expiry,
    /// The node's cache of message blocks, shared by every stream group (`stream_machine`).
    block_cache: Arc<BlockCache>,
    pub(crate) api_total: AtomicU64,
    pub(crate) api_errors: AtomicU64,
    /// API requests dropped because the API inbox was full (see `api::inbox`).
    pub(crate) api_dropped: Arc<Dropped>,
    /// Whether, and since when, this node knows no meta leader (see `leadership` and
    /// `api::leaderless`).
    meta_leader_clock: parking_lot::Mutex<LeaderClock>,
}

/// See [`Catalog::store_usage`].
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreUsage {
    pub streams: u64,
    pub messages: u64,
    /// Bytes of memory streams, as nats-server counts them (`memory`).
    pub memory: u64,
    /// Bytes of file streams, as nats-server counts them (`storage`).
    pub storage: u64,
    pub cache: CacheStats,
    /// Bytes of blocks kept in memory outside the cache: a memory stream's, and a file
    /// stream's newest until sled has them.
    pub pinned_bytes: u64,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").finish_non_exhaustive()
    }
}

/// The groups a catalog starts out with (see [`Catalog::new`]).
pub(super) struct Groups {
    pub(super) registry: Arc<GroupRegistry>,
    pub(super) memory_registry: Arc<GroupRegistry>,
    pub(super) meta_group: Arc<RaftGroup>,
    pub(super) meta: MetaView,
}

impl Catalog {
    /// An empty catalog over started registries and meta group: no stream runs yet.
    pub(super) fn new(shared: Arc<ServerShared>, topology: Topology, groups: Groups) -> Catalog {
        Catalog {
            delivery: DeliveryRegistry::new(shared.clone()),
            leadership_watchers: LeadershipWatchers::default(),
            expiry: Expiry::default(),
            block_cache: Arc::new(BlockCache::new(shared.config.js_cache_bytes)),
            shared,
            topology,
            registry: groups.registry,
            memory_registry: groups.memory_registry,
            meta_group: parking_lot::RwLock::new(groups.meta_group),
            meta: groups.meta,
            streams: parking_lot::RwLock::new(HashMap::new()),
            offline: parking_lot::RwLock::new(HashMap::new()),
            reconciling: AsyncMutex::new(()),
            group_stopped: Arc::default(),
            api_total: AtomicU64::new(0),
            api_errors: AtomicU64::new(0),
            api_dropped: Arc::default(),
            meta_leader_clock: parking_lot::Mutex::new(LeaderClock::started()),
        }
    }

    pub fn router(&self) -> &Router {
        &self.shared.router
    }

    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }

    /// The nodes this node's groups are placed on (a cluster of one without `--cluster`).
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The node's message block cache.
    pub fn block_cache(&self) -> &Arc<BlockCache> {
        &self.block_cache
    }

    /// What this node's stream replicas hold, by storage type, and what their bodies take
    /// in memory (`/varz`, `/jsz`).
    pub fn store_usage(&self) -> StoreUsage {
        let handles: Vec<Arc<StreamHandle>> = self
            .streams
            .read()
            .values()
            .map(|s| s.handle.clone())
            .collect();
        let mut usage = StoreUsage {
            streams: handles.len() as u64,
            cache: self.block_cache.stats(),
            ..StoreUsage::default()
        };
        for handle in handles {
            let view = handle.view();
            view.read(|group| {
                let stream = group.stream();
                usage.messages += stream.message_count();
                match stream.config().storage {
                    StorageType::Memory => usage.memory += stream.bytes(),
                    StorageType::File => usage.storage += stream.bytes(),
                }
            });
            let pinned = view.store().pinned();
            usage.pinned_bytes += pinned.bytes;
        }
        usage
    }

    /// The node's leadership watcher (`leadership_watch`).
    pub(super) fn leadership_watchers(&self) -> &LeadershipWatchers {
        &self.leadership_watchers
    }

    /// The node's max_age expiry (`leadership`).
    pub(super) fn expiry(&self) -> &Expiry {
        &self.expiry
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

    /// The `StreamInfo` of stream `name` from this node's replica (see `info`): 10059 if no
    /// such stream exists, 10194 if it cannot run here.
    pub fn stream_info(
        &self,
        name: &str,
        request: &StreamInfoRequest,
    ) -> Result<StreamInfo, ApiError> {
        let assignment = self
            .assignment(name)
            .ok_or_else(|| ApiError::new(ErrorKind::StreamNotFound))?;
        let handle = self.running_stream(name)?;
        Ok(info::stream_info(
            &self.topology,
            assignment,
            &handle,
            request,
        ))
    }

    /// Whether `stream` is offline on this node.
    pub fn is_offline(&self, stream: &str) -> bool {
        self.offline.read().contains_key(stream)
    }

    /// Streams that cannot run here, with the reason (STREAM.LIST's `offline`).
    pub fn offline_streams(&self) -> BTreeMap<String, String> {
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

    /// The stream that answers direct gets addressed to stream `name`: `name` itself when it
    /// allows them; otherwise the first (by name) mirror of it with `mirror_direct`, which
    /// nats-server subscribes to its origin's direct-get subjects; `name` when there is
    /// neither (it answers no responders). nats-server spreads the gets of an origin that
    /// allows them over it and such mirrors; here the origin answers them all.
    pub fn direct_get_target(&self, name: &str) -> String {
        self.meta.read(|state| {
            if state
                .stream(name)
                .is_some_and(|assigned| assigned.config.allow_direct)
            {
                return name.to_string();
            }
            state
                .streams()
                .iter()
                .find(|(_, assigned)| {
                    assigned.config.mirror_direct
                        && assigned
                            .config
                            .mirror
                            .as_ref()
                            .is_some_and(|origin| origin.name == name)
                })
                .map_or_else(|| name.to_string(), |(mirror, _)| mirror.clone())
        })
    }

    /// The registry running a stream's group: memory streams have their own.
    pub(super) fn registry_for(&self, storage: StorageType) -> &GroupRegistry {
        match storage {
            StorageType::File => &self.registry,
            StorageType::Memory => &self.memory_registry,
        }
    }

    /// The registry running the meta group (and file streams).
    pub(super) fn meta_registry(&self) -> &GroupRegistry {
        &self.registry
    }

    /// Stops every group of both registries (their data stays).
    pub(super) async fn stop_all_groups(&self) {
        self.memory_registry.shutdown_all().await;
        self.registry.shutdown_all().await;
    }

    /// This node's id in every group.
    pub fn node_id(&self) -> NodeId {
        self.topology.node_id()
    }

    /// The meta group (for leader stepdown and cluster info): the one running now.
    pub fn meta_group(&self) -> Arc<RaftGroup> {
        self.meta_group.read().clone()
    }

    pub(super) fn replace_meta_group(&self, group: Arc<RaftGroup>) {
        *self.meta_group.write() = group;
    }

    /// The groups of file streams whose stored state was found damaged while the node runs
    /// (`consensus::damage`, ADR 0018); a report wakes the supervisor.
    pub fn state_damage(&self) -> &Arc<crate::consensus::damage::Damage> {
        self.registry.storage().state.damage()
    }

    /// The node-wide WAL's counters (writes, appends, fsyncs): what `/varz` reports.
    pub fn log_stats(&self) -> crate::store::log::LogStats {
        self.registry.storage().log.stats()
    }

    /// How many of this node's Raft groups (the meta group and every stream replica) are
    /// active, quiet and waking (see `consensus::pacer`): what `/jsz` and `/varz` report.
    pub fn group_modes(&self) -> crate::consensus::pacer::ModeCounts {
        self.registry.pacer().counts()
    }

    /// Which other nodes of the cluster are alive by the node pings, by name.
    pub fn peers_alive(&self) -> BTreeMap<String, bool> {
        let pacer = self.registry.pacer();
        self.topology
            .node_ids()
            .into_iter()
            .filter(|id| *id != self.node_id())
            .map(|id| (self.topology.name_of(id), pacer.is_alive(id)))
            .collect()
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

    /// Reads the running stream `name`; `None` if it does not run here.
    pub(super) fn read_stream<R>(
        &self,
        name: &str,
        read: impl FnOnce(&RunningStream) -> R,
    ) -> Option<R> {
        self.streams.read().get(name).map(read)
    }

    /// Changes the running stream `name`; `None` if it does not run here. No lock of the
    /// catalog may be taken inside `change`.
    pub(super) fn update_stream<R>(
        &self,
        name: &str,
        change: impl FnOnce(&mut RunningStream) -> R,
    ) -> Option<R> {
        self.streams.write().get_mut(name).map(change)
    }

    /// The running streams, each as `name, handle, group id`.
    pub(super) fn running_groups(&self) -> Vec<(String, Arc<StreamHandle>)> {
        self.streams
            .read()
            .iter()
            .map(|(name, stream)| (name.clone(), stream.handle.clone()))
            .collect()
    }

    pub(super) fn insert_stream(&self, name: String, stream: RunningStream) {
        self.streams.write().insert(name, stream);
    }

    pub(super) fn remove_stream(&self, name: &str) -> Option<RunningStream> {
        self.streams.write().remove(name)
    }

    pub(super) fn take_all_streams(&self) -> Vec<(String, RunningStream)> {
        self.streams.write().drain().collect()
    }

    /// Takes the offline stream `name` out of the catalog (it runs now, or is replaced).
    pub(super) fn take_offline(&self, name: &str) -> Option<OfflineStream> {
        self.offline.write().remove(name)
    }

    /// Takes every offline stream `keep` refuses out of the catalog.
    pub(super) fn take_offline_unless(
        &self,
        keep: impl Fn(&str, &OfflineStream) -> bool,
    ) -> Vec<(String, OfflineStream)> {
        let mut offline = self.offline.write();
        let names: Vec<String> = offline
            .iter()
            .filter(|(name, stream)| !keep(name, stream))
            .map(|(name, _)| name.clone())
            .collect();
        names
            .into_iter()
            .filter_map(|name| offline.remove(&name).map(|s| (name, s)))
            .collect()
    }

    pub(super) fn insert_offline(&self, name: String, stream: OfflineStream) {
        self.offline.write().insert(name, stream);
    }

    /// Whether any offline stream is as `test` asks.
    pub(super) fn any_offline(&self, test: impl Fn(&OfflineStream) -> bool) -> bool {
        self.offline.read().values().any(test)
    }

    /// Records whether this node knows a meta leader.
    pub(super) fn note_meta_leader_known(&self, knows_leader: bool) {
        self.meta_leader_clock.lock().note(knows_leader);
    }

    /// How this replica of stream `name` has been without a leader of its group; `None` if it
    /// knows one, or does not run the stream.
    pub fn stream_leaderless(&self, name: &str) -> Option<Leaderless> {
        self.streams.read().get(name)?.leader_clock.leaderless()
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
        match group.leader().filter(|_| group.leadership().knows_leader) {
            None => String::new(),
            Some(id) => self.topology.name_of(id),
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
                let (applied_index, raft_state, term, raft_leader, last_log_index, purged_index) = {
                    let metrics = group.raft().metrics();
                    let m = metrics.borrow();
                    let raft_state = match m.state {
                        ServerState::Leader => "leader",
                        ServerState::Follower => "follower",
                        ServerState::Candidate => "candidate",
                        ServerState::Learner => "learner",
                        ServerState::Shutdown => "shutdown",
                    };
                    let applied = m.last_applied.map_or(0, |log| log.index);
                    let purged = m.purged.map_or(0, |log| log.index);
                    let last_log = m.last_log_index.unwrap_or(0);
                    (
                        applied,
                        raft_state,
                        m.current_term,
                        m.current_leader,
                        last_log,
                        purged,
                    )
                };
                ReplicaState {
                    name: name.clone(),
                    group: group.id(),
                    leader: stream.leading.is_some(),
                    applied_index,
                    messages,
                    bytes,
                    first_seq,
                    last_seq,
                    mode: match group.signals().mode() {
                        Mode::Active => "active",
                        Mode::Quiet => "quiet",
                        Mode::Waking => "waking",
                    },
                    raft_state,
                    term,
                    raft_leader,
                    last_log_index,
                    purged_index,
                }
            })
            .collect();
        states.sort_by(|a, b| a.name.cmp(&b.name));
        states
    }
}
