//! `/jsz`: this node's JetStream as it holds it — the meta leader and, for every stream replica
//! on this node, its local state (not the leader's). nats-server's `/jsz` answers for the whole
//! account; jetraft's shows each replica, which is what comparing nodes after a failover needs.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use super::varz::{CacheVarz, RaftGroupsVarz};
use super::MonitorState;
use crate::jetstream::ReplicaState;

#[derive(Debug, Serialize)]
pub struct Jsz {
    pub server_name: String,
    pub enabled: bool,
    /// This node's Raft node id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u64>,
    /// Name of the meta group's leader, empty while there is none.
    pub meta_leader: String,
    /// Bytes held by this node's memory stream replicas (nats-server's `memory`).
    pub memory: u64,
    /// Bytes held by this node's file stream replicas (nats-server's `storage`).
    pub storage: u64,
    /// jetraft's addition: the message block cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jetraft_cache: Option<CacheVarz>,
    /// jetraft's addition: this node's Raft groups by pacing mode (active, quiet, waking).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raft_groups: Option<RaftGroupsVarz>,
    /// jetraft's addition: the other nodes, alive or not by the node pings (empty alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peers_alive: Option<BTreeMap<String, bool>>,
    pub streams: Vec<ReplicaState>,
}

pub async fn handler(State(state): State<Arc<MonitorState>>) -> Json<Jsz> {
    let shared = &state.shared;
    Json(match &state.jetstream {
        None => Jsz {
            server_name: shared.identity.server_name.clone(),
            enabled: false,
            node_id: None,
            meta_leader: String::new(),
            memory: 0,
            storage: 0,
            jetraft_cache: None,
            raft_groups: None,
            peers_alive: None,
            streams: Vec::new(),
        },
        Some(js) => {
            let usage = js.store_usage();
            Jsz {
                server_name: shared.identity.server_name.clone(),
                enabled: true,
                node_id: Some(js.node_id()),
                meta_leader: js.meta_leader_name(),
                memory: usage.memory,
                storage: usage.storage,
                jetraft_cache: Some(CacheVarz::of(&usage)),
                raft_groups: Some(RaftGroupsVarz::of(js)),
                peers_alive: Some(js.peers_alive()),
                streams: js.replica_states(),
            }
        }
    })
}
