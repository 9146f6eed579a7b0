//! HTTP monitoring, as nats-server's `-m/--http_port`: `/healthz`, `/varz` (JSON shaped like
//! nats-server's), `/jsz` (each local stream replica), `/routez` (the routes to the other
//! nodes and their traffic) and `/metrics` (the same counters in Prometheus text format).
//!
//! The endpoints read a [`MonitorState`], which the composition root (`crate::node`) builds
//! from what the node runs: core NATS always, JetStream and the cluster when enabled.

mod jsz;
mod metrics;
mod routez;
mod varz;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::cluster::ClusterNode;
use crate::jetstream::JetStream;
use crate::server::ServerShared;

pub use varz::Varz;

/// What the endpoints report on (one per node): core NATS's state, and JetStream and the
/// cluster when this node runs them.
#[derive(Debug)]
pub struct MonitorState {
    pub shared: Arc<ServerShared>,
    pub jetstream: Option<Arc<JetStream>>,
    pub cluster: Option<Arc<ClusterNode>>,
}

/// Serves the endpoints on `listener` until the node shuts down.
pub async fn serve(state: MonitorState, listener: TcpListener) {
    let shutdown = state.shared.shutdown.clone();
    let app = Router::new()
        .route(
            "/",
            get(|| async { "jetraft monitoring: /healthz /varz /jsz /routez /metrics\n" }),
        )
        .route("/healthz", get(healthz))
        .route("/varz", get(varz::handler))
        .route("/jsz", get(jsz::handler))
        .route("/routez", get(routez::handler))
        .route("/metrics", get(metrics::handler))
        .with_state(Arc::new(state));
    let served = axum::serve(listener, app)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await;
    if let Err(err) = served {
        tracing::error!("monitoring server failed: {err}");
    }
}

async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({ "status": "ok" }))
}
