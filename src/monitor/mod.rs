//! HTTP monitoring, as nats-server's `-m/--http_port`: `/healthz`, `/varz` (JSON shaped like
//! nats-server's), `/jsz` (each local stream replica), `/routez` (the routes to the other
//! nodes and their traffic) and `/metrics` (the same counters in Prometheus text format).

mod jsz;
mod metrics;
mod routez;
mod varz;

use std::sync::Arc;

use axum::routing::get;
use axum::Router;
use tokio::net::TcpListener;

use crate::server::ServerShared;

pub use varz::Varz;

pub async fn serve(shared: Arc<ServerShared>, listener: TcpListener) {
    let shutdown = shared.shutdown.clone();
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
        .with_state(shared);
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
