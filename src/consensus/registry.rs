//! [`GroupRegistry`]: the Raft groups running on this node, by group id. One per node.
//!
//! Start, stop and drop are serialized by one async lifecycle lock (they are rare: stream
//! create/delete, node start/shutdown); lookups take a std `RwLock` around the map only, never
//! across an `.await`. Lock order: lifecycle, then map.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use super::error::StartError;
use super::group::{Bootstrap, GroupOptions, GroupStart, RaftGroup};
use super::machine::GroupMachine;
use super::network::PeerTransport;
use super::node_storage::NodeStorage;
use super::pacer::Pacer;
use super::state_machine::GroupStateMachine;
use super::types::{GroupId, Node, NodeId};
use super::watchdog::logged_if_slow;
use crate::store::log::{LogError, LogOp};

/// A registry operation failed.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("start group {group}: {source}")]
    Start {
        group: GroupId,
        #[source]
        source: StartError,
    },
    #[error("drop group {group} from the log: {source}")]
    DropLog {
        group: GroupId,
        #[source]
        source: LogError,
    },
    #[error("drop group {group} state: {source}")]
    DropState {
        group: GroupId,
        #[source]
        source: std::io::Error,
    },
}

/// The node's groups. See the module docs.
pub struct GroupRegistry {
    node: NodeId,
    storage: NodeStorage,
    transport: Arc<dyn PeerTransport>,
    options: GroupOptions,
    pacer: Pacer,
    groups: RwLock<HashMap<GroupId, Arc<RaftGroup>>>,
    lifecycle: tokio::sync::Mutex<()>,
}

impl GroupRegistry {
    pub fn new(
        node: NodeId,
        storage: NodeStorage,
        transport: Arc<dyn PeerTransport>,
        options: GroupOptions,
        pacer: Pacer,
    ) -> GroupRegistry {
        GroupRegistry {
            node,
            storage,
            transport,
            options,
            pacer,
            groups: RwLock::default(),
            lifecycle: tokio::sync::Mutex::new(()),
        }
    }

    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The node's pacer (shared by every registry of the node).
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    pub fn storage(&self) -> &NodeStorage {
        &self.storage
    }

    /// The running group `group`, if any.
    pub fn get(&self, group: GroupId) -> Option<Arc<RaftGroup>> {
        self.map_read().get(&group).cloned()
    }

    /// Ids of the running groups, ascending.
    pub fn ids(&self) -> Vec<GroupId> {
        let mut ids: Vec<_> = self.map_read().keys().copied().collect();
        ids.sort_unstable();
        ids
    }

    /// Start `group` with `machine` (or return it if already running; `machine` is then
    /// dropped). `voters` is used only if the group is new.
    pub async fn start(
        &self,
        group: GroupId,
        voters: BTreeMap<NodeId, Node>,
        bootstrap: Bootstrap,
        machine: Box<dyn GroupMachine>,
    ) -> Result<Arc<RaftGroup>, RegistryError> {
        let _lifecycle = self.lifecycle.lock().await;
        if let Some(running) = self.get(group) {
            return Ok(running);
        }
        let started = RaftGroup::start(GroupStart {
            group,
            node: self.node,
            voters,
            storage: self.storage.clone(),
            transport: self.transport.clone(),
            machine,
            options: self.options.clone(),
            bootstrap,
            pacer: self.pacer.clone(),
        })
        .await
        .map_err(|source| RegistryError::Start { group, source })?;
        let started = Arc::new(started);
        self.map_write().insert(group, started.clone());
        Ok(started)
    }

    /// Stop `group`, keeping its data. Returns false if it was not running.
    pub async fn stop(&self, group: GroupId) -> Result<bool, RegistryError> {
        let _lifecycle = self.lifecycle.lock().await;
        self.stop_locked(group).await
    }

    async fn stop_locked(&self, group: GroupId) -> Result<bool, RegistryError> {
        let Some(running) = self.map_write().remove(&group) else {
            return Ok(false);
        };
        running
            .shutdown()
            .await
            .map_err(|source| RegistryError::Start { group, source })?;
        Ok(true)
    }

    /// Stop `group` if running and delete all its data: log, state, snapshots.
    pub async fn drop_group(&self, group: GroupId) -> Result<(), RegistryError> {
        let _lifecycle = logged_if_slow(group, "the registry's turn", self.lifecycle.lock()).await;
        self.stop_locked(group).await?;
        let dropped = self.storage.log.write(vec![LogOp::DropGroup { group }]);
        logged_if_slow(group, "dropping the group's log", dropped)
            .await
            .map_err(|source| RegistryError::DropLog { group, source })?;
        let db = self.storage.state.clone();
        let dir = self.storage.snapshot_dir(group);
        let destroyed =
            tokio::task::spawn_blocking(move || GroupStateMachine::destroy(&db, group, &dir));
        logged_if_slow(group, "removing the group's state", destroyed)
            .await
            .map_err(std::io::Error::other)
            .and_then(|result| result)
            .map_err(|source| RegistryError::DropState { group, source })?;
        // sled keeps the removed keys' space until its log moves on (state_db.rs): the
        // compactor moves it on within seconds, once for every group dropped meanwhile (a
        // reclaim per drop took most of a stream delete's 7–23 ms).
        self.storage.compactor.reclaim_soon();
        // Whatever damage was found in it went with it.
        self.storage.state.damage().clear(group);
        Ok(())
    }

    /// Stop every group (node shutdown).
    pub async fn shutdown_all(&self) {
        let _lifecycle = self.lifecycle.lock().await;
        for group in self.ids() {
            if let Err(e) = self.stop_locked(group).await {
                tracing::warn!(group, error = %e, "group did not stop cleanly");
            }
        }
        // The compactor's task (and a sled reclaim under way) holds the database open.
        self.storage.compactor.stop().await;
    }

    fn map_read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<GroupId, Arc<RaftGroup>>> {
        self.groups
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn map_write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<GroupId, Arc<RaftGroup>>> {
        self.groups
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
