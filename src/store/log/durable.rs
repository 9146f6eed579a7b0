//! [`DurableIndex`]: what the segment files hold, as far as segment life and checkpoints need
//! to know. Owned by the writer thread (built by recovery, then updated after every fsynced
//! batch), so unlike the memtable it never contains an op that is not yet on disk.
//!
//! Per group it keeps the meta values, the purge mark, the corruption mark, and the runs of
//! live entries per segment (one `Run` per segment the group appended to, not one per entry).
//! From that it answers the two questions that keep the disk bounded:
//! - which segments hold no live entry of any group (they can be deleted), and
//! - what must be re-written at the start of a new segment (the checkpoint: purge marks, meta
//!   values and corruption marks of every group) so that deleting old segments loses nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use bytes::Bytes;

use super::record::{self, FLAG_END_OF_WRITE, FLAG_START_OF_BATCH};
use super::types::{LogOp, MetaKey};

/// Entries `first..=last` of one group live in segment `segment`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    segment: u64,
    first: u64,
    last: u64,
}

#[derive(Debug, Default)]
struct DurableGroup {
    meta: BTreeMap<MetaKey, Bytes>,
    purged: Option<u64>,
    corrupt: bool,
    runs: VecDeque<Run>,
}

impl DurableGroup {
    fn is_vacant(&self) -> bool {
        self.meta.is_empty() && self.purged.is_none() && !self.corrupt && self.runs.is_empty()
    }

    fn needs_checkpoint(&self) -> bool {
        !self.meta.is_empty() || self.purged.is_some() || self.corrupt
    }
}

/// One per engine, owned by the writer thread.
#[derive(Debug, Default)]
pub(crate) struct DurableIndex {
    groups: HashMap<u64, DurableGroup>,
}

impl DurableIndex {
    /// Record that `op` is durable in segment `segment`.
    pub fn apply(&mut self, op: &LogOp, segment: u64) {
        let group = op.group();
        if let LogOp::DropGroup { .. } = op {
            self.groups.remove(&group);
            return;
        }
        let state = self.groups.entry(group).or_default();
        match op {
            LogOp::Append { index, .. } => match state.runs.back_mut() {
                Some(run) if run.segment == segment && run.last + 1 == *index => run.last = *index,
                _ => state.runs.push_back(Run {
                    segment,
                    first: *index,
                    last: *index,
                }),
            },
            LogOp::TruncateFrom { index, .. } => {
                while let Some(run) = state.runs.back_mut() {
                    if run.first >= *index {
                        state.runs.pop_back();
                    } else {
                        run.last = run.last.min(index - 1);
                        break;
                    }
                }
            }
            LogOp::PurgeUpTo { index, .. } => {
                while let Some(run) = state.runs.front_mut() {
                    if run.last <= *index {
                        state.runs.pop_front();
                    } else {
                        run.first = run.first.max(index + 1);
                        break;
                    }
                }
                state.purged = Some(state.purged.map_or(*index, |p| p.max(*index)));
            }
            LogOp::SetMeta { key, value, .. } => {
                state.meta.insert(*key, value.clone());
            }
            LogOp::DropGroup { .. } => unreachable!("handled above"),
        }
        if state.is_vacant() {
            self.groups.remove(&group);
        }
    }

    /// Record a corruption mark (from recovery, or replayed from a checkpoint).
    pub fn mark_corrupt(&mut self, group: u64) {
        self.groups.entry(group).or_default().corrupt = true;
    }

    /// Record that entry `index` of `group` was copied into `segment` by compaction.
    pub fn rewrite(&mut self, group: u64, index: u64, segment: u64) {
        let runs = &mut self.groups.entry(group).or_default().runs;
        let at = match runs
            .iter()
            .position(|run| run.first <= index && index <= run.last)
        {
            Some(at) => {
                let run = runs[at];
                if run.segment == segment {
                    return;
                }
                runs.remove(at);
                let mut at = at;
                if run.first < index {
                    runs.insert(
                        at,
                        Run {
                            last: index - 1,
                            ..run
                        },
                    );
                    at += 1;
                }
                if index < run.last {
                    runs.insert(
                        at,
                        Run {
                            first: index + 1,
                            ..run
                        },
                    );
                }
                at
            }
            // Missing (replay after the old segment was deleted): runs stay sorted by index.
            None => runs
                .iter()
                .position(|run| run.first > index)
                .unwrap_or(runs.len()),
        };
        runs.insert(
            at,
            Run {
                segment,
                first: index,
                last: index,
            },
        );
        // Merge with neighbours in the same segment.
        if at + 1 < runs.len() && runs[at + 1].segment == segment && runs[at + 1].first == index + 1
        {
            runs[at].last = runs[at + 1].last;
            runs.remove(at + 1);
        }
        if at > 0 && runs[at - 1].segment == segment && runs[at - 1].last + 1 == index {
            runs[at - 1].last = runs[at].last;
            runs.remove(at);
        }
    }

    /// The oldest segment that still holds a live entry, and a group with an entry there.
    pub fn oldest_live_segment(&self) -> Option<(u64, u64)> {
        self.groups
            .iter()
            .flat_map(|(group, state)| state.runs.iter().map(|run| (run.segment, *group)))
            .min()
    }

