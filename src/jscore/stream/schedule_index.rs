//! `ScheduleIndex`: the stream's schedule messages by due time, so the leader's one timer
//! per stream (the expiry task) knows when the next is due and the `Expire` that fires them
//! finds them without a walk (ADR 0023). No bodies: a `(due, seq)` pair and its reverse
//! entry (with how it repeats) per live schedule message, under 100 bytes each.
//!
//! Exact, unlike the TTL index: a schedule leaves the index with its message (every removal
//! goes through `StreamState::remove_seq`, a full purge clears it), so memory is bounded by
//! the schedules stored. Replicated: built from the messages' header blocks and times as they
//! are applied, and again from the stored blocks when a replica loads. A repeating schedule's
//! due time after a firing is the first of its times after the stream's schedule clock (the
//! `now` of the last `Expire` that fired), so a reload that knows the clock finds the same
//! due times ([`catch_up`](ScheduleIndex::catch_up), ADR 0025).

use std::collections::{BTreeSet, HashMap};

use super::schedule::{schedule_pattern, Repeat};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleIndex {
    by_due: BTreeSet<(i64, u64)>,
    due_of: HashMap<u64, (i64, Option<Repeat>)>,
}

impl ScheduleIndex {
    /// Records message `seq`, stored at `stored_nanos`, if its header block makes it a
    /// schedule jetraft fires; a repeating one not before its first time after `clock`.
    pub fn insert(&mut self, seq: u64, stored_nanos: i64, headers: &[u8], clock: i64) {
        let Some((due, repeat)) = schedule_pattern(headers).and_then(|p| p.first(stored_nanos))
        else {
            return;
        };
        self.by_due.insert((due, seq));
        self.due_of.insert(seq, (due, repeat));
        self.catch_up_one(seq, clock);
    }

    /// Moves every repeating schedule due at or before `clock` to its first time after it:
    /// what the firings up to `clock` did (a loaded replica, whose index was built from the
    /// stored times alone).
    pub fn catch_up(&mut self, clock: i64) {
        let behind: Vec<u64> = self
            .by_due
            .iter()
            .take_while(|(due, _)| *due <= clock)
            .map(|(_, seq)| *seq)
            .collect();
        for seq in behind {
            self.catch_up_one(seq, clock);
        }
    }

    fn catch_up_one(&mut self, seq: u64, clock: i64) {
        let next = match self.due_of.get(&seq) {
            Some((due, Some(repeat))) if *due <= clock => repeat.next_after(clock),
            _ => return,
        };
        self.reschedule(seq, next);
    }

    /// How schedule `seq` repeats: `None` for a one-shot schedule or no schedule.
    pub fn repeat(&self, seq: u64) -> Option<Repeat> {
        self.due_of.get(&seq).and_then(|(_, repeat)| repeat.clone())
    }

    /// Repeating schedule `seq` fired: it is due next at `next`, or, with none (a cron
    /// pattern without a time in five years), no longer scheduled (its message stays, as
    /// in nats-server).
    pub fn reschedule(&mut self, seq: u64, next: Option<i64>) {
        let Some((due, repeat)) = self.due_of.remove(&seq) else {
            return;
        };
        self.by_due.remove(&(due, seq));
        if let Some(next) = next {
            self.by_due.insert((next, seq));
            self.due_of.insert(seq, (next, repeat));
        }
    }

    /// Message `seq` left the stream.
    pub fn forget(&mut self, seq: u64) {
        if let Some((due, _)) = self.due_of.remove(&seq) {
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
