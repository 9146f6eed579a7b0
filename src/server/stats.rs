//! Node-wide traffic counters, shared by every client session and read by the monitor.
//!
//! One `ServerStats` per node (inside `ServerShared`). Counters are relaxed atomics: they are
//! statistics, never used to make decisions.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

#[derive(Debug)]
pub struct ServerStats {
    pub started: SystemTime,
    pub connections: AtomicU64,
    pub total_connections: AtomicU64,
    pub subscriptions: AtomicU64,
    pub in_msgs: AtomicU64,
    pub in_bytes: AtomicU64,
    pub out_msgs: AtomicU64,
    pub out_bytes: AtomicU64,
    pub slow_consumers: AtomicU64,
    pub stale_connections: AtomicU64,
}

/// A point-in-time copy of [`ServerStats`], what `/varz` and `/metrics` render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub connections: u64,
    pub total_connections: u64,
    pub subscriptions: u64,
    pub in_msgs: u64,
    pub in_bytes: u64,
    pub out_msgs: u64,
    pub out_bytes: u64,
    pub slow_consumers: u64,
    pub stale_connections: u64,
}

impl Default for ServerStats {
    fn default() -> Self {
        ServerStats {
            started: SystemTime::now(),
            connections: AtomicU64::new(0),
            total_connections: AtomicU64::new(0),
            subscriptions: AtomicU64::new(0),
            in_msgs: AtomicU64::new(0),
            in_bytes: AtomicU64::new(0),
            out_msgs: AtomicU64::new(0),
            out_bytes: AtomicU64::new(0),
            slow_consumers: AtomicU64::new(0),
            stale_connections: AtomicU64::new(0),
        }
    }
}

impl ServerStats {
    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            connections: get(&self.connections),
            total_connections: get(&self.total_connections),
            subscriptions: get(&self.subscriptions),
            in_msgs: get(&self.in_msgs),
            in_bytes: get(&self.in_bytes),
            out_msgs: get(&self.out_msgs),
            out_bytes: get(&self.out_bytes),
            slow_consumers: get(&self.slow_consumers),
            stale_connections: get(&self.stale_connections),
        }
    }

    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
