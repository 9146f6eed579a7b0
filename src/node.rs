//! The composition root: starts one jetraft node — core NATS (`server`), the cluster, JetStream
//! and monitoring — hands each the others it needs, and stops them as one shutdown tree.
//!
//! This is the only module that names every room; the rooms below it meet only through what
//! is handed to them here (`JetStream::start` gets the `ClusterNode`, monitoring gets a
//! `MonitorState`, client sessions get the cluster as a `ClusterAdvertisement`). `main.rs`
//! and the tests (which start nodes in-process on port 0) start nodes through [`Node`].

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::cluster::ClusterNode;
use crate::config::Config;
use crate::jetstream::JetStream;
use crate::monitor::{self, MonitorState};
use crate::server::advertisement::ClusterAdvertisement;
use crate::server::{self, ServerShared};
use crate::store::log::LogOptions;

// The block cache's default is named twice (the layers keep `config` from naming
// `jetstream`): once for a node configured without it, once for the cache itself.
const _: () = assert!(
    crate::config::DEFAULT_JS_CACHE_BYTES == crate::jetstream::stream_machine::DEFAULT_CACHE_BYTES
);

/// Starts nodes; see [`Node::start`].
#[derive(Debug)]
pub struct Node;

/// A started node. Dropping it does not stop the node; call [`RunningNode::shutdown`].
#[derive(Debug)]
pub struct RunningNode {
    shared: Arc<ServerShared>,
    http_addr: Option<SocketAddr>,
    jetstream: Option<Arc<JetStream>>,
}

impl Node {
    /// Binds the listeners and starts serving. Fails if a listener cannot be bound, or if the
    /// cluster or JetStream cannot start.
    pub async fn start(config: Config) -> std::io::Result<RunningNode> {
        Self::start_with_log_options(config, LogOptions::default()).await
    }

    /// `start` with explicit options for the JetStream write-ahead log (tests inject storage
    /// faults through them).
    pub async fn start_with_log_options(
        config: Config,
        log_options: LogOptions,
    ) -> std::io::Result<RunningNode> {
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

        let shared = ServerShared::new(config, client_addr);
        tracing::info!(
            version = shared.identity.jetraft_version,
            server_name = %shared.identity.server_name,
            "starting jetraft"
        );
        // The cluster listener first, so peers can reach this node while it waits for them.
        let cluster = match shared.config.cluster.clone() {
            Some(cluster_config) => {
                let node = ClusterNode::start(&shared, &cluster_config).await?;
                node.discover(&shared.config.store_dir)
                    .await
                    .map_err(std::io::Error::other)?;
                node.connect_routes();
                Some(node)
            }
            None => None,
        };
        // JetStream subscribes its API before the first client can connect.
        let jetstream = if shared.config.jetstream {
            let started = JetStream::start(shared.clone(), cluster.clone(), log_options)
                .await
                .map_err(std::io::Error::other)?;
            Some(started)
        } else {
            None
        };
        let advertisement = cluster
            .clone()
            .map(|cluster| cluster as Arc<dyn ClusterAdvertisement>);
        server::serve_clients(&shared, client_listener, advertisement);
        if let Some(listener) = http_listener {
            tracing::info!("Starting http monitor on http://{}", listener.local_addr()?);
            let state = MonitorState {
                shared: shared.clone(),
                jetstream: jetstream.clone(),
                cluster,
            };
            shared.tasks.spawn(monitor::serve(state, listener));
        }
        tracing::info!("Server is ready");
        Ok(RunningNode {
            shared,
            http_addr,
            jetstream,
        })
    }
}

impl RunningNode {
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
    /// for every task to end. Once it returns nothing of the node holds its store (a node
    /// can start on the same directory at once).
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
        if let Some(jetstream) = self.jetstream {
            // The last handle: once it goes, nothing of the node holds the store.
            jetstream.close().await;
        }
        tracing::info!("server exited cleanly");
    }
}
