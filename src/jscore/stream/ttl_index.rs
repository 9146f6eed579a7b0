//! `TtlIndex`: the stream's messages that carry a `Nats-TTL`, ordered by when they expire,
//! so expiry finds what is due without a timer per message and without walking the stream
//! (ADR 0019). Beside it, the two small sets the expiry rules need: messages marked
//! `never` (which `max_age` must skip) and tombstones (delete markers and key-value purges,
//! whose expiry leaves no new marker).
//!
//! Costs: one `(deadline, seq)` pair (16 bytes, about 20 with the B-tree's nodes) per
//! message with a TTL, nothing for the others. A message removed before its deadline
//! (a purge by subject, a limit, a delete) leaves its pair behind until the deadline comes:
//! `forget` would need the deadline, which the 16-byte message metadata has no room for.
//! Such a stale pair is dropped by the expiry that reaches it (sequences are never reused,
//! so it can never name another message); memory is thus bounded by the TTL'd messages
//! stored within the last TTL, removed or not. A full purge clears the index outright.
//!
//! Replicated: built from the messages' header blocks as they are applied (and again from
//! the stored blocks when a replica loads), read and pruned only while applying `Expire`.
//! Stale pairs differ between a replica that reloaded and one that did not; they are never
//! observable (expiry skips them), and equality compares live entries only.

use std::collections::{BTreeMap, BTreeSet};

use super::ttl::{is_tombstone, msg_ttl, MsgTtl};

#[derive(Debug, Clone, Default)]
pub struct TtlIndex {
    /// `(ts + ttl, seq)`, in expiry order: each message's own deadline, as its header says.
    deadlines: BTreeSet<(i64, u64)>,
    /// Entries whose deadline the stream raised when it came (a marker stream keeps a
    /// message at least the marker TTL): `(raised deadline, seq)` → own deadline. Moved back
    /// to `deadlines` by every config update ([`lower_all`](Self::lower_all)), so a
    /// replica that reloaded (which only knows own deadlines) and one that did not always
    /// reach the same verdicts.
    raised: BTreeMap<(i64, u64), i64>,
    /// Messages with `Nats-TTL: never`.
    never: BTreeSet<u64>,
    /// Delete markers and key-value purge tombstones.
    tombstones: BTreeSet<u64>,
}

impl TtlIndex {
    /// Records message `seq`, stored at `ts_nanos` with `headers`. An invalid TTL was
    /// refused before the proposal (a copy from another stream is stored as it came) and
    /// means no TTL here, as in nats-server's store.
    pub fn insert(&mut self, seq: u64, ts_nanos: i64, headers: &[u8]) {
        match msg_ttl(headers) {
            Ok(MsgTtl::Seconds(seconds)) => {
                let ttl_nanos = i64::try_from(seconds)
                    .ok()
                    .and_then(|s| s.checked_mul(1_000_000_000))
                    .unwrap_or(i64::MAX);
                self.deadlines
                    .insert((ts_nanos.saturating_add(ttl_nanos), seq));
            }
            Ok(MsgTtl::Never) => {
                self.never.insert(seq);
            }
            Ok(MsgTtl::None) | Err(_) => {}
        }
        if is_tombstone(headers) {
            self.tombstones.insert(seq);
        }
    }

    /// Message `seq` left the stream (its deadline pair, if any, stays until due).
    pub fn forget(&mut self, seq: u64) {
        self.never.remove(&seq);
        self.tombstones.remove(&seq);
    }

    pub fn clear(&mut self) {
        *self = TtlIndex::default();
    }

    pub fn is_never(&self, seq: u64) -> bool {
        self.never.contains(&seq)
    }

    pub fn is_tombstone(&self, seq: u64) -> bool {
        self.tombstones.contains(&seq)
    }

    pub fn has_never(&self) -> bool {
        !self.never.is_empty()
    }

    /// The earliest deadline (possibly of a message already gone).
    pub fn next_deadline(&self) -> Option<i64> {
        let own = self.deadlines.first().map(|(deadline, _)| *deadline);
        let raised = self.raised.keys().next().map(|(deadline, _)| *deadline);
        match (own, raised) {
            (Some(own), Some(raised)) => Some(own.min(raised)),
            (own, raised) => own.or(raised),
        }
    }

