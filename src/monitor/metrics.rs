//! `/metrics`: the `/varz` counters in Prometheus text exposition format.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;

use super::varz::Varz;
use super::MonitorState;

pub async fn handler(State(state): State<Arc<MonitorState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(&Varz::collect(&state)),
    )
}

pub fn render(varz: &Varz) -> String {
    let rows: [(&str, &str, &str, u64); 12] = [
        (
            "connections",
            "gauge",
            "Open client connections",
            varz.connections,
        ),
        (
            "total_connections",
            "counter",
            "Client connections accepted since start",
            varz.total_connections,
        ),
        (
            "subscriptions",
            "gauge",
            "Active subscriptions",
            varz.subscriptions,
        ),
        (
            "in_msgs",
            "counter",
            "Messages received from clients",
            varz.in_msgs,
        ),
        (
            "out_msgs",
            "counter",
            "Messages sent to clients",
            varz.out_msgs,
        ),
        (
            "in_bytes",
            "counter",
            "Payload bytes received from clients",
            varz.in_bytes,
        ),
        (
            "out_bytes",
            "counter",
            "Payload bytes sent to clients",
            varz.out_bytes,
        ),
        (
            "slow_consumers",
            "counter",
            "Clients disconnected as slow consumers",
            varz.slow_consumers,
        ),
        (
            "stale_connections",
            "counter",
            "Clients disconnected for unanswered pings",
            varz.stale_connections,
        ),
        (
            "mem_bytes",
            "gauge",
            "Resident memory of the server process",
            varz.mem,
        ),
        (
            "uptime_seconds",
            "gauge",
            "Seconds since the server started",
            varz.uptime_seconds,
        ),
        (
            "max_payload_bytes",
            "gauge",
            "Configured max_payload",
            varz.max_payload as u64,
        ),
    ];
    let mut rows = rows.to_vec();
    if let Some(js) = &varz.jetstream {
        rows.extend([
            (
                "jetstream_streams",
                "gauge",
                "JetStream streams",
                js.streams,
            ),
            (
                "jetstream_messages",
                "gauge",
                "Messages stored in all streams",
                js.messages,
            ),
            (
                "jetstream_bytes",
                "gauge",
                "Bytes stored in all streams",
                js.bytes,
            ),
            (
                "wal_appends_total",
                "counter",
                "Raft entries appended to the write-ahead log",
                js.wal.appends,
            ),
            (
                "wal_batches_total",
                "counter",
                "Group-commit batches written",
                js.wal.batches,
            ),
            (
                "wal_fsyncs_total",
                "counter",
                "fsync calls of the write-ahead log",
                js.wal.fsyncs,
            ),
            (
                "wal_bytes_total",
                "counter",
                "Bytes written to the write-ahead log",
                js.wal.bytes,
            ),
            (
                "jetstream_api_dropped_total",
                "counter",
                "API requests dropped because the API queue was full",
                js.dropped.api_requests,
            ),
            (
                "jetstream_acks_dropped_total",
                "counter",
                "Acks dropped because a stream's ack queue was full",
                js.dropped.acks,
            ),
            (
                "raft_groups_active",
                "gauge",
                "Raft groups on this node with timers running (heartbeats, elections)",
                js.raft_groups.active,
            ),
            (
                "raft_groups_quiet",
                "gauge",
                "Idle Raft groups on this node: no timer, no heartbeat",
                js.raft_groups.quiet,
            ),
            (
                "raft_groups_waking",
                "gauge",
                "Raft groups woken from quiet, not yet confirmed active",
                js.raft_groups.waking,
            ),
        ]);
    }
    let mut out = String::new();
    for (name, kind, help, value) in rows {
        let _ = writeln!(out, "# HELP jetraft_{name} {help}");
        let _ = writeln!(out, "# TYPE jetraft_{name} {kind}");
        let _ = writeln!(
            out,
            "jetraft_{name}{{server_id=\"{}\",server_name=\"{}\"}} {value}",
            varz.server_id, varz.server_name
        );
    }
    out
}
