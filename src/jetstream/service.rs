//! `JetStream`: start-up, the streams this node runs, reconciliation against the meta
//! state, and shutdown. One per node started with `-js`.
//!
//! Start-up: open the node's Raft storage under the store directory (the WAL, sled and
//! snapshots: `consensus::NodeStorage`), start the meta group, start every stream group the
//! meta state lists, and subscribe `$JS.API.>`. Reconciliation runs after every meta change
//! this node proposes and whenever the meta machine applies an entry; it is idempotent.

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
use crate::consensus::node_storage::StorageOpenError;
use crate::consensus::{GroupOptions, GroupRegistry, NoPeers, NodeId, NodeStorage, RaftGroup};
use crate::jsapi::{ApiError, ErrorKind};
use crate::server::router::Router;
use crate::server::subscription::Subscription;
use crate::server::ServerShared;
use crate::store::log::LogOptions;

/// This node's id in every group. A single node is node 1; the cluster assigns ids later.
const LOCAL_NODE: NodeId = 1;

#[derive(Debug, thiserror::Error)]
pub enum JetStreamError {
    #[error("cannot open the JetStream store: {0}")]
    Storage(#[from] StorageOpenError),
    #[error("cannot start group {group}: {message}")]
    Group { group: u64, message: String },
    #[error("storage task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// A stream group running on this node, with the subscriptions that feed it.
struct RunningStream {
    handle: Arc<StreamHandle>,
    ingest: Vec<Arc<Subscription>>,
    subjects: Vec<String>,
    /// Stops the stream's own tasks (max_age expiry) when it is removed.
    stop: tokio_util::sync::CancellationToken,
}

pub struct JetStream {
    shared: Arc<ServerShared>,
    registry: GroupRegistry,
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
        let registry = GroupRegistry::new(
            LOCAL_NODE,
            storage,
            Arc::new(NoPeers),
            GroupOptions::default(),
        );
        let (machine, meta) = MetaMachine::new();
        let meta_group = registry
            .start(META_GROUP, local_voters(), Box::new(machine))
            .await
            .map_err(|e| JetStreamError::Group {
                group: META_GROUP,
                message: e.to_string(),
            })?;
        let delivery = DeliveryRegistry::new(shared.clone());
        let js = Arc::new(JetStream {
            delivery,
            shared,
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

    /// Starts the stream groups the meta state lists and this node does not run yet, stops
    /// and deletes those it no longer lists, and re-subscribes streams whose subjects changed.
    pub async fn reconcile(self: &Arc<Self>) {
        let _serialized = self.reconciling.lock().await;
        let wanted = self.meta.read(|state| state.streams().clone());

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
            if let Some(stream) = self.streams.write().remove(&name) {
                stream.stop.cancel();
                for sub in &stream.ingest {
                    self.router().unsubscribe(sub);
                }
            }
            self.delivery.detach_stream(&name);
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
            .start(assignment.group, local_voters(), Box::new(machine))
            .await
            .map_err(|e| JetStreamError::Group {
                group: assignment.group,
                message: e.to_string(),
            })?;
        let handle = Arc::new(StreamHandle::new(name.to_owned(), group, view));
        let subjects = assignment.config.subjects.clone();
        let ingest = publish::attach(self, &handle, &subjects);
        self.delivery.attach_stream(&handle);
        let stop = self.shared.shutdown.child_token();
        self.shared
            .tasks
            .spawn(super::expiry::run(handle.clone(), stop.clone()));
        self.streams.write().insert(
            name.to_owned(),
            RunningStream {
                handle,
                ingest,
                subjects,
                stop,
            },
        );
        tracing::info!(stream = %name, group = assignment.group, "stream group started");
        Ok(())
    }

    fn resubscribe(self: &Arc<Self>, name: &str, subjects: Vec<String>) {
        let mut streams = self.streams.write();
        let Some(stream) = streams.get_mut(name) else {
            return;
        };
        for sub in stream.ingest.drain(..) {
            self.shared.router.unsubscribe(&sub);
        }
        stream.ingest = publish::attach(self, &stream.handle, &subjects);
        stream.subjects = subjects;
    }

    /// Stops serving the API and stops every group (their data stays).
    pub async fn shutdown(&self) {
        if let Some(sub) = self.api_subscription.lock().take() {
            self.router().unsubscribe(&sub);
        }
        self.delivery.shutdown();
        let streams: Vec<RunningStream> = self.streams.write().drain().map(|(_, s)| s).collect();
        for stream in &streams {
            stream.stop.cancel();
            for sub in &stream.ingest {
                self.router().unsubscribe(sub);
            }
        }
        self.registry.shutdown_all().await;
        tracing::info!("JetStream stopped");
    }
}

fn local_voters() -> std::collections::BTreeMap<NodeId, crate::consensus::Node> {
    RaftGroup::single_voter(LOCAL_NODE, "local")
}

/// Encodes a new stream's meta command.
pub fn create_stream_command(config: crate::jsapi::StreamConfig) -> MetaCommand {
    MetaCommand::CreateStream {
        config: JsonValue(config),
        created_nanos: super::now_nanos(),
    }
}
