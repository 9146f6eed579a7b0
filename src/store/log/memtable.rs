//! The in-memory image of every group's log: all unpurged entries, the purge mark, meta values
//! and the corruption mark. One [`Tables`] per engine, behind the engine's `RwLock`; reads are
//! served from here, never from disk.
//!
//! Ops are applied here when they are *submitted* (validated first, so a bad op never reaches
//! the disk), because openraft requires appended entries to be readable as soon as `append`
//! returns, before they are durable. Each applied op leaves an [`Undo`]; the writer keeps it
//! until the op is durable and uses it to roll the tables back if the write fails.
//!
//! Memory trade-off: every unpurged entry stays in memory (a `Bytes` in a `VecDeque` per
//! group, ~32 bytes of overhead per entry plus the payload). That is simple and makes reads
//! allocation-free slices, but it means the node's memory bounds the unpurged log: the
//! consensus layer must purge after each snapshot (openraft does with its snapshot policy).

use std::collections::{BTreeMap, HashMap};
use std::ops::{Bound, RangeBounds};

use bytes::Bytes;

use super::entries::{Entries, Resident};
use super::error::LogError;
use super::record::{MAX_PAYLOAD, RECORD_HEADER_LEN};
use super::types::{LogOp, MetaKey};

/// The highest index an entry or a purge mark may have: far beyond any real log (2^63 - 1
/// entries), and low enough that the index after it never overflows, even in a record that
/// recovery reads from a damaged or forged segment.
pub(crate) const MAX_INDEX: u64 = u64::MAX >> 1;

/// The log of one Raft group, in memory.
#[derive(Debug)]
pub(crate) struct GroupLog {
    /// Index of `entries[0]`; meaningless while `entries` is empty.
    first: u64,
    entries: Entries,
    /// Entries `..=purged` were purged.
    purged: Option<u64>,
    meta: BTreeMap<MetaKey, Bytes>,
    corrupt: bool,
}

impl GroupLog {
    fn new(resident: Resident) -> GroupLog {
        GroupLog {
            first: 0,
            entries: Entries::new(resident),
            purged: None,
            meta: BTreeMap::new(),
            corrupt: false,
        }
    }

    fn last(&self) -> Option<u64> {
        (!self.entries.is_empty()).then(|| self.first + self.entries.len() as u64 - 1)
    }

    /// The index the next `Append` must have, if constrained.
    fn next_index(&self) -> Option<u64> {
        self.last().or(self.purged).map(|index| index + 1)
    }

    /// A group with nothing in it does not exist.
    fn is_vacant(&self) -> bool {
        self.entries.is_empty() && self.purged.is_none() && self.meta.is_empty() && !self.corrupt
    }

    fn push(&mut self, index: u64, payload: Bytes) {
        if self.entries.is_empty() {
            self.first = index;
        }
        self.entries.push_back(payload);
    }

    /// Remove entries `index..`; returns the index of the first removed entry and them.
    fn truncate_from(&mut self, index: u64) -> (u64, Vec<Bytes>) {
        let keep = index
            .saturating_sub(self.first)
            .min(self.entries.len() as u64) as usize;
        let removed = self.entries.drain_from(keep);
        (self.first + keep as u64, removed)
    }

    /// Remove entries `..=index` and raise the purge mark; returns the first removed index,
    /// the removed entries and the previous purge mark.
    fn purge_up_to(&mut self, index: u64) -> (u64, Vec<Bytes>, Option<u64>) {
        let previous = self.purged;
        let first = self.first;
        let count = if self.entries.is_empty() || index < self.first {
            0
        } else {
            ((index - self.first + 1) as usize).min(self.entries.len())
        };
        let removed = self.entries.drain_front(count);
        self.first += count as u64;
        self.purged = Some(previous.map_or(index, |p| p.max(index)));
        (first, removed, previous)
    }
}

/// How to take back one applied op. Applied in reverse order of the ops.
#[derive(Debug)]
pub(crate) enum Undo {
    /// Remove the last entry (an `Append`).
    PopEntry { group: u64 },
    /// Put back entries removed from the end, the first of them at `first`.
    RestoreTail {
        group: u64,
        first: u64,
        entries: Vec<Bytes>,
    },
    /// Put back entries removed from the front and the previous purge mark.
    RestoreHead {
        group: u64,
        first: u64,
        entries: Vec<Bytes>,
        purged: Option<u64>,
    },
    RestoreMeta {
        group: u64,
        key: MetaKey,
        previous: Option<Bytes>,
    },
    RestoreGroup {
        group: u64,
        previous: Option<Box<GroupLog>>,
    },
}

