//! `/varz`: general server information and traffic counters, with nats-server's field names.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::Json;
use serde::Serialize;

use super::MonitorState;
use crate::jetstream::catalog::StoreUsage;
use crate::jetstream::stream_machine::CacheStats;
use crate::jetstream::JetStream;
use crate::jsapi::Timestamp;

#[derive(Debug, Serialize)]
pub struct Varz {
    pub server_id: String,
    pub server_name: String,
    pub version: String,
    pub jetraft_version: String,
    pub proto: u8,
    pub host: String,
    pub port: u16,
    pub auth_required: bool,
    pub max_connections: usize,
    pub ping_interval: u64,
    pub ping_max: u32,
    pub http_port: u16,
    pub max_control_line: usize,
    pub max_payload: usize,
    pub max_pending: usize,
    pub start: String,
    pub now: String,
    pub uptime: String,
    #[serde(skip)]
    pub uptime_seconds: u64,
    pub mem: u64,
    pub cores: usize,
    pub connections: u64,
    pub total_connections: u64,
    pub subscriptions: u64,
    pub in_msgs: u64,
    pub out_msgs: u64,
    pub in_bytes: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
    pub stale_connections: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jetstream: Option<JetStreamVarz>,
}

/// JetStream usage and the durable log's counters. Fsyncs per message over a run is the
/// difference in `wal.fsyncs` divided by the number of messages published.
#[derive(Debug, Serialize)]
pub struct JetStreamVarz {
    pub streams: u64,
    pub messages: u64,
    pub bytes: u64,
    /// Bytes held by memory streams (nats-server's `jetstream.stats.memory`).
    pub memory: u64,
    /// Bytes held by file streams (nats-server's `jetstream.stats.storage`).
    pub storage: u64,
    /// jetraft's addition: the message block cache every body is read through.
    pub jetraft_cache: CacheVarz,
    pub wal: WalVarz,
    /// jetraft's addition: what bounded queues dropped since start.
    pub dropped: DroppedVarz,
    /// jetraft's addition: this node's Raft groups by pacing mode.
    pub raft_groups: RaftGroupsVarz,
}

/// The node's message block cache (`stream_machine::cache`) and the blocks kept beside it.
#[derive(Debug, Serialize)]
pub struct CacheVarz {
    #[serde(flatten)]
    pub cache: CacheStats,
    /// Blocks kept in memory outside the cache: memory streams' bodies, and file streams'
    /// newest blocks until sled holds them.
    pub pinned_bytes: u64,
}

impl CacheVarz {
    pub fn of(usage: &StoreUsage) -> CacheVarz {
        CacheVarz {
            cache: usage.cache,
            pinned_bytes: usage.pinned_bytes,
        }
    }
}

/// Items the JetStream front's bounded queues dropped (see ARCHITECTURE.md, Invariants).
#[derive(Debug, Serialize)]
pub struct DroppedVarz {
    /// API requests dropped unanswered because the API inbox was full.
    pub api_requests: u64,
    /// Acks dropped because their stream's ack queue was full (redelivered after ack_wait).
    pub acks: u64,
}

#[derive(Debug, Serialize)]
pub struct WalVarz {
    /// Raft entries appended (one entry carries a batch of messages).
    pub appends: u64,
    pub writes: u64,
    /// Group-commit batches: one write and one data fsync each.
    pub batches: u64,
    pub fsyncs: u64,
    pub bytes: u64,
}

impl Varz {
    pub fn collect(state: &MonitorState) -> Self {
        let shared = &state.shared;
        let config = &shared.config;
        let stats = shared.stats.snapshot();
        let now = SystemTime::now();
        let elapsed = now.duration_since(shared.stats.started).unwrap_or_default();
        Varz {
            server_id: shared.identity.server_id.clone(),
            server_name: shared.identity.server_name.clone(),
            version: shared.identity.version.to_owned(),
            jetraft_version: shared.identity.jetraft_version.to_owned(),
            proto: crate::server::identity::PROTOCOL_VERSION,
            host: config.listen.ip().to_string(),
            port: shared.client_addr.port(),
            auth_required: config.auth.required(),
            max_connections: config.max_connections,
            ping_interval: config.ping_interval.as_nanos() as u64,
            ping_max: config.ping_max,
            http_port: config.http.map_or(0, |a| a.port()),
            max_control_line: config.max_control_line,
            max_payload: config.max_payload,
            max_pending: config.max_pending,
            start: rfc3339(shared.stats.started),
            now: rfc3339(now),
            uptime: uptime(elapsed),
            uptime_seconds: elapsed.as_secs(),
            mem: resident_memory_bytes(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            connections: stats.connections,
            total_connections: stats.total_connections,
            subscriptions: stats.subscriptions,
            in_msgs: stats.in_msgs,
            out_msgs: stats.out_msgs,
            in_bytes: stats.in_bytes,
            out_bytes: stats.out_bytes,
            slow_consumers: stats.slow_consumers,
            stale_connections: stats.stale_connections,
            jetstream: state.jetstream.as_deref().map(jetstream_varz),
        }
    }
}

/// How many of the node's Raft groups (the meta group and every stream replica) are active
/// (heartbeating, with election timers), quiet (idle: no timer, no message; see
/// `consensus::pacer`) and waking (woken from quiet, not yet confirmed active).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RaftGroupsVarz {
    pub active: u64,
    pub quiet: u64,
    pub waking: u64,
}

