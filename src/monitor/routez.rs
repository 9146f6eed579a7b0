//! `/routez`: this node's routes to its peers, with nats-server's field names. A route here is
//! the node-to-node gRPC link (one per peer), whose core-NATS traffic is counted as nats-server
//! counts a route's: messages forwarded to the peer because of its interest (`out_msgs`), and
//! messages it forwarded here (`in_msgs`); bytes are headers plus payload. Raft traffic is not
//! counted here. A node without `--cluster` has no routes.

use std::sync::Arc;
use std::time::SystemTime;

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use super::varz::rfc3339;
use super::MonitorState;

#[derive(Debug, Serialize)]
pub struct Routez {
    pub server_id: String,
    pub server_name: String,
    pub now: String,
    pub num_routes: usize,
    pub routes: Vec<RouteInfo>,
}

#[derive(Debug, Serialize)]
pub struct RouteInfo {
    /// The peer's Raft node id.
    pub rid: u64,
    pub remote_id: String,
    pub remote_name: String,
    pub ip: String,
    pub port: u16,
    pub pending_size: usize,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    /// The peer's (subject, queue) interests installed on this node.
    pub subscriptions: usize,
    /// jetraft's additions: the outbound and inbound route streams are open, and messages
    /// to the peer dropped because its queue was full.
    pub connected: bool,
    pub inbound: bool,
    pub dropped: u64,
}

impl Routez {
    pub fn collect(state: &MonitorState) -> Self {
        let shared = &state.shared;
        let routes: Vec<RouteInfo> = state.cluster.as_ref().map_or_else(Vec::new, |cluster| {
            let core = cluster.core_routes();
            cluster
                .peers()
                .nodes
                .values()
                .filter(|peer| peer.id != cluster.node_id())
                .map(|peer| {
                    let stats = core.stats(peer.id).unwrap_or_default();
                    let (ip, port) = split_addr(&peer.cluster_addr);
                    RouteInfo {
                        rid: peer.id,
                        remote_id: peer.id.to_string(),
                        remote_name: peer.name.clone(),
                        ip,
                        port,
                        pending_size: stats.pending_bytes,
                        in_msgs: stats.in_msgs,
                        out_msgs: stats.out_msgs,
                        in_bytes: stats.in_bytes,
                        out_bytes: stats.out_bytes,
                        subscriptions: stats.subscriptions,
                        connected: stats.connected,
                        inbound: stats.inbound,
                        dropped: stats.dropped,
                    }
                })
                .collect()
        });
        Routez {
            server_id: shared.identity.server_id.clone(),
            server_name: shared.identity.server_name.clone(),
            now: rfc3339(SystemTime::now()),
            num_routes: routes.len(),
            routes,
        }
    }
}

/// `host:port` → (host, port); a peer address without a port gives port 0.
fn split_addr(addr: &str) -> (String, u16) {
    match addr.rsplit_once(':') {
        Some((host, port)) => match port.parse() {
            Ok(port) => (host.trim_matches(['[', ']']).to_owned(), port),
            Err(_) => (addr.to_owned(), 0),
        },
        None => (addr.to_owned(), 0),
    }
}

pub async fn handler(State(state): State<Arc<MonitorState>>) -> Json<Routez> {
    Json(Routez::collect(&state))
}

#[cfg(test)]
mod tests {
    use super::split_addr;

    #[test]
    fn addresses_split_into_host_and_port() {
        assert_eq!(split_addr("127.0.0.1:6222"), ("127.0.0.1".into(), 6222));
        assert_eq!(split_addr("[::1]:6222"), ("::1".into(), 6222));
        assert_eq!(split_addr("n1"), ("n1".into(), 0));
        assert_eq!(split_addr("n1:x"), ("n1:x".into(), 0));
    }
}
