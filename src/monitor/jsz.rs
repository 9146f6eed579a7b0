//! `/jsz`: this node's JetStream as it holds it — the meta leader and, for every stream replica
//! on this node, its local state (not the leader's). nats-server's `/jsz` answers for the whole
//! account; jetraft's shows each replica, which is what comparing nodes after a failover needs.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use serde::Serialize;

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
            streams: Vec::new(),
        },
        Some(js) => Jsz {
            server_name: shared.identity.server_name.clone(),
            enabled: true,
            node_id: Some(js.node_id()),
            meta_leader: js.meta_leader_name(),
            streams: js.replica_states(),
        },
    })
}
