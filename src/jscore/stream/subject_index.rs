//! Per-subject index of a stream, which is also its subject interner: each distinct subject
//! is stored once and gets a [`SubjectId`] that the per-message metadata carries instead of
//! the subject itself. It answers `max_msgs_per_subject` (count and oldest), last-by-subject
//! gets, `num_subjects`, the expected-last-subject-sequence check and every filtered scan
//! (a message's subject is its id's name) without reading a message body.
//!
//! Replicated implicitly: it is derived from the stored messages and changes with them, so
//! every replica has the same subjects and sequences. The ids themselves are local (a
//! restart may number subjects differently): they are never stored nor sent, and equality
//! compares names, not ids.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::Arc;

use crate::jscore::subject_filter::SubjectFilter;

use super::seq_set::SeqSet;

/// A subject interned by the stream's [`SubjectIndex`]; valid while the subject has a
/// message. Non-zero so an `Option` of a message's metadata costs no extra word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SubjectId(NonZeroU32);

impl SubjectId {
    fn slot(self) -> usize {
        self.0.get() as usize - 1
    }

    /// The id as a number, for a packed column (`meta_chunk.rs`).
    pub(super) fn raw(self) -> u32 {
        self.0.get()
    }

    /// The id [`raw`](Self::raw) gave. A packed column only holds numbers it was given, so
    /// zero (never an id) is a bug.
    pub(super) fn from_raw(raw: u32) -> SubjectId {
        SubjectId(NonZeroU32::new(raw).expect("a raw subject id is not zero"))
    }

    fn of_slot(slot: usize) -> SubjectId {
        let id = u32::try_from(slot + 1).expect("fewer than 2^32 subjects");
        SubjectId(NonZeroU32::new(id).expect("slot + 1 is not zero"))
    }
}

#[derive(Debug, Clone)]
struct Entry {
    name: Arc<str>,
    /// Sets rather than counters because removing the oldest or newest message of a subject
    /// must find the next one without a scan; `SeqSet`s because with many interleaved
    /// subjects each is sparse, and a tree node per sequence would outweigh the message.
    seqs: SeqSet,
}

/// Sequences by subject, each subject stored once.
#[derive(Debug, Clone, Default)]
pub struct SubjectIndex {
    by_name: BTreeMap<Arc<str>, SubjectId>,
    /// Indexed by `SubjectId::slot`; `None` slots are free (listed in `free`).
    entries: Vec<Option<Entry>>,
    free: Vec<usize>,
}

impl PartialEq for SubjectIndex {
    fn eq(&self, other: &Self) -> bool {
        self.by_name.len() == other.by_name.len()
            && self
                .by_name
                .iter()
                .zip(other.by_name.iter())
                .all(|((a, ia), (b, ib))| a == b && self.seqs(*ia) == other.seqs(*ib))
    }
}

impl Eq for SubjectIndex {}