    /// Groups with a live entry in `segment`.
    pub fn groups_in(&self, segment: u64) -> Vec<u64> {
        let mut groups: Vec<u64> = self
            .groups
            .iter()
            .filter(|(_, state)| state.runs.iter().any(|run| run.segment == segment))
            .map(|(group, _)| *group)
            .collect();
        groups.sort_unstable();
        groups
    }

    /// Every segment holding a live entry, with the groups whose entries live there.
    pub fn groups_by_segment(&self) -> BTreeMap<u64, BTreeSet<u64>> {
        let mut segments: BTreeMap<u64, BTreeSet<u64>> = BTreeMap::new();
        for (group, state) in &self.groups {
            for run in &state.runs {
                segments.entry(run.segment).or_default().insert(*group);
            }
        }
        segments
    }

    /// Append the checkpoint records (one write unit) to `buf`: for every group with any,
    /// its purge mark, meta values and corruption mark. Replaying them on top of the state
    /// they describe changes nothing, so they are safe whether or not older segments still
    /// exist. Returns the number of records.
    pub fn encode_checkpoint(&self, buf: &mut Vec<u8>) -> usize {
        let mut ids: Vec<u64> = self
            .groups
            .iter()
            .filter(|(_, state)| state.needs_checkpoint())
            .map(|(group, _)| *group)
            .collect();
        ids.sort_unstable();
        let mut records = Vec::new();
        for group in ids {
            let state = &self.groups[&group];
            if let Some(index) = state.purged {
                records.push(Checkpoint::Op(LogOp::PurgeUpTo { group, index }));
            }
            for (key, value) in &state.meta {
                records.push(Checkpoint::Op(LogOp::SetMeta {
                    group,
                    key: *key,
                    value: value.clone(),
                }));
            }
            if state.corrupt {
                records.push(Checkpoint::Corrupt(group));
            }
        }
        let count = records.len();
        for (position, checkpoint) in records.into_iter().enumerate() {
            // Written with the segment header as one batch.
            let mut flags = 0;
            if position == 0 {
                flags |= FLAG_START_OF_BATCH;
            }
            if position + 1 == count {
                flags |= FLAG_END_OF_WRITE;
            }
            match checkpoint {
                Checkpoint::Op(op) => record::encode_op(buf, &op, flags),
                Checkpoint::Corrupt(group) => record::encode_corrupt_mark(buf, group, flags),
            }
        }
        count
    }
}

enum Checkpoint {
    Op(LogOp),
    Corrupt(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(group: u64, index: u64) -> LogOp {
        LogOp::Append {
            group,
            index,
            payload: Bytes::new(),
        }
    }

    #[test]
    fn oldest_live_segment_follows_purge_truncate_and_drop() {
        let mut index = DurableIndex::default();
        for i in 1..=4 {
            index.apply(&append(1, i), 10);
        }
        for i in 5..=8 {
            index.apply(&append(1, i), 11);
        }
        index.apply(&append(2, 1), 12);
        assert_eq!(index.oldest_live_segment(), Some((10, 1)));
        index.apply(&LogOp::PurgeUpTo { group: 1, index: 3 }, 12);
        assert_eq!(index.oldest_live_segment(), Some((10, 1)));
        index.apply(&LogOp::PurgeUpTo { group: 1, index: 4 }, 12);
        assert_eq!(index.oldest_live_segment(), Some((11, 1)));
        index.apply(&LogOp::TruncateFrom { group: 1, index: 5 }, 12);
        assert_eq!(index.oldest_live_segment(), Some((12, 2)));
        index.apply(&LogOp::DropGroup { group: 2 }, 12);
        assert_eq!(index.oldest_live_segment(), None);
        // Group 1 lives on through its purge mark, which the checkpoint carries.
        let mut buf = Vec::new();
        assert_eq!(index.encode_checkpoint(&mut buf), 1);
    }

    #[test]
    fn rewrites_move_entries_to_a_newer_segment() {
        let mut index = DurableIndex::default();
        for i in 1..=5 {
            index.apply(&append(1, i), 3);
        }
        for i in 6..=8 {
            index.apply(&append(1, i), 4);
        }
        // Compaction copies 1..=5 into segment 9, highest index first.
        for i in (1..=5).rev() {
            index.rewrite(1, i, 9);
        }
        assert_eq!(index.oldest_live_segment(), Some((4, 1)));
        assert_eq!(index.groups_in(9), vec![1]);
        assert!(index.groups_in(3).is_empty());
        // Replay after segment 3 was deleted: the copies arrive for missing entries.
        let mut replayed = DurableIndex::default();
        for i in 6..=8 {
            replayed.apply(&append(1, i), 4);
        }
        for i in (1..=5).rev() {
            replayed.rewrite(1, i, 9);
        }
        assert_eq!(replayed.groups_in(9), vec![1]);
        replayed.apply(&LogOp::PurgeUpTo { group: 1, index: 6 }, 10);
        assert_eq!(replayed.oldest_live_segment(), Some((4, 1)));
        // A rewrite in the middle of a run splits it.
        index.rewrite(1, 7, 9);
        let runs: Vec<Run> = index.groups[&1].runs.iter().copied().collect();
        let run = |segment, first, last| Run {
            segment,
            first,
            last,
        };
        assert_eq!(
            runs,
            vec![run(9, 1, 5), run(4, 6, 6), run(9, 7, 7), run(4, 8, 8)]
        );
    }
}