impl RaftGroupsVarz {
    pub fn of(js: &JetStream) -> RaftGroupsVarz {
        let modes = js.group_modes();
        RaftGroupsVarz {
            active: modes.active as u64,
            quiet: modes.quiet as u64,
            waking: modes.waking as u64,
        }
    }
}

fn jetstream_varz(js: &JetStream) -> JetStreamVarz {
    let names = js.stream_names();
    let usage = js.store_usage();
    let log = js.log_stats();
    JetStreamVarz {
        streams: names.len() as u64,
        messages: usage.messages,
        bytes: usage.memory + usage.storage,
        memory: usage.memory,
        storage: usage.storage,
        jetraft_cache: CacheVarz::of(&usage),
        wal: WalVarz {
            appends: log.appends,
            writes: log.writes,
            batches: log.batches,
            fsyncs: log.fsyncs,
            bytes: log.bytes,
        },
        dropped: DroppedVarz {
            api_requests: js.api_dropped(),
            acks: js.delivery().acks_dropped(),
        },
        raft_groups: RaftGroupsVarz::of(js),
    }
}

pub async fn handler(State(state): State<Arc<MonitorState>>) -> Json<Varz> {
    Json(Varz::collect(&state))
}

/// `time` as nats-server's JSON shows a `time.Time`: RFC 3339 in UTC, trailing zeros of the
/// fraction trimmed (the JetStream API's own timestamp format).
pub(super) fn rfc3339(time: SystemTime) -> String {
    let nanos = time.duration_since(UNIX_EPOCH).map_or(0, |since| {
        i64::try_from(since.as_nanos()).unwrap_or(i64::MAX)
    });
    Timestamp::from_unix_nanos(nanos).to_string()
}

/// nats-server's uptime format: `1d2h3m4s`, leading zero units left out.
fn uptime(elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs();
    let (days, hours, minutes, seconds) = (
        secs / 86_400,
        secs % 86_400 / 3_600,
        secs % 3_600 / 60,
        secs % 60,
    );
    let mut out = String::new();
    if days > 0 {
        out.push_str(&format!("{days}d"));
    }
    if days > 0 || hours > 0 {
        out.push_str(&format!("{hours}h"));
    }
    if days > 0 || hours > 0 || minutes > 0 {
        out.push_str(&format!("{minutes}m"));
    }
    out.push_str(&format!("{seconds}s"));
    out
}

/// Resident set size from `/proc/self/statm` (Linux); 0 where unavailable.
pub fn resident_memory_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    pages * 4096
}

#[cfg(test)]
mod tests {
    use super::{rfc3339, uptime};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_are_shown_as_go_marshals_them() {
        let at = |secs, nanos| rfc3339(UNIX_EPOCH + Duration::new(secs, nanos));
        assert_eq!(at(1_700_000_000, 0), "2023-11-14T22:13:20Z");
        assert_eq!(at(1_700_000_000, 120_000_000), "2023-11-14T22:13:20.12Z");
        assert_eq!(
            at(1_700_000_000, 123_456_789),
            "2023-11-14T22:13:20.123456789Z"
        );
    }

    #[test]
    fn uptime_format_matches_nats_server() {
        assert_eq!(uptime(Duration::from_secs(5)), "5s");
        assert_eq!(uptime(Duration::from_secs(65)), "1m5s");
        assert_eq!(uptime(Duration::from_secs(3_600)), "1h0m0s");
        assert_eq!(uptime(Duration::from_secs(90_061)), "1d1h1m1s");
    }
}