impl SubjectIndex {
    /// Records `seq` on `subject`, interning the subject if it is new.
    pub fn insert(&mut self, subject: &str, seq: u64) -> SubjectId {
        if let Some(&id) = self.by_name.get(subject) {
            if let Some(entry) = self.entries[id.slot()].as_mut() {
                entry.seqs.insert(seq);
            }
            return id;
        }
        let name: Arc<str> = Arc::from(subject);
        let entry = Entry {
            name: name.clone(),
            seqs: SeqSet::from_iter([seq]),
        };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.entries[slot] = Some(entry);
                slot
            }
            None => {
                self.entries.push(Some(entry));
                self.entries.len() - 1
            }
        };
        let id = SubjectId::of_slot(slot);
        self.by_name.insert(name, id);
        id
    }

    /// Records `seqs` (in any order; ascending is fastest) on the subject `id` stands for, which
    /// must be in use (a restore that just interned it: cheaper than [`insert`](Self::insert)'s
    /// lookup by name, one per run of the subject rather than one per message).
    pub fn insert_all_at(&mut self, id: SubjectId, seqs: &[u64]) {
        if let Some(entry) = self.entries.get_mut(id.slot()).and_then(Option::as_mut) {
            entry.seqs.extend_from_slice(seqs);
        }
    }

    /// Forgets `seq` on the subject `id`; the subject goes with its last message.
    pub fn remove(&mut self, id: SubjectId, seq: u64) {
        let slot = id.slot();
        let Some(entry) = self.entries.get_mut(slot).and_then(Option::as_mut) else {
            return;
        };
        entry.seqs.remove(seq);
        if entry.seqs.is_empty() {
            if let Some(entry) = self.entries[slot].take() {
                self.by_name.remove(&entry.name);
            }
            self.free.push(slot);
        }
    }

    /// The subject `id` stands for ("" for an id not in use, which a caller holding a
    /// message's metadata never has).
    pub fn name(&self, id: SubjectId) -> &str {
        self.entries
            .get(id.slot())
            .and_then(Option::as_ref)
            .map_or("", |entry| &entry.name)
    }

    pub fn clear(&mut self) {
        self.by_name.clear();
        self.entries.clear();
        self.free.clear();
    }

    fn seqs(&self, id: SubjectId) -> Option<&SeqSet> {
        self.entries
            .get(id.slot())
            .and_then(Option::as_ref)
            .map(|entry| &entry.seqs)
    }

    fn by_subject(&self, subject: &str) -> Option<&SeqSet> {
        self.seqs(*self.by_name.get(subject)?)
    }

    /// The sequences stored on the literal `subject`, ascending: one lookup, where
    /// [`seqs_matching`](Self::seqs_matching) walks every subject.
    pub fn seqs_of(&self, subject: &str) -> Vec<u64> {
        self.by_subject(subject)
            .map_or_else(Vec::new, |seqs| seqs.iter().collect())
    }

    /// Number of distinct subjects with at least one message (`state.num_subjects`).
    pub fn num_subjects(&self) -> usize {
        self.by_name.len()
    }

    /// Messages currently stored on this literal subject.
    pub fn count(&self, subject: &str) -> u64 {
        self.by_subject(subject).map_or(0, |s| s.len() as u64)
    }

    /// Oldest sequence on this literal subject.
    pub fn first_seq(&self, subject: &str) -> Option<u64> {
        self.by_subject(subject)?.first()
    }

    /// Newest sequence on this literal subject.
    pub fn last_seq(&self, subject: &str) -> Option<u64> {
        self.by_subject(subject)?.last()
    }

    /// Newest sequence among all subjects the filter selects (wildcards allowed), as
    /// nats-server's `LoadLastMsg` does for a wildcard subject.
    pub fn last_seq_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        self.matching(filter)
            .filter_map(|(_, seqs)| seqs.last())
            .max()
    }

    /// The newest sequence of every subject the filter selects, ascending (deliver policy
    /// `last_per_subject`).
    pub fn last_seq_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .filter_map(|(_, seqs)| seqs.last())
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// For every subject the filter selects, its newest sequence at or below `up_to`,
    /// ascending (direct get's `multi_last`, as nats-server's `MultiLastSeqs`).
    pub fn last_seqs_up_to(&self, filter: &SubjectFilter, up_to: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .filter_map(|(_, seqs)| seqs.last_at_or_below(up_to))
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// Messages with sequence > `after_seq` on subjects the filter selects.
    pub fn count_after(&self, filter: &SubjectFilter, after_seq: u64) -> u64 {
        self.matching(filter)
            .map(|(_, seqs)| seqs.count_after(after_seq))
            .sum()
    }

    /// Per-subject message counts for subjects the filter selects (`subjects_filter`).
    pub fn counts_matching(&self, filter: &SubjectFilter) -> BTreeMap<String, u64> {
        self.matching(filter)
            .map(|(subject, seqs)| (subject.to_string(), seqs.len() as u64))
            .collect()
    }

    /// For every subject holding more than `max_per_subject` messages, its oldest ones
    /// beyond the limit, ascending.
    pub fn oldest_beyond(&self, max_per_subject: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .entries
            .iter()
            .flatten()
            .map(|entry| &entry.seqs)
            .flat_map(|seqs| {
                let excess = (seqs.len() as u64).saturating_sub(max_per_subject) as usize;
                seqs.iter().take(excess)
            })
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// All sequences on subjects the filter selects, ascending.
    pub fn seqs_matching(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .flat_map(|(_, seqs)| seqs.iter())
            .collect();
        seqs.sort_unstable();
        seqs
    }

    fn matching<'a>(
        &'a self,
        filter: &'a SubjectFilter,
    ) -> impl Iterator<Item = (&'a str, &'a SeqSet)> + 'a {
        self.by_name
            .iter()
            .filter(move |(subject, _)| filter.matches(subject))
            .filter_map(|(subject, id)| Some((&**subject, self.seqs(*id)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tracks_first_last_and_counts() {
        let mut index = SubjectIndex::default();
        index.insert("a.1", 1);
        index.insert("a.2", 2);
        index.insert("a.1", 3);
        assert_eq!(index.count("a.1"), 2);
        assert_eq!(index.first_seq("a.1"), Some(1));
        assert_eq!(index.last_seq("a.1"), Some(3));
        assert_eq!(index.num_subjects(), 2);
        let all = SubjectFilter::new(["a.*"]);
        assert_eq!(index.last_seq_matching(&all), Some(3));
        assert_eq!(index.last_seq_per_subject(&all), vec![2, 3]);
        assert_eq!(index.count_after(&all, 1), 2);
        assert_eq!(index.count_after(&SubjectFilter::new(["a.1"]), 0), 2);
        assert_eq!(index.last_seqs_up_to(&all, 2), vec![1, 2]);
        assert_eq!(index.last_seqs_up_to(&all, 3), vec![2, 3]);
        assert_eq!(
            index.last_seqs_up_to(&SubjectFilter::new(["a.2"]), 1),
            Vec::<u64>::new()
        );
        let a1 = index.insert("a.1", 4);
        assert_eq!(index.name(a1), "a.1");
        index.remove(a1, 1);
        index.remove(a1, 4);
        assert_eq!(index.first_seq("a.1"), Some(3));
        let a2 = index.insert("a.2", 5);
        index.remove(a2, 2);
        index.remove(a2, 5);
        assert_eq!(index.num_subjects(), 1);
        assert_eq!(index.count("a.2"), 0);
        // The freed id is reused for the next new subject.
        assert_eq!(index.insert("b", 6), a2);
        assert_eq!(index.name(a2), "b");
    }
}
