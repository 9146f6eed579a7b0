//! The writer task of one connection: drains the outbound queue to the socket, sends the
//! server's keep-alive PINGs, and closes the socket once the connection is closing.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;

use super::errors;
use crate::server::client::{ClientHandle, CloseReason, WriterWork};
use crate::server::stats::ServerStats;
use crate::server::ServerShared;
use crate::wire::encoder;

/// A write that makes no progress for this long means the client stopped reading
/// (nats-server's default `write_deadline`).
const WRITE_DEADLINE: Duration = Duration::from_secs(10);

pub async fn run(
    shared: Arc<ServerShared>,
    client: Arc<ClientHandle>,
    mut socket: OwnedWriteHalf,
) -> CloseReason {
    let interval = shared.config.ping_interval;
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        match client.take_work() {
            WriterWork::Write(mut batch) => {
                match tokio::time::timeout(WRITE_DEADLINE, socket.write_all_buf(&mut batch)).await {
                    Ok(Ok(())) => client.notify_drained(),
                    Ok(Err(err)) => {
                        tracing::debug!(cid = client.id, "write error: {err}");
                        client.close(CloseReason::WriteError);
                        return CloseReason::WriteError;
                    }
                    Err(_) => {
                        // Already counted if the client was cut off for pending bytes.
                        if client.closing_reason() != Some(CloseReason::SlowConsumer) {
                            ServerStats::add(&shared.stats.slow_consumers, 1);
                        }
                        tracing::warn!(cid = client.id, "slow consumer: write deadline exceeded");
                        client.close(CloseReason::SlowConsumer);
                        return CloseReason::SlowConsumer;
                    }
                }
            }
            WriterWork::Close(reason) => {
                let _ = socket.shutdown().await;
                return reason;
            }
            WriterWork::Idle => tokio::select! {
                _ = client.wait_for_work() => {}
                _ = ping.tick() => {
                    if client.record_ping_sent(shared.config.ping_max) {
                        client.queue_protocol(encoder::PING);
                    } else {
                        ServerStats::add(&shared.stats.stale_connections, 1);
                        client.close_with_err(
                            Some(errors::STALE_CONNECTION),
                            CloseReason::StaleConnection,
                        );
                    }
                }
                _ = shared.shutdown.cancelled() => client.close(CloseReason::ServerShutdown),
            },
        }
    }
}
