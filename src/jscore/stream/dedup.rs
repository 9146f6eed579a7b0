//! The duplicate window: `Nats-Msg-Id`s seen in the last `duplicate_window` and the
//! sequence each was stored at, so a retried publish gets the original sequence back
//! (`"duplicate": true`) instead of being stored twice.
//!
//! Replicated: ids are recorded and expired only while applying commands, using the
//! command's timestamp, so every replica holds the same window.

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DedupEntry {
    seq: u64,
    ts_nanos: i64,
}

/// Message ids within the window, oldest first for cheap expiry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DedupWindow {
    by_id: HashMap<String, DedupEntry>,
    by_age: VecDeque<(i64, String)>,
}

impl DedupWindow {
    /// Forgets ids recorded `window_nanos` or longer before `now_nanos` (nats-server drops an
    /// entry once `now - ts >= window`). Timestamps come from successive leaders and may step
    /// back slightly after a failover; an entry then just lives a little longer, identically
    /// on every replica.
    pub fn expire(&mut self, now_nanos: i64, window_nanos: i64) {
        while let Some((ts, _)) = self.by_age.front() {
            if now_nanos.saturating_sub(*ts) < window_nanos {
                break;
            }
            let (ts, id) = self.by_age.pop_front().expect("front exists");
            // The id may have been recorded again later; only drop the entry this was for.
            if self
                .by_id
                .get(&id)
                .is_some_and(|entry| entry.ts_nanos == ts)
            {
                self.by_id.remove(&id);
            }
        }
    }

    /// The sequence the id was stored at, if it is still within the window.
    pub fn lookup(&self, msg_id: &str) -> Option<u64> {
        self.by_id.get(msg_id).map(|entry| entry.seq)
    }

    /// As [`lookup`](Self::lookup) after an `expire(now_nanos, window_nanos)`, without
    /// expiring: for checks that must not change the state (an atomic batch's pre-check).
    pub fn lookup_at(&self, msg_id: &str, now_nanos: i64, window_nanos: i64) -> Option<u64> {
        self.by_id
            .get(msg_id)
            .filter(|entry| now_nanos.saturating_sub(entry.ts_nanos) < window_nanos)
            .map(|entry| entry.seq)
    }

    pub fn record(&mut self, msg_id: &str, seq: u64, ts_nanos: i64) {
        self.by_id
            .insert(msg_id.to_string(), DedupEntry { seq, ts_nanos });
        self.by_age.push_back((ts_nanos, msg_id.to_string()));
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// The window's entries in recording order (oldest first), for persisting it: each
    /// recorded id with its time, and its sequence while the id is still looked up through
    /// this entry (`None` only for an entry whose id was recorded again later).
    pub fn entries(&self) -> impl DoubleEndedIterator<Item = (i64, &str, Option<u64>)> + '_ {
        self.by_age.iter().map(|(ts, id)| {
            let seq = self
                .by_id
                .get(id)
                .filter(|entry| entry.ts_nanos == *ts)
                .map(|entry| entry.seq);
            (*ts, id.as_str(), seq)
        })
    }

    /// Number of entries (`entries().count()`; may exceed `len()` by ids recorded twice).
    pub fn entry_count(&self) -> usize {
        self.by_age.len()
    }

    /// Appends an entry exported by `entries`: replaying all of them in order rebuilds the
    /// window exactly.
    pub fn restore_entry(&mut self, ts_nanos: i64, msg_id: &str, seq: Option<u64>) {
        match seq {
            Some(seq) => self.record(msg_id, seq, ts_nanos),
            None => self.by_age.push_back((ts_nanos, msg_id.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_expire_after_the_window() {
        let mut window = DedupWindow::default();
        window.record("a", 1, 100);
        window.record("b", 2, 150);
        window.expire(199, 100);
        assert_eq!(window.lookup("a"), Some(1));
        window.expire(200, 100);
        assert_eq!(window.lookup("a"), None);
        assert_eq!(window.lookup("b"), Some(2));
        assert_eq!(window.len(), 1);
    }

    #[test]
    fn entries_replayed_in_order_rebuild_the_window() {
        let mut window = DedupWindow::default();
        window.record("a", 1, 100);
        window.record("b", 2, 150);
        // Recording an id again while its old entry is queued leaves a stale entry.
        window.record("a", 5, 180);
        let rebuild = |window: &DedupWindow| {
            let mut rebuilt = DedupWindow::default();
            for (ts, id, seq) in window.entries() {
                rebuilt.restore_entry(ts, id, seq);
            }
            rebuilt
        };
        assert_eq!(window.entry_count(), 3);
        assert_eq!(rebuild(&window), window);
        window.expire(160, 50);
        assert_eq!(window.entry_count(), 2);
        assert_eq!(rebuild(&window), window);
    }

    #[test]
    fn re_recorded_id_survives_expiry_of_its_old_entry() {
        let mut window = DedupWindow::default();
        window.record("a", 1, 100);
        window.record("a", 5, 180);
        window.expire(200, 100);
        assert_eq!(window.lookup("a"), Some(5));
    }
}
