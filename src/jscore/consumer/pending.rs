//! The pending set of a consumer: messages delivered and not yet acknowledged, each with
//! its original consumer sequence, delivery count, and when it becomes due for redelivery,
//! plus the redelivery queue (pending entries ordered by due time).
//!
//! Replicated: entries change only while applying deliveries and acks, with times from the
//! commands; the due-time order is an index over the entries, rebuilt identically anywhere.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingEntry {
    /// Consumer sequence of the *first* delivery. The ack floor is expressed with it, as in
    /// nats-server, so redeliveries (which take new consumer sequences) do not move it.
    pub consumer_seq: u64,
    /// How many times the message has been delivered (1 on first delivery).
    pub deliveries: u64,
    pub last_delivered_nanos: i64,
    /// When the message is due for redelivery unless acknowledged first.
    pub redeliver_at_nanos: i64,
}

/// Pending entries by stream sequence, with a due-time index (the redelivery queue).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingSet {
    entries: BTreeMap<u64, PendingEntry>,
    by_due_time: BTreeSet<(i64, u64)>,
}

impl PendingSet {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn get(&self, stream_seq: u64) -> Option<&PendingEntry> {
        self.entries.get(&stream_seq)
    }

    pub fn contains(&self, stream_seq: u64) -> bool {
        self.entries.contains_key(&stream_seq)
    }

    /// Lowest pending stream sequence and its entry (what the ack floor sits below).
    pub fn lowest(&self) -> Option<(u64, &PendingEntry)> {
        self.entries
            .first_key_value()
            .map(|(seq, entry)| (*seq, entry))
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &PendingEntry)> {
        self.entries.iter().map(|(seq, entry)| (*seq, entry))
    }

    /// Entries with stream sequences in `range`, ascending.
    pub fn range(
        &self,
        range: impl std::ops::RangeBounds<u64>,
    ) -> impl Iterator<Item = (u64, &PendingEntry)> {
        self.entries.range(range).map(|(seq, entry)| (*seq, entry))
    }

    /// Pending stream sequences due at or before `now`, earliest due first (ties by
    /// sequence): the redelivery queue.
    pub fn due(&self, now_nanos: i64) -> impl Iterator<Item = u64> + '_ {
        self.by_due_time
            .iter()
            .take_while(move |(due, _)| *due <= now_nanos)
            .map(|(_, seq)| *seq)
    }

    /// Earliest due time of any pending message (for the leader's redelivery timer).
    pub fn next_due_at(&self) -> Option<i64> {
        self.by_due_time.first().map(|(due, _)| *due)
    }

    pub fn insert(&mut self, stream_seq: u64, entry: PendingEntry) {
        if let Some(old) = self.entries.insert(stream_seq, entry) {
            self.by_due_time
                .remove(&(old.redeliver_at_nanos, stream_seq));
        }
        self.by_due_time
            .insert((entry.redeliver_at_nanos, stream_seq));
    }

    pub fn remove(&mut self, stream_seq: u64) -> Option<PendingEntry> {
        let entry = self.entries.remove(&stream_seq)?;
        self.by_due_time
            .remove(&(entry.redeliver_at_nanos, stream_seq));
        Some(entry)
    }

    /// Moves a pending message's due time (NAK, +WPI, redelivery).
    pub fn reschedule(&mut self, stream_seq: u64, redeliver_at_nanos: i64) -> bool {
        match self.entries.get(&stream_seq).copied() {
            Some(entry) => {
                self.insert(
                    stream_seq,
                    PendingEntry {
                        redeliver_at_nanos,
                        ..entry
                    },
                );
                true
            }
            None => false,
        }
    }

    /// Removes every entry at or below `stream_seq`, returning their sequences.
    pub fn remove_up_to(&mut self, stream_seq: u64) -> Vec<u64> {
        let doomed: Vec<u64> = self.entries.range(..=stream_seq).map(|(s, _)| *s).collect();
        for seq in &doomed {
            self.remove(*seq);
        }
        doomed
    }

    /// Removes entries the predicate rejects, returning their sequences.
    pub fn retain(&mut self, keep: impl Fn(u64) -> bool) -> Vec<u64> {
        let doomed: Vec<u64> = self.entries.keys().copied().filter(|s| !keep(*s)).collect();
        for seq in &doomed {
            self.remove(*seq);
        }
        doomed
    }
}