/// All groups of the node. Lives in the engine's shared state behind a `RwLock`.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    groups: HashMap<u64, GroupLog>,
    /// Payload bytes of every group's entries together.
    resident: Resident,
}

impl Tables {
    /// Validate and apply `ops` in order. All or nothing: on the first invalid op everything
    /// applied so far is undone and the error returned.
    pub fn apply_submitted(&mut self, ops: &[LogOp]) -> Result<Vec<Undo>, LogError> {
        let mut undo = Vec::with_capacity(ops.len());
        for op in ops {
            match self.validate(op) {
                Ok(()) => undo.push(self.apply(op)),
                Err(error) => {
                    self.undo(undo);
                    return Err(error);
                }
            }
        }
        Ok(undo)
    }

    fn validate(&self, op: &LogOp) -> Result<(), LogError> {
        let group = op.group();
        let log = self.groups.get(&group);
        if log.is_some_and(|log| log.corrupt) && !matches!(op, LogOp::DropGroup { .. }) {
            return Err(LogError::GroupCorrupt { group });
        }
        match op {
            LogOp::Append { index, .. } | LogOp::PurgeUpTo { index, .. } if *index > MAX_INDEX => {
                Err(LogError::IndexTooLarge {
                    group,
                    index: *index,
                })
            }
            LogOp::Append { index, payload, .. } => {
                check_payload(payload)?;
                match log.and_then(GroupLog::next_index) {
                    Some(expected) if expected != *index => Err(LogError::NonContiguous {
                        group,
                        expected,
                        got: *index,
                    }),
                    _ => Ok(()),
                }
            }
            LogOp::TruncateFrom { index, .. } => match log.and_then(|log| log.purged) {
                Some(purged) if *index <= purged => Err(LogError::TruncatePurged {
                    group,
                    index: *index,
                    purged,
                }),
                _ => Ok(()),
            },
            LogOp::SetMeta { value, .. } => check_payload(value),
            LogOp::PurgeUpTo { .. } | LogOp::DropGroup { .. } => Ok(()),
        }
    }

    /// Apply one op without validation; returns how to undo it.
    fn apply(&mut self, op: &LogOp) -> Undo {
        let group = op.group();
        let undo = match op {
            LogOp::DropGroup { .. } => {
                let previous = self.groups.remove(&group).map(Box::new);
                return Undo::RestoreGroup { group, previous };
            }
            LogOp::Append { index, payload, .. } => {
                self.group_mut(group).push(*index, payload.clone());
                Undo::PopEntry { group }
            }
            LogOp::TruncateFrom { index, .. } => {
                let (first, entries) = self.group_mut(group).truncate_from(*index);
                Undo::RestoreTail {
                    group,
                    first,
                    entries,
                }
            }
            LogOp::PurgeUpTo { index, .. } => {
                let (first, entries, purged) = self.group_mut(group).purge_up_to(*index);
                Undo::RestoreHead {
                    group,
                    first,
                    entries,
                    purged,
                }
            }
            LogOp::SetMeta { key, value, .. } => {
                let previous = self.group_mut(group).meta.insert(*key, value.clone());
                Undo::RestoreMeta {
                    group,
                    key: *key,
                    previous,
                }
            }
        };
        self.remove_if_vacant(group);
        undo
    }

