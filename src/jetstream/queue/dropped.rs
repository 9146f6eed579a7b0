//! `Dropped`: what a bounded queue threw away, for `/varz` and the log. Warnings are
//! rate-limited (nats-server rate-limits its "limit reached, dropping" warning too): a queue
//! overflowing under load must not flood the log.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most one warning per `WARN_EVERY` for one counter.
const WARN_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Dropped {
    total: AtomicU64,
    /// Milliseconds since `epoch` of the last warning, plus one (0: never warned).
    last_warned: AtomicU64,
    epoch: Instant,
}

impl Default for Dropped {
    fn default() -> Self {
        Dropped {
            total: AtomicU64::new(0),
            last_warned: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }
}

impl Dropped {
    /// Counts `count` dropped items; true if the caller should warn now (the first drop, then
    /// at most once per second).
    pub fn record(&self, count: u64) -> bool {
        self.total.fetch_add(count, Ordering::Relaxed);
        let now = self.epoch.elapsed().as_millis() as u64 + 1;
        let last = self.last_warned.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < WARN_EVERY.as_millis() as u64 {
            return false;
        }
        self.last_warned
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Items dropped since start.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}
