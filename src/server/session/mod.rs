//! One client connection: a read loop (`reader`) that decodes and executes operations, and a
//! writer task (`writer`) that drains the connection's outbound buffer to the socket and keeps
//! the connection alive with PINGs.
//!
//! Lifecycle: INFO is queued first, both halves run until either side closes the
//! `ClientHandle`, then the session removes the client's subscriptions and logs the reason.

mod connect;
mod errors;
mod publish;
mod reader;
mod writer;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpStream;

use super::advertisement::ClusterAdvertisement;
use super::client::{ClientHandle, CloseReason};
use super::ServerShared;
use crate::wire::encoder;
use crate::wire::handshake::ServerInfo;

/// Serves client `id` on `socket` until it closes. `cluster` is what its INFO says about the
/// cluster (none on a single node).
pub async fn run(
    shared: Arc<ServerShared>,
    cluster: Option<Arc<dyn ClusterAdvertisement>>,
    socket: TcpStream,
    peer: SocketAddr,
    id: u64,
) {
    let stats = &shared.stats;
    let open = stats.connections.fetch_add(1, Ordering::Relaxed) + 1;
    stats.total_connections.fetch_add(1, Ordering::Relaxed);

    let client = Arc::new(ClientHandle::new(
        id,
        shared.config.max_pending,
        shared.stats.clone(),
    ));
    let info = server_info(&shared, cluster.as_deref(), id, peer);
    client.queue_protocol(&info_line(&info));

    let (read_half, write_half) = socket.into_split();
    let writer = tokio::spawn(writer::run(shared.clone(), client.clone(), write_half));

    if open as usize > shared.config.max_connections {
        client.close_with_err(
            Some(errors::MAX_CONNECTIONS),
            CloseReason::MaxConnectionsExceeded,
        );
    } else {
        tracing::info!(cid = id, %peer, "client connection created");
        reader::Reader::new(shared.clone(), client.clone(), info)
            .run(read_half)
            .await;
    }

    let reason = writer.await.unwrap_or(CloseReason::WriteError);
    let reason = client.closing_reason().unwrap_or(reason);
    tracing::info!(cid = id, %peer, reason = reason.as_str(), "client connection closed");
    stats.connections.fetch_sub(1, Ordering::Relaxed);
}

fn info_line(info: &ServerInfo) -> bytes::BytesMut {
    let mut line = bytes::BytesMut::new();
    encoder::write_info(&mut line, &info.to_json());
    line
}

fn server_info(
    shared: &ServerShared,
    cluster: Option<&dyn ClusterAdvertisement>,
    client_id: u64,
    peer: SocketAddr,
) -> ServerInfo {
    let config = &shared.config;
    ServerInfo {
        server_id: shared.identity.server_id.clone(),
        server_name: shared.identity.server_name.clone(),
        version: shared.identity.version.to_owned(),
        proto: super::identity::PROTOCOL_VERSION,
        go: format!("jetraft {}", shared.identity.jetraft_version),
        host: config.listen.ip().to_string(),
        port: shared.client_addr.port(),
        headers: true,
        max_payload: config.max_payload,
        auth_required: config.auth.required(),
        jetstream: config.jetstream,
        client_id,
        client_ip: peer.ip().to_string(),
        cluster: cluster.map(|cluster| cluster.cluster_name().to_string()),
        connect_urls: cluster
            .map(|cluster| cluster.connect_urls())
            .unwrap_or_default(),
        connect_info: false,
        remote_account: None,
    }
}
