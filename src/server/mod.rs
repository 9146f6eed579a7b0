//! Core NATS on one node: accepts client connections, runs one session per connection and
//! routes messages between them. Nothing here knows of JetStream, the cluster or monitoring;
//! they reach core NATS only through doors this module owns: [`subscription::InternalSubscriber`]
//! (a component that subscribes like a client), [`subscription::RemoteSubscriber`] (another
//! node's interest), [`router::InterestListener`] (this node's interest, for the routes) and
//! [`advertisement::ClusterAdvertisement`] (what INFO says about the cluster).
//!
//! Starting a whole node (cluster, JetStream, monitoring, then the clients) and its shutdown
//! order live in the composition root, `crate::node`, which builds a [`ServerShared`] with
//! [`ServerShared::new`] and opens the doors to clients with [`serve_clients`].

pub mod advertisement;
pub mod client;
pub mod dispatch;
pub mod identity;
mod listener;
pub mod message;
pub mod out_queue;
pub mod router;
mod session;
pub mod stats;
pub mod subscription;

use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use advertisement::ClusterAdvertisement;
use identity::Identity;
use router::Router;
use stats::ServerStats;

/// State shared by every task of one node (one per node): its configuration and identity, the
/// router, the traffic counters, and the shutdown tree every task of the node hangs from.
#[derive(Debug)]
pub struct ServerShared {
    pub config: Arc<Config>,
    pub identity: Identity,
    pub stats: Arc<ServerStats>,
    pub router: Router,
    /// The client listener's bound address (the real port when configured with port 0).
    pub client_addr: SocketAddr,
    next_client_id: AtomicU64,
    pub shutdown: CancellationToken,
    pub tasks: TaskTracker,
}

impl ServerShared {
    /// The state of a node whose client listener is bound at `client_addr`; nothing runs yet.
    pub fn new(config: Config, client_addr: SocketAddr) -> Arc<ServerShared> {
        let stats = Arc::new(ServerStats::default());
        Arc::new(ServerShared {
            identity: Identity::new(config.server_name.as_deref()),
            router: Router::new(stats.clone()),
            stats,
            config: Arc::new(config),
            client_addr,
            next_client_id: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
        })
    }
}

/// Starts accepting clients on `listener` (bound at `shared.client_addr`), one session each,
/// until the node shuts down. `cluster` is what their INFO says about the cluster (`None` on
/// a single node).
pub fn serve_clients(
    shared: &Arc<ServerShared>,
    listener: TcpListener,
    cluster: Option<Arc<dyn ClusterAdvertisement>>,
) {
    tracing::info!("Listening for client connections on {}", shared.client_addr);
    shared
        .tasks
        .spawn(listener::accept_loop(shared.clone(), listener, cluster));
}
