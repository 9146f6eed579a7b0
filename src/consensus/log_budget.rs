//! The node's budget for unpurged log entries, which stay in memory until purged
//! (`store/log/entries.rs`). Each group compacts as its own log grows (`compactor.rs`:
//! [`LogGrowth`](super::compactor::LogGrowth)), but a thousand streams written at once each
//! stay under their own thresholds while together they hold tens of MB (78 MB at 1000 streams,
//! heaptrack; issue 16). Past [`LOG_BUDGET_BYTES`], the compactor compacts the biggest logs
//! first until what is left fits in half the budget: the decision is [`relief`], pure.

use super::types::GroupId;

/// Payload bytes of every group's unpurged entries above which the biggest logs are
/// compacted ahead of their own schedule. Compaction lags a publish over 1000 streams: the
/// entries stood at 37–55 MB at the peak of one of 10 GB under 32 MiB (heaptrack); 16 MiB
/// lowered that peak's RSS by 11 MB on one node, at the same publish rate (issue 16).
pub const LOG_BUDGET_BYTES: u64 = 16 << 20;
/// A log smaller than this is not compacted for the budget: a round (a snapshot and a purge)
/// would free too little for what it costs.
pub const LOG_BUDGET_MIN_GROUP_BYTES: u64 = 16 << 10;

/// The groups to compact now, biggest first, given the node's `resident` bytes, the `budget`
/// and the biggest logs (`largest`, most bytes first): none while `resident` fits the
/// budget; otherwise enough of the biggest to bring it down to half the budget, skipping
/// logs below [`LOG_BUDGET_MIN_GROUP_BYTES`].
pub fn relief(resident: u64, budget: u64, largest: &[(GroupId, u64)]) -> Vec<GroupId> {
    if resident <= budget {
        return Vec::new();
    }
    let mut left = resident;
    let mut chosen = Vec::new();
    for (group, bytes) in largest {
        if left <= budget / 2 || *bytes < LOG_BUDGET_MIN_GROUP_BYTES {
            break;
        }
        chosen.push(*group);
        left = left.saturating_sub(*bytes);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn nothing_while_the_logs_fit_the_budget() {
        assert!(relief(32 * MB, 32 * MB, &[(1, 20 * MB), (2, 12 * MB)]).is_empty());
    }

    #[test]
    fn the_biggest_logs_go_first_until_half_the_budget_is_left() {
        let largest = [(7, 20 * MB), (3, 10 * MB), (9, 8 * MB), (1, 4 * MB)];
        // 48 MB held: 20 + 10 leave 18, 8 more leave 10, below 16.
        assert_eq!(relief(48 * MB, 32 * MB, &largest), vec![7, 3, 9]);
        assert_eq!(relief(40 * MB, 32 * MB, &largest), vec![7, 3]);
    }

    #[test]
    fn many_small_logs_are_taken_down_to_the_smallest_worth_a_round() {
        let mut largest: Vec<(GroupId, u64)> = (0..1000).map(|g| (g, 60 << 10)).collect();
        largest.extend((1000..1100).map(|g| (g, 8 << 10)));
        let resident = largest.iter().map(|(_, bytes)| bytes).sum();
        let chosen = relief(resident, 32 * MB, &largest);
        // 60 KiB each until 16 MB are left: 741 of the 1000 (59.4 MB - 741 x 60 KiB < 16 MB).
        assert_eq!(chosen.len(), 741);
        assert!(chosen.iter().all(|group| *group < 1000));
        // Only logs too small to be worth it left: nothing more to do.
        assert!(relief(40 * MB, 32 * MB, &[(1, 8 << 10), (2, 4 << 10)]).is_empty());
    }
}
