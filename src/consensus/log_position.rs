//! A group's log as openraft's metrics report it ([`LogPosition`]), and the compactor's
//! pure decisions on it (`compactor.rs`): where to purge to, and whether a settling group
//! applied nothing since the last look.

use super::types::{NodeId, Raft};

/// A group's log as openraft's metrics report it.
pub(super) struct LogPosition {
    pub applied: Option<u64>,
    pub snapshot: Option<u64>,
    pub purged: Option<u64>,
    /// The followers' matched index, when this replica leads.
    pub followers: Vec<Option<u64>>,
}

/// Whether a settling group may compact: it applied nothing since the last look (`seen`,
/// `None` before the first), [`SETTLE_DELAY`](super::compactor::SETTLE_DELAY) ago.
pub(super) fn settled(seen: Option<u64>, applied: u64) -> bool {
    seen == Some(applied)
}

/// How many entries the group had applied (its applied index + 1; 0 before any).
pub(super) fn applied_count(at: &LogPosition) -> u64 {
    at.applied.map_or(0, |index| index + 1)
}

pub(super) fn position(raft: &Raft, node: NodeId) -> LogPosition {
    let metrics = raft.metrics();
    let metrics = metrics.borrow();
    LogPosition {
        applied: metrics.last_applied.map(|id| id.index),
        snapshot: metrics.snapshot.map(|id| id.index),
        purged: metrics.purged.map(|id| id.index),
        followers: metrics
            .replication
            .iter()
            .flatten()
            .filter(|(id, _)| **id != node)
            .map(|(_, matched)| matched.map(|id| id.index))
            .collect(),
    }
}

/// Where to purge to: the snapshot, or the oldest follower's matched index if it lags by at
/// most `keep` entries behind the snapshot.
pub(super) fn purge_target(position: &LogPosition, keep: u64) -> Option<u64> {
    let snapshot = position.snapshot?;
    let needed = position
        .followers
        .iter()
        .map(|matched| matched.map_or(0, |index| index + 1))
        .filter(|next| snapshot.saturating_sub(*next) < keep)
        .min();
    match needed {
        Some(0) => None,
        Some(next) => Some((next - 1).min(snapshot)),
        None => Some(snapshot),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(snapshot: Option<u64>, followers: Vec<Option<u64>>) -> LogPosition {
        LogPosition {
            applied: snapshot,
            snapshot,
            purged: None,
            followers,
        }
    }

    #[test]
    fn a_settling_group_compacts_once_a_look_finds_it_applied_nothing_since_the_last() {
        assert!(!settled(None, 7), "the first look only notes where it is");
        assert!(!settled(Some(7), 9), "it applied since: look again later");
        assert!(settled(Some(9), 9));
        assert_eq!(applied_count(&at(None, vec![])), 0);
        assert_eq!(applied_count(&at(Some(4), vec![])), 5);
    }

    #[test]
    fn purge_keeps_what_a_near_follower_needs_only() {
        assert_eq!(purge_target(&at(None, vec![]), 100), None);
        assert_eq!(purge_target(&at(Some(500), vec![]), 100), Some(500));
        // Caught up: the snapshot.
        assert_eq!(
            purge_target(&at(Some(500), vec![Some(500)]), 100),
            Some(500)
        );
        // 50 behind: keep what it still needs.
        assert_eq!(
            purge_target(&at(Some(500), vec![Some(450)]), 100),
            Some(450)
        );
        // Far behind: it gets a snapshot; the other follower's needs count.
        assert_eq!(
            purge_target(&at(Some(500), vec![Some(10), Some(480)]), 100),
            Some(480)
        );
        // A follower that matched nothing yet and is near the start keeps everything.
        assert_eq!(purge_target(&at(Some(50), vec![None]), 100), None);
    }
}