    /// Take back applied ops, given their undo records in application order.
    pub fn undo(&mut self, undo: Vec<Undo>) {
        for step in undo.into_iter().rev() {
            let group = match step {
                Undo::PopEntry { group } => {
                    self.group_mut(group).entries.pop_back();
                    group
                }
                Undo::RestoreTail {
                    group,
                    first,
                    entries,
                } => {
                    let log = self.group_mut(group);
                    if log.entries.is_empty() {
                        log.first = first;
                    }
                    log.entries.extend(entries);
                    group
                }
                Undo::RestoreHead {
                    group,
                    first,
                    entries,
                    purged,
                } => {
                    let log = self.group_mut(group);
                    for entry in entries.into_iter().rev() {
                        log.entries.push_front(entry);
                    }
                    log.first = first;
                    log.purged = purged;
                    group
                }
                Undo::RestoreMeta {
                    group,
                    key,
                    previous,
                } => {
                    let log = self.group_mut(group);
                    match previous {
                        Some(value) => log.meta.insert(key, value),
                        None => log.meta.remove(&key),
                    };
                    group
                }
                Undo::RestoreGroup { group, previous } => {
                    match previous {
                        Some(log) => self.groups.insert(group, *log),
                        None => self.groups.remove(&group),
                    };
                    group
                }
            };
            self.remove_if_vacant(group);
        }
    }

    /// Apply an op read back by recovery. Ops were validated when written, so a violation
    /// here means the log is inconsistent: the group is marked corrupt.
    ///
    /// One gap is expected: replay may start at a segment whose checkpoint has an older purge
    /// mark than the first entry appended in it, because the entries in between lived in a
    /// deleted segment and were purged later (that purge is replayed further on). So an append
    /// to a group without entries may jump ahead of its purge mark;
    /// [`check_replayed`](Self::check_replayed) verifies that the jump was closed at the end.
    pub fn apply_replayed(&mut self, op: &LogOp) {
        if let LogOp::Append { group, index, .. } = op {
            let log = self.groups.get(group);
            let violation = match log.and_then(GroupLog::last) {
                Some(last) => last + 1 != *index,
                None => log
                    .and_then(|log| log.purged)
                    .is_some_and(|purged| *index <= purged),
            };
            if violation {
                // Keep the newest entry so indices stay dense, and refuse to serve the group.
                let log = self.group_mut(*group);
                log.entries.clear();
                log.corrupt = true;
            }
        }
        self.apply(op);
    }

    /// Replay a compaction copy of entry `index`: present already (its old segment still
    /// exists) → nothing; missing → put back. Copies come in descending index order, each one
    /// just before the group's first entry (or into an empty group).
    pub fn restore_replayed(&mut self, group: u64, index: u64, payload: Bytes) {
        let log = self.group_mut(group);
        let present = log
            .last()
            .is_some_and(|last| log.first <= index && index <= last);
        if present {
            return;
        }
        if log.entries.is_empty() {
            log.push(index, payload);
        } else if index + 1 == log.first {
            log.entries.push_front(payload);
            log.first = index;
        } else {
            log.corrupt = true;
        }
    }

    /// After replay: every group with entries and a purge mark has its first entry right
    /// after the mark; otherwise entries are missing and the group is marked corrupt.
    pub fn check_replayed(&mut self) {
        for log in self.groups.values_mut() {
            if let (Some(purged), false) = (log.purged, log.entries.is_empty()) {
                if log.first != purged + 1 {
                    log.corrupt = true;
                }
            }
        }
    }

    pub fn mark_corrupt(&mut self, group: u64) {
        self.group_mut(group).corrupt = true;
    }

    fn group_mut(&mut self, group: u64) -> &mut GroupLog {
        let resident = &self.resident;
        self.groups
            .entry(group)
            .or_insert_with(|| GroupLog::new(resident.clone()))
    }

    /// The node-wide count of the entries' payload bytes (read without the tables' lock).
    pub fn resident(&self) -> Resident {
        self.resident.clone()
    }

    /// The `count` groups whose entries hold the most payload bytes, most first, with their
    /// bytes (groups holding none left out).
    pub fn largest(&self, count: usize) -> Vec<(u64, u64)> {
        let mut sizes: Vec<(u64, u64)> = self
            .groups
            .iter()
            .map(|(group, log)| (*group, log.entries.bytes()))
            .filter(|(_, bytes)| *bytes > 0)
            .collect();
        sizes.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        sizes.truncate(count);
        sizes
    }

    fn remove_if_vacant(&mut self, group: u64) {
        if self.groups.get(&group).is_some_and(GroupLog::is_vacant) {
            self.groups.remove(&group);
        }
    }

    fn readable(&self, group: u64) -> Result<Option<&GroupLog>, LogError> {
        match self.groups.get(&group) {
            Some(log) if log.corrupt => Err(LogError::GroupCorrupt { group }),
            log => Ok(log),
        }
    }