    /// Takes every entry due at `now_nanos` (deadline <= now): `(seq, own deadline)`, in
    /// sequence order; the caller removes those still stored, or [`raise`](Self::raise)s
    /// them.
    pub fn take_due(&mut self, now_nanos: i64) -> Vec<(u64, i64)> {
        let mut due = Vec::new();
        while let Some(&(deadline, seq)) = self.deadlines.first() {
            if deadline > now_nanos {
                break;
            }
            self.deadlines.pop_first();
            due.push((seq, deadline));
        }
        while let Some((&(deadline, seq), &own)) = self.raised.first_key_value() {
            if deadline > now_nanos {
                break;
            }
            self.raised.pop_first();
            due.push((seq, own));
        }
        due.sort_unstable();
        due
    }

    /// Puts back an entry taken by [`take_due`](Self::take_due) that the stream keeps
    /// until `deadline`.
    pub fn raise(&mut self, seq: u64, own_deadline: i64, deadline: i64) {
        self.raised.insert((deadline, seq), own_deadline);
    }

    /// Every raised entry back at its own deadline (a config update may change the rule).
    pub fn lower_all(&mut self) {
        for ((_, seq), own) in std::mem::take(&mut self.raised) {
            self.deadlines.insert((own, seq));
        }
    }

    /// The live entries (those `stored` says are still in the stream), for equality.
    pub fn live(&self, stored: impl Fn(u64) -> bool) -> LiveEntries {
        let raised = self.raised.iter().map(|((_, seq), own)| (*own, *seq));
        let mut deadlines: Vec<(i64, u64)> = self
            .deadlines
            .iter()
            .copied()
            .chain(raised)
            .filter(|(_, seq)| stored(*seq))
            .collect();
        deadlines.sort_unstable();
        LiveEntries {
            deadlines,
            never: self.never.iter().copied().collect(),
            tombstones: self.tombstones.iter().copied().collect(),
        }
    }
}

/// A comparable snapshot of an index's live entries (`TtlIndex::live`).
#[derive(Debug, PartialEq, Eq)]
pub struct LiveEntries {
    deadlines: Vec<(i64, u64)>,
    never: Vec<u64>,
    tombstones: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn headers(value: &str) -> Vec<u8> {
        format!("NATS/1.0\r\nNats-TTL: {value}\r\n\r\n").into_bytes()
    }

    #[test]
    fn due_entries_come_out_in_deadline_order() {
        let mut index = TtlIndex::default();
        index.insert(1, 0, &headers("10"));
        index.insert(2, S, &headers("2s"));
        index.insert(3, 0, &headers("never"));
        index.insert(4, 0, b"NATS/1.0\r\nOther: x\r\n\r\n");
        assert_eq!(index.next_deadline(), Some(3 * S));
        assert!(index.take_due(3 * S - 1).is_empty());
        assert_eq!(index.take_due(3 * S), vec![(2, 3 * S)]);
        assert_eq!(index.next_deadline(), Some(10 * S));
        assert_eq!(index.take_due(i64::MAX), vec![(1, 10 * S)]);
        assert_eq!(index.next_deadline(), None);
        assert!(index.is_never(3));
        index.forget(3);
        assert!(!index.has_never());
    }

    #[test]
    fn a_removed_message_leaves_its_pair_until_due() {
        let mut index = TtlIndex::default();
        index.insert(7, 0, &headers("5"));
        index.forget(7);
        assert_eq!(index.live(|_| false), TtlIndex::default().live(|_| false));
        assert_eq!(index.take_due(5 * S), vec![(7, 5 * S)]);
        index.insert(8, 0, &headers("5"));
        index.clear();
        assert_eq!(index.next_deadline(), None);
    }

    #[test]
    fn tombstones_are_tracked() {
        let mut index = TtlIndex::default();
        index.insert(1, 0, &super::super::ttl::marker_headers(60));
        index.insert(2, 0, b"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n");
        assert!(index.is_tombstone(1) && index.is_tombstone(2));
        assert_eq!(index.take_due(60 * S), vec![(1, 60 * S)]);
    }

    #[test]
    fn raised_entries_come_due_later_and_go_back_on_lower_all() {
        let mut index = TtlIndex::default();
        index.insert(1, 0, &headers("1"));
        assert_eq!(index.take_due(S), vec![(1, S)]);
        index.raise(1, S, 5 * S);
        assert_eq!(index.next_deadline(), Some(5 * S));
        let live = index.live(|_| true);
        index.lower_all();
        assert_eq!(index.live(|_| true), live);
        assert_eq!(index.next_deadline(), Some(S));
        index.raise(2, S, 4 * S);
        assert_eq!(index.take_due(4 * S), vec![(1, S), (2, S)]);
    }
}
