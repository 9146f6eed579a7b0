//! Reclaim: giving back the disk of a dropped or purged group at once.
//!
//! Segments die only when no live entry is left in them, and the active segment only after
//! it is sealed. So without reclaim a deleted stream's log stayed on disk while any other group
//! (typically the meta group, whose few entries are never purged) had an entry in one of its
//! segments, until the segment count passed `compact_after_segments` (1 GiB with the
//! defaults); and its records in the active segment stayed until the segment filled up.
//!
//! After a batch that purged, truncated or dropped a group, [`Writer::reclaim`] looks at the
//! segments oldest first, the active one included, and takes the longest run of them whose
//! live entries all belong to groups it may copy (not corrupt, at most `compact_max_entries`
//! entries, at most `reclaim_max_bytes` bytes for all of them together). If deleting that run
//! frees at least `reclaim_min_bytes` and 4 times what the copy writes, it seals the active
//! segment, starts a new one (its checkpoint carries every purge mark and meta value), copies
//! the live entries of those groups into it as compaction does (`Rewrite` records, behind every
//! request queued so far), and the run of segments is then dead and deleted. The copy always
//! goes to a fresh segment, never behind other records in the active one, so a crash that
//! tears it tears nothing else.

use std::collections::BTreeSet;
use std::sync::mpsc::Receiver;

use tracing::{debug, warn};

use super::{queue_rewrites, Reclaimed, Request, Writer};

impl Writer {
    /// Reclaim what the last batch left dead, if worth it (see the module docs). Returns the
    /// batch it wrote (requests taken from the queue, then the copy), to be completed after
    /// the batch that triggered it.
    pub(super) fn reclaim(&mut self, requests: &Receiver<Request>) -> Option<Reclaimed> {
        let groups = self.reclaim_plan()?;
        debug!(
            groups = groups.len(),
            "log reclaim: copying groups to a new segment"
        );
        let rotated = self.seal_active().and_then(|()| self.create_segment());
        if let Err(error) = rotated {
            // The next batch creates the segment; the space waits for the next reclaim.
            warn!(error = %error, "log reclaim: cannot start a new segment");
            return None;
        }
        let mut batch = Vec::new();
        let tables = self.shared.tables.write();
        queue_rewrites(tables, groups, requests, &mut batch);
        if batch.is_empty() {
            // Nothing live to copy: the new segment's checkpoint was all that was needed.
            self.delete_dead_segments();
            return None;
        }
        let written = self.write_batch(&mut batch);
        Some((batch, written))
    }

    /// The groups to copy so that the oldest segments can go, if that frees enough.
    fn reclaim_plan(&self) -> Option<BTreeSet<u64>> {
        let limit = self.options.reclaim_max_bytes;
        let active = self.active.as_ref()?;
        if limit == 0 {
            return None;
        }
        let live = self.durable.groups_by_segment();
        let tables = self.shared.tables.read();
        let mut chosen = BTreeSet::new();
        let mut copied = 0u64;
        let mut plan = None;
        let mut freed = 0u64;
        'segments: for &segment in &self.segments {
            for &group in live.get(&segment).into_iter().flatten() {
                if chosen.contains(&group) {
                    continue;
                }
                let max_entries = self.options.compact_max_entries;
                // A group too big to copy keeps this segment and every later one.
                let Some(bytes) = tables.copyable_bytes(group, max_entries, limit - copied) else {
                    break 'segments;
                };
                copied += bytes;
                chosen.insert(group);
            }
            freed += if segment == active.id {
                active.zeroed.max(active.len)
            } else {
                self.disk.len(segment).unwrap_or(0)
            };
            if freed >= self.options.reclaim_min_bytes.max(copied.saturating_mul(4)) {
                plan = Some(chosen.clone());
            }
        }
        plan
    }
}
