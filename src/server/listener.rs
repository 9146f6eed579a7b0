//! The client listener: accepts TCP connections and starts a session for each.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::net::TcpListener;

use super::advertisement::ClusterAdvertisement;
use super::session;
use super::ServerShared;

pub async fn accept_loop(
    shared: Arc<ServerShared>,
    listener: TcpListener,
    cluster: Option<Arc<dyn ClusterAdvertisement>>,
) {
    loop {
        let accepted = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((socket, peer)) => {
                let _ = socket.set_nodelay(true);
                let id = shared.next_client_id.fetch_add(1, Ordering::Relaxed);
                shared.tasks.spawn(session::run(
                    shared.clone(),
                    cluster.clone(),
                    socket,
                    peer,
                    id,
                ));
            }
            Err(err) => {
                // Typically EMFILE; back off briefly instead of spinning.
                tracing::error!("accept failed: {err}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
