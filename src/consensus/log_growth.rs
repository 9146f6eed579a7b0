//! What one group's state machine counts of its log between snapshots, and when that makes
//! it ask the compactor (`compactor.rs`) for a round: [`LogGrowth`], pure.

/// Why a group asks to be compacted, least urgent first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    /// A little was applied since the last snapshot: compact once the group has applied
    /// nothing for [`SETTLE_DELAY`](super::compactor::SETTLE_DELAY). A thousand groups each
    /// left with a few KB of entries held them in memory until their next burst (16.7 MB of
    /// entries after restarting 1000 streams, heaptrack), and each its open metadata tail.
    Settle,
    /// Something was applied since the last snapshot: compact once the group has been left
    /// alone for a while ([`IDLE_DELAY`](super::compactor::IDLE_DELAY)).
    Idle,
    /// The log grew by [`GROW_BYTES`] since the last snapshot.
    Grew,
    /// State was removed: the log holds what sled no longer does, and sled's space should
    /// come back.
    Removed,
}

/// Applied bytes since the last snapshot below which a group is left as it is: purging a
/// few small entries frees nothing worth a WAL write (and its fsync); the WAL's own
/// compaction copies such logs forward. A new stream's create and leader entries stay below.
pub const SETTLE_MIN_BYTES: u64 = 4 << 10;
/// Applied bytes since the last snapshot from which a group compacts after
/// [`IDLE_DELAY`](super::compactor::IDLE_DELAY) whether or not it is still busy.
pub const IDLE_MIN_BYTES: u64 = 64 << 10;
/// Applied bytes since the last snapshot that make a group compact soon.
pub const GROW_BYTES: u64 = 8 << 20;
/// Removed sled keys since the last snapshot that make a group compact soon (stream messages
/// live in 64 KiB blocks: a few blocks are worth it, a consumer's ack state is not).
pub const REMOVED_KEYS: u64 = 4;

/// What one group's state machine counts between snapshots, and the request it makes. Owned
/// by the state machine; reset when a snapshot is taken.
#[derive(Debug, Default)]
pub struct LogGrowth {
    bytes: u64,
    removed_keys: u64,
    asked: Option<Reason>,
}

impl LogGrowth {
    /// Count one apply call; returns the request to make, if it is new or more urgent than
    /// the last one since the snapshot.
    pub fn applied(&mut self, bytes: u64, removed_keys: u64) -> Option<Reason> {
        self.bytes += bytes;
        self.removed_keys += removed_keys;
        let reason = if self.removed_keys >= REMOVED_KEYS {
            Reason::Removed
        } else if self.bytes >= GROW_BYTES {
            Reason::Grew
        } else if self.bytes >= IDLE_MIN_BYTES {
            Reason::Idle
        } else if self.bytes >= SETTLE_MIN_BYTES {
            Reason::Settle
        } else {
            return None;
        };
        if self.asked.is_some_and(|asked| asked >= reason) {
            return None;
        }
        self.asked = Some(reason);
        Some(reason)
    }

    /// A snapshot was taken: the log behind it may go.
    pub fn snapshot_taken(&mut self) {
        *self = LogGrowth::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_asks_once_per_reason_until_a_snapshot() {
        let mut growth = LogGrowth::default();
        assert_eq!(
            growth.applied(100, 0),
            None,
            "too little to be worth a purge"
        );
        assert_eq!(growth.applied(SETTLE_MIN_BYTES, 0), Some(Reason::Settle));
        assert_eq!(growth.applied(100, 0), None, "already asked");
        assert_eq!(growth.applied(IDLE_MIN_BYTES, 0), Some(Reason::Idle));
        assert_eq!(growth.applied(100, 0), None, "already asked");
        assert_eq!(growth.applied(GROW_BYTES, 0), Some(Reason::Grew));
        assert_eq!(growth.applied(0, REMOVED_KEYS), Some(Reason::Removed));
        assert_eq!(growth.applied(GROW_BYTES, 0), None);
        growth.snapshot_taken();
        assert_eq!(growth.applied(IDLE_MIN_BYTES, 0), Some(Reason::Idle));
    }
}