    pub fn entries(
        &self,
        group: u64,
        range: impl RangeBounds<u64>,
    ) -> Result<Vec<(u64, Bytes)>, LogError> {
        let Some(log) = self.readable(group)? else {
            return Ok(Vec::new());
        };
        let Some(last) = log.last() else {
            return Ok(Vec::new());
        };
        let start = match range.start_bound() {
            Bound::Included(&start) => start,
            Bound::Excluded(&start) => start.saturating_add(1),
            Bound::Unbounded => 0,
        }
        .max(log.first);
        let end = match range.end_bound() {
            Bound::Included(&end) => end,
            Bound::Excluded(&0) => return Ok(Vec::new()),
            Bound::Excluded(&end) => end - 1,
            Bound::Unbounded => u64::MAX,
        }
        .min(last);
        if start > end {
            return Ok(Vec::new());
        }
        let skip = (start - log.first) as usize;
        let take = (end - start + 1) as usize;
        Ok(log
            .entries
            .range(skip..skip + take)
            .zip(start..)
            .map(|(payload, index)| (index, payload.clone()))
            .collect())
    }

    /// All entries of a group that is not corrupt (for compaction).
    pub fn entries_for_rewrite(&self, group: u64) -> Option<Vec<(u64, Bytes)>> {
        let log = self.groups.get(&group).filter(|log| !log.corrupt)?;
        Some(
            log.entries
                .iter()
                .zip(log.first..)
                .map(|(payload, index)| (index, payload.clone()))
                .collect(),
        )
    }

    /// Bytes the live entries of `group` take in a segment (records with their headers), if
    /// the group can be copied forward: not corrupt, at most `max_entries` entries and at most
    /// `limit` bytes. A group without entries takes 0 bytes.
    pub fn copyable_bytes(&self, group: u64, max_entries: usize, limit: u64) -> Option<u64> {
        let Some(log) = self.groups.get(&group) else {
            return Some(0);
        };
        if log.corrupt || log.entries.len() > max_entries {
            return None;
        }
        let mut bytes = 0u64;
        for payload in &log.entries {
            bytes += (RECORD_HEADER_LEN + payload.len()) as u64;
            if bytes > limit {
                return None;
            }
        }
        Some(bytes)
    }

    pub fn live_bytes(&self, group: u64) -> u64 {
        self.groups.get(&group).map_or(0, |log| log.entries.bytes())
    }

    pub fn entry_count(&self, group: u64) -> usize {
        self.groups.get(&group).map_or(0, |log| log.entries.len())
    }

    pub fn has_entry(&self, group: u64, index: u64) -> bool {
        self.groups.get(&group).is_some_and(|log| {
            log.last()
                .is_some_and(|last| log.first <= index && index <= last)
        })
    }

    pub fn first_index(&self, group: u64) -> Option<u64> {
        let log = self.groups.get(&group)?;
        (!log.entries.is_empty()).then_some(log.first)
    }

    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.groups.get(&group)?.last()
    }

    pub fn last_purged(&self, group: u64) -> Option<u64> {
        self.groups.get(&group)?.purged
    }

    pub fn meta(&self, group: u64, key: MetaKey) -> Option<Bytes> {
        self.groups.get(&group)?.meta.get(&key).cloned()
    }

    pub fn is_corrupt(&self, group: u64) -> bool {
        self.groups.get(&group).is_some_and(|log| log.corrupt)
    }

    pub fn groups(&self) -> Vec<u64> {
        let mut groups: Vec<u64> = self.groups.keys().copied().collect();
        groups.sort_unstable();
        groups
    }

    pub fn corrupt_groups(&self) -> Vec<u64> {
        let mut groups: Vec<u64> = self
            .groups
            .iter()
            .filter(|(_, log)| log.corrupt)
            .map(|(group, _)| *group)
            .collect();
        groups.sort_unstable();
        groups
    }
}

fn check_payload(payload: &Bytes) -> Result<(), LogError> {
    if payload.len() > MAX_PAYLOAD {
        return Err(LogError::PayloadTooLarge {
            len: payload.len(),
            max: MAX_PAYLOAD,
        });
    }
    Ok(())
}
