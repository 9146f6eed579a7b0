//! The async node: accepts client connections, runs one session per connection, routes
//! messages between them, and shuts everything down as one tree.
//!
//! `Server::start` returns a `RunningServer` handle (used by `main.rs` and by tests, which
//! start nodes in-process on port 0).

pub mod client;
pub mod dispatch;
pub mod identity;
mod listener;
pub mod message;
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

use crate::cluster::ClusterNode;
use crate::config::Config;
use crate::jetstream::JetStream;
use crate::monitor;
use crate::store::log::LogOptions;
use identity::Identity;
use router::Router;
use stats::ServerStats;

/// State shared by every task of one node.
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
    /// Set once JetStream started (weak: JetStream holds this struct).
    pub jetstream: std::sync::OnceLock<std::sync::Weak<JetStream>>,
    /// Set at start-up when the node runs in a cluster.
    pub cluster: std::sync::OnceLock<Arc<ClusterNode>>,
}

/// A started node. Dropping it does not stop the node; call [`RunningServer::shutdown`].
#[derive(Debug)]
pub struct RunningServer {
    shared: Arc<ServerShared>,
    http_addr: Option<SocketAddr>,
    jetstream: Option<Arc<JetStream>>,
}

pub struct Server;

impl Server {
    /// Binds the listeners and starts serving. Fails only if a listener cannot be bound.
    pub async fn start(config: Config) -> std::io::Result<RunningServer> {
        Self::start_with_log_options(config, LogOptions::default()).await
    }

    /// `start` with explicit options for the JetStream write-ahead log (tests inject storage
    /// faults through them).
    pub async fn start_with_log_options(
        config: Config,
        log_options: LogOptions,
    ) -> std::io::Result<RunningServer> {
        let client_listener = TcpListener::bind(config.listen).await?;
        let client_addr = client_listener.local_addr()?;
        let http_listener = match config.http {
            Some(addr) => Some(TcpListener::bind(addr).await?),
            None => None,
        };
        let http_addr = http_listener
            .as_ref()
            .map(TcpListener::local_addr)
            .transpose()?;
        if config.jetstream {
            std::fs::create_dir_all(&config.store_dir)?;
        }

        let stats = Arc::new(ServerStats::default());
        let shared = Arc::new(ServerShared {
            identity: Identity::new(config.server_name.as_deref()),
            router: Router::new(stats.clone()),
            stats,
            config: Arc::new(config),
            client_addr,
            next_client_id: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
            tasks: TaskTracker::new(),
            jetstream: std::sync::OnceLock::new(),
            cluster: std::sync::OnceLock::new(),
        });

        tracing::info!(
            version = shared.identity.jetraft_version,
            server_name = %shared.identity.server_name,
            "starting jetraft"
        );
        // The cluster listener first, so peers can reach this node while it waits for them.
        if let Some(cluster_config) = shared.config.cluster.clone() {
            let node = ClusterNode::start(&shared, &cluster_config).await?;
            let _ = shared.cluster.set(node.clone());
            node.discover(&shared.config.store_dir)
                .await
                .map_err(std::io::Error::other)?;
            node.connect_routes();
        }
        // JetStream subscribes its API before the first client can connect.
        let jetstream = if shared.config.jetstream {
            let started =
                JetStream::start(shared.clone(), shared.cluster.get().cloned(), log_options)
                    .await
                    .map_err(std::io::Error::other)?;
            let _ = shared.jetstream.set(Arc::downgrade(&started));
            Some(started)
        } else {
            None
        };
        tracing::info!("Listening for client connections on {client_addr}");
        shared
            .tasks
            .spawn(listener::accept_loop(shared.clone(), client_listener));
        if let Some(listener) = http_listener {
            tracing::info!("Starting http monitor on http://{}", listener.local_addr()?);
            shared.tasks.spawn(monitor::serve(shared.clone(), listener));
        }
        tracing::info!("Server is ready");
        Ok(RunningServer {
            shared,
            http_addr,
            jetstream,
        })
    }
}

impl RunningServer {
    pub fn client_addr(&self) -> SocketAddr {
        self.shared.client_addr
    }

    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }

    pub fn jetstream(&self) -> Option<&Arc<JetStream>> {
        self.jetstream.as_ref()
    }

    /// Stops accepting, flushes and closes every client, stops the Raft groups, and waits
    /// for every task to end.
    pub async fn shutdown(self) {
        tracing::info!("shutting down: draining client connections");
        if let Some(jetstream) = &self.jetstream {
            // Waiting pull requests learn why before their connections close.
            jetstream.signal_shutdown().await;
        }
        self.shared.shutdown.cancel();
        if let Some(jetstream) = &self.jetstream {
            jetstream.shutdown().await;
        }
        self.shared.tasks.close();
        self.shared.tasks.wait().await;
        tracing::info!("server exited cleanly");
    }
}
