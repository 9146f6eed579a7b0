//! `ScheduleIndex`: the stream's schedule messages by due time, so the leader's one timer
//! per stream (the expiry task) knows when the next is due and the `Expire` that fires them
//! finds them without a walk (ADR 0023). No bodies: a `(due, seq)` pair and its reverse
//! entry per live schedule message, about 50 bytes each.
//!
//! Exact, unlike the TTL index: a schedule leaves the index with its message (every removal
//! goes through `StreamState::remove_seq`, a full purge clears it), so memory is bounded by
//! the schedules stored. Replicated: built from the messages' header blocks as they are
//! applied and again from the stored blocks when a replica loads.

use std::collections::{BTreeSet, HashMap};

use super::schedule::schedule_due;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleIndex {
    by_due: BTreeSet<(i64, u64)>,
    due_of: HashMap<u64, i64>,
}

impl ScheduleIndex {
    /// Records message `seq` if its header block makes it a schedule jetraft fires.
    pub fn insert(&mut self, seq: u64, headers: &[u8]) {
        if let Some(due) = schedule_due(headers) {
            self.by_due.insert((due, seq));
            self.due_of.insert(seq, due);
        }
    }

    /// Message `seq` left the stream.
    pub fn forget(&mut self, seq: u64) {
        if let Some(due) = self.due_of.remove(&seq) {
            self.by_due.remove(&(due, seq));
        }
    }

    pub fn clear(&mut self) {
        *self = ScheduleIndex::default();
    }

    /// Whether message `seq` is a schedule.
    pub fn contains(&self, seq: u64) -> bool {
        self.due_of.contains_key(&seq)
    }

    /// The earliest due time.
    pub fn next_due(&self) -> Option<i64> {
        self.by_due.first().map(|(due, _)| *due)
    }

    /// The schedules due at `now_nanos` (due <= now), in sequence order (the order
    /// nats-server produces them in).
    pub fn due(&self, now_nanos: i64) -> Vec<u64> {
        let mut due: Vec<u64> = self
            .by_due
            .iter()
            .take_while(|(due, _)| *due <= now_nanos)
            .map(|(_, seq)| *seq)
            .collect();
        due.sort_unstable();
        due
    }
}
