//! The cluster: this node's identity among its peers, the peer table, and the gRPC protocol
//! between nodes (`proto/cluster.proto`): Raft RPCs of every group, proposals forwarded to
//! leaders, and the core-NATS route.
//!
//! [`ClusterNode`] (one per node started with `--cluster`) owns the gRPC listener and the
//! shared channels to peers. Start-up order (see `node::Node::start`): the gRPC server
//! starts first, so peers can say hello while this node is still discovering them; then
//! [`ClusterNode::discover`] builds the peer table; then JetStream starts its groups with a
//! [`GrpcTransport`] and registers its `GroupRegistry` here so Raft RPCs reach them.
//!
//! Where related code lives: `consensus::network` (the `PeerTransport` seam),
//! `jetstream::placement` (which nodes host a stream), `jetstream::leadership` (what a stream
//! leader serves).

pub mod identity;
mod liveness;
pub mod peers;
pub mod proto;
pub mod raft_link;
pub mod route;
pub mod service;
pub mod transport;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::Channel;

use proto::cluster_client::ClusterClient;

use crate::config::cluster::ClusterConfig;
use crate::consensus::pacer::Pacer;
use crate::consensus::{GroupId, GroupRegistry, NodeId, RaftGroup};
use crate::server::advertisement::ClusterAdvertisement;
use crate::server::ServerShared;
pub use identity::{node_id_for, SINGLE_NODE_ID};
pub use peers::{Peer, PeerTable, PeerTableError};
pub use service::ClusterService;
pub use transport::{Channels, GrpcTransport};

/// This node in its cluster. See the module docs.
pub struct ClusterNode {
    local: Peer,
    cluster_name: String,
    /// The configured routes (peer cluster addresses).
    route_addrs: Vec<String>,
    /// Core NATS across nodes: interest and messages over one route per peer.
    core_routes: Arc<route::Routes>,
    /// Shared with the transport, which resolves node ids to addresses through it.
    peers: Arc<parking_lot::RwLock<PeerTable>>,
    channels: Channels,
    /// The Raft RPCs of every group, one stream per peer.
    raft_links: raft_link::RaftLinks,
    /// Set once JetStream started its groups (file and memory streams have a registry each);
    /// until then Raft RPCs are answered `unavailable`. Weak: JetStream owns the registries
    /// (and through them the log engine and its directory lock); this node only reaches
    /// them, and must not keep a stopped node's store open (the node and the router hold
    /// each other, so this node outlives its shutdown).
    registries: OnceLock<Vec<Weak<GroupRegistry>>>,
    /// The pacer of this node's groups, set with the registries; pings feed its liveness.
    pacer: OnceLock<Pacer>,
    /// The node's shutdown, which ends the pings.
    shutdown: CancellationToken,
    grpc_addr: SocketAddr,
}

impl std::fmt::Debug for ClusterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterNode")
            .field("local", &self.local)
            .field("grpc_addr", &self.grpc_addr)
            .finish_non_exhaustive()
    }
}

/// New clients are told the cluster's name and every node's client address.
impl ClusterAdvertisement for ClusterNode {
    fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    fn connect_urls(&self) -> Vec<String> {
        self.client_urls()
    }
}

impl ClusterNode {
    /// Binds the cluster listener and starts serving the node-to-node protocol.
    pub async fn start(
        shared: &Arc<ServerShared>,
        config: &ClusterConfig,
    ) -> std::io::Result<Arc<ClusterNode>> {
        let listener = TcpListener::bind(config.listen).await?;
        let grpc_addr = listener.local_addr()?;
        // A configured port 0 means "any": advertise the port actually bound.
        let advertise = match config.advertise.rsplit_once(':') {
            Some((host, "0")) => format!("{host}:{}", grpc_addr.port()),
            _ => config.advertise.clone(),
        };
        let host = advertise
            .rsplit_once(':')
            .map_or("127.0.0.1", |(host, _)| host);
        let client_url = format!("{host}:{}", shared.client_addr.port());
        // The node id must be stable: the configured name, or else the cluster address.
        let id_name = shared
            .config
            .server_name
            .clone()
            .unwrap_or_else(|| advertise.clone());
        let local = Peer {
            id: node_id_for(&id_name),
            name: shared.identity.server_name.clone(),
            cluster_addr: advertise,
            client_url,
        };
        let core_routes = route::Routes::new(shared.clone(), local.id);
        let max_message = transport::MAX_MESSAGE.max(core_routes.max_batch_size());
        let node = Arc::new(ClusterNode {
            local,
            cluster_name: config.name.clone(),
            route_addrs: config.routes.clone(),
            core_routes,
            peers: Arc::new(parking_lot::RwLock::new(PeerTable::default())),
            channels: Channels::default(),
            raft_links: raft_link::RaftLinks::new(shared.shutdown.clone()),
            registries: OnceLock::new(),
            pacer: OnceLock::new(),
            shutdown: shared.shutdown.clone(),
            grpc_addr,
        });
        let service = proto::cluster_server::ClusterServer::new(ClusterService::new(node.clone()))
            .max_decoding_message_size(max_message)
            .max_encoding_message_size(max_message);
        let shutdown = shared.shutdown.clone();
        shared.tasks.spawn(async move {
            // The builder's `tcp_nodelay` applies only to a listener tonic binds itself;
            // accepted connections of our own listener get it from `TcpIncoming`. Without
            // it, Nagle held back the small Raft replies behind unacknowledged segments.
            let incoming = TcpIncoming::from(listener).with_nodelay(Some(true));
            let served = tonic::transport::Server::builder()
                .initial_stream_window_size(transport::STREAM_WINDOW)
                .initial_connection_window_size(transport::CONNECTION_WINDOW)
                .http2_max_pending_accept_reset_streams(Some(transport::MAX_PENDING_RESETS))
                .add_service(service)
                .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::error!("cluster listener failed: {e}");
            }
        });
        tracing::info!(
            node_id = node.local.id,
            cluster = %node.cluster_name,
            "Listening for cluster (gRPC) connections on {grpc_addr}"
        );
        Ok(node)
    }

    pub fn node_id(&self) -> NodeId {
        self.local.id
    }

    pub fn cluster_name(&self) -> &str {
        &self.cluster_name
    }

    pub fn grpc_addr(&self) -> SocketAddr {
        self.grpc_addr
    }

    pub fn channels(&self) -> &Channels {
        &self.channels
    }

    /// The Raft transport for this node's groups.
    pub fn transport(&self) -> Arc<GrpcTransport> {
        Arc::new(GrpcTransport::new(
            self.local.id,
            self.channels.clone(),
            self.raft_links.clone(),
            self.peers.clone(),
        ))
    }

    pub fn node_info(&self) -> proto::NodeInfo {
        proto::NodeInfo {
            cluster_name: self.cluster_name.clone(),
            server_name: self.local.name.clone(),
            node_id: self.local.id,
            cluster_addr: self.local.cluster_addr.clone(),
            client_url: self.local.client_url.clone(),
        }
    }

    /// The peer table (this node included).
    pub fn peers(&self) -> PeerTable {
        self.peers.read().clone()
    }

    /// The name of node `id`, for cluster info.
    pub fn peer_name(&self, id: NodeId) -> Option<String> {
        self.peers.read().get(id).map(|peer| peer.name.clone())
    }

    /// Every node's client address (`host:port`), for INFO `connect_urls`.
    pub fn client_urls(&self) -> Vec<String> {
        self.peers
            .read()
            .nodes
            .values()
            .map(|peer| peer.client_url.clone())
            .collect()
    }

    /// A peer said hello: remember its client port (it may have changed since the table was
    /// saved); the host stays the one its route names.
    pub fn learn_client_url(&self, id: NodeId, client_url: &str) {
        let Some((_, port)) = client_url.rsplit_once(':') else {
            return;
        };
        if let Some(peer) = self.peers.write().nodes.get_mut(&id) {
            let host = peer
                .client_url
                .rsplit_once(':')
                .map_or_else(|| peer.client_url.clone(), |(host, _)| host.to_string());
            peer.client_url = format!("{host}:{port}");
        }
    }

    /// Makes this node's Raft groups reachable by peers (group ids are unique across the
    /// registries: the meta group hands them out), and starts pinging the peers for `pacer`,
    /// which paces those groups (once; later calls change nothing).
    pub fn serve_groups(self: &Arc<Self>, registries: Vec<Arc<GroupRegistry>>, pacer: Pacer) {
        let _ = self
            .registries
            .set(registries.iter().map(Arc::downgrade).collect());
        if self.pacer.set(pacer.clone()).is_ok() {
            liveness::start_pinging(self, &pacer, &self.shutdown);
        }
    }

    /// The pacer of this node's groups, once they are served.
    pub fn pacer(&self) -> Option<&Pacer> {
        self.pacer.get()
    }

    /// The group `id` if it runs on this node.
    pub fn group(&self, id: GroupId) -> Option<Arc<RaftGroup>> {
        self.registries
            .get()?
            .iter()
            .find_map(|registry| registry.upgrade()?.get(id))
    }

    /// Builds the peer table: the one saved by an earlier run, or else by asking every route
    /// who it is, waiting until all have answered (see `peers`).
    pub async fn discover(self: &Arc<Self>, store_dir: &Path) -> Result<PeerTable, PeerTableError> {
        let saved = match PeerTable::load(store_dir) {
            Ok(saved) => saved,
            // A damaged table is set aside and rebuilt from the routes (ADR 0015).
            Err(PeerTableError::Invalid { path, message }) => {
                let aside = path.with_extension("json.damaged");
                tracing::error!(
                    path = %path.display(),
                    kept = %aside.display(),
                    "saved cluster membership is damaged ({message}); rediscovering"
                );
                std::fs::rename(&path, &aside)
                    .map_err(|source| PeerTableError::Io { path, source })?;
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(saved) = saved {
            if saved.nodes.contains_key(&self.local.id) && saved.cluster_name == self.cluster_name {
                let mut table = saved;
                table.nodes.insert(self.local.id, self.local.clone());
                *self.peers.write() = table.clone();
                tracing::info!(
                    nodes = table.nodes.len(),
                    "cluster membership from {}",
                    store_dir.display()
                );
                return Ok(table);
            }
            tracing::warn!(
                "saved cluster membership is for another node or cluster; rediscovering"
            );
        }
        let mut table = PeerTable {
            cluster_name: self.cluster_name.clone(),
            ..PeerTable::default()
        };
        table.nodes.insert(self.local.id, self.local.clone());
        let answers = futures::future::join_all(
            self.route_addrs
                .iter()
                .map(|addr| self.hello_until_answered(addr.clone())),
        )
        .await;
        for (addr, info) in self.route_addrs.iter().zip(answers) {
            // Peers are reached where the route says (a node may listen on 0.0.0.0 and
            // advertise that), and so are their clients, on the port they report.
            let mut peer = Peer::from(&info);
            let route_host = addr
                .rsplit_once(':')
                .map_or(addr.as_str(), |(host, _)| host);
            let client_port = info
                .client_url
                .rsplit_once(':')
                .map_or("4222", |(_, port)| port);
            peer.cluster_addr = addr.clone();
            peer.client_url = format!("{route_host}:{client_port}");
            table.nodes.insert(peer.id, peer);
        }
        table.save(store_dir)?;
        tracing::info!(
            nodes = table.nodes.len(),
            "cluster formed: {:?}",
            table.nodes.values().map(|p| &p.name).collect::<Vec<_>>()
        );
        *self.peers.write() = table.clone();
        Ok(table)
    }

    async fn hello_until_answered(&self, addr: String) -> proto::NodeInfo {
        let mut attempt = 0;
        loop {
            match self.hello(&addr).await {
                Ok(info) => return info,
                Err(why) => {
                    if attempt % 20 == 0 {
                        tracing::info!(route = %addr, "waiting for peer: {why}");
                    }
                }
            }
            tokio::time::sleep(peers::backoff(attempt)).await;
            attempt += 1;
        }
    }

    async fn hello(&self, addr: &str) -> Result<proto::NodeInfo, String> {
        let mut client = self.channels.client(addr)?;
        let mut request = tonic::Request::new(proto::HelloRequest {
            node: Some(self.node_info()),
        });
        request.set_timeout(Duration::from_secs(2));
        let reply = client
            .hello(request)
            .await
            .map_err(|status| status.message().to_string())?;
        reply
            .into_inner()
            .node
            .ok_or_else(|| "hello without node info".to_string())
    }

    /// A gRPC client of node `target`.
    fn client_of(&self, target: NodeId) -> Result<ClusterClient<Channel>, String> {
        let addr = self
            .peers
            .read()
            .get(target)
            .map(|peer| peer.cluster_addr.clone())
            .ok_or_else(|| format!("unknown node {target}"))?;
        self.channels.client(&addr)
    }

    /// Asks node `target` to start an election in `group` (leader stepdown).
    pub async fn ask_to_elect(&self, target: NodeId, group: GroupId) -> Result<(), String> {
        let mut client = self.client_of(target)?;
        let mut request = tonic::Request::new(proto::ElectRequest { group });
        request.set_timeout(Duration::from_secs(2));
        let reply = client
            .elect(request)
            .await
            .map_err(|status| status.message().to_string())?
            .into_inner();
        if reply.error.is_empty() {
            Ok(())
        } else {
            Err(reply.error)
        }
    }

    /// Waits, at most `wait`, until node `target` has applied `group`'s log up to `index`;
    /// whether it did, and how far it had.
    pub async fn wait_applied(
        &self,
        target: NodeId,
        group: GroupId,
        index: u64,
        wait: Duration,
    ) -> Result<proto::AppliedReply, String> {
        let mut client = self.client_of(target)?;
        let wait_ms = u32::try_from(wait.as_millis()).unwrap_or(u32::MAX);
        let mut request = tonic::Request::new(proto::AppliedRequest {
            group,
            index,
            wait_ms,
        });
        request.set_timeout(wait + Duration::from_millis(500));
        let reply = client
            .applied(request)
            .await
            .map_err(|status| status.message().to_string())?;
        Ok(reply.into_inner())
    }

    /// Opens the core-NATS route to every peer in the table (idempotent).
    pub fn connect_routes(&self) {
        let peers = self.peers();
        for peer in peers.nodes.values().filter(|peer| peer.id != self.local.id) {
            match self.channels.client(&peer.cluster_addr) {
                Ok(client) => self.core_routes.add_peer(peer.id, client),
                Err(e) => tracing::error!(peer = %peer.name, "no route to peer: {e}"),
            }
        }
    }

    /// Core NATS across nodes.
    /// Whether this node and `peer` exchange messages: the route is up both ways (the path API
    /// requests and their replies take).
    pub fn reaches(&self, peer: NodeId) -> bool {
        self.core_routes.is_connected(peer) && self.core_routes.has_inbound(peer)
    }

    pub fn core_routes(&self) -> &Arc<route::Routes> {
        &self.core_routes
    }

    /// An inbound core-NATS route stream from a peer.
    pub async fn serve_route(
        &self,
        frames: tonic::Streaming<proto::RouteBatch>,
    ) -> Result<tonic::Response<proto::RouteClosed>, tonic::Status> {
        self.core_routes
            .serve_inbound(frames)
            .await
            .map(tonic::Response::new)
    }
}
