//! Per-subject index of a stream: which sequences hold each literal subject. It answers
//! `max_msgs_per_subject` (count and oldest), last-by-subject gets, `num_subjects`, and the
//! expected-last-subject-sequence check without scanning the stream.
//!
//! Replicated implicitly: it is derived from the stored messages and changes with them, so
//! every replica has the same index (a snapshot may omit it and rebuild it).

use std::collections::BTreeMap;

use crate::jscore::subject_filter::SubjectFilter;

use super::seq_map::SeqMap;

/// Sequences by subject. Sets rather than counters because removing the oldest or newest
/// message of a subject must find the next one without a scan; `SeqMap`s because a subject
/// that takes most of a stream's messages (or a KV key with one value) is dense.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubjectIndex {
    by_subject: BTreeMap<String, SeqMap<()>>,
}

impl SubjectIndex {
    pub fn insert(&mut self, subject: &str, seq: u64) {
        match self.by_subject.get_mut(subject) {
            Some(seqs) => {
                seqs.insert(seq, ());
            }
            None => {
                self.by_subject
                    .insert(subject.to_string(), SeqMap::from_iter([(seq, ())]));
            }
        }
    }

    pub fn remove(&mut self, subject: &str, seq: u64) {
        if let Some(seqs) = self.by_subject.get_mut(subject) {
            seqs.remove(seq);
            if seqs.is_empty() {
                self.by_subject.remove(subject);
            }
        }
    }

    pub fn clear(&mut self) {
        self.by_subject.clear();
    }

    /// Number of distinct subjects with at least one message (`state.num_subjects`).
    pub fn num_subjects(&self) -> usize {
        self.by_subject.len()
    }

    /// Messages currently stored on this literal subject.
    pub fn count(&self, subject: &str) -> u64 {
        self.by_subject.get(subject).map_or(0, |s| s.len() as u64)
    }

    /// Oldest sequence on this literal subject.
    pub fn first_seq(&self, subject: &str) -> Option<u64> {
        self.by_subject.get(subject)?.first().map(|(seq, _)| seq)
    }

    /// Newest sequence on this literal subject.
    pub fn last_seq(&self, subject: &str) -> Option<u64> {
        self.by_subject.get(subject)?.last().map(|(seq, _)| seq)
    }

    /// Newest sequence among all subjects the filter selects (wildcards allowed), as
    /// nats-server's `LoadLastMsg` does for a wildcard subject.
    pub fn last_seq_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        self.matching(filter)
            .filter_map(|(_, seqs)| seqs.last().map(|(seq, _)| seq))
            .max()
    }

    /// The newest sequence of every subject the filter selects, ascending (deliver policy
    /// `last_per_subject`).
    pub fn last_seq_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .filter_map(|(_, seqs)| seqs.last().map(|(seq, _)| seq))
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// For every subject the filter selects, its newest sequence at or below `up_to`,
    /// ascending (direct get's `multi_last`, as nats-server's `MultiLastSeqs`).
    pub fn last_seqs_up_to(&self, filter: &SubjectFilter, up_to: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .filter_map(|(_, seqs)| seqs.range(..=up_to).next_back().map(|(seq, _)| seq))
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
            .map(|(subject, seqs)| (subject.clone(), seqs.len() as u64))
            .collect()
    }

    /// For every subject holding more than `max_per_subject` messages, its oldest ones
    /// beyond the limit, ascending.
    pub fn oldest_beyond(&self, max_per_subject: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .by_subject
            .values()
            .flat_map(|seqs| {
                let excess = (seqs.len() as u64).saturating_sub(max_per_subject) as usize;
                seqs.keys().take(excess)
            })
            .collect();
        seqs.sort_unstable();
        seqs
    }

    /// All sequences on subjects the filter selects, ascending.
    pub fn seqs_matching(&self, filter: &SubjectFilter) -> Vec<u64> {
        let mut seqs: Vec<u64> = self
            .matching(filter)
            .flat_map(|(_, seqs)| seqs.keys())
            .collect();
        seqs.sort_unstable();
        seqs
    }

    fn matching<'a>(
        &'a self,
        filter: &'a SubjectFilter,
    ) -> impl Iterator<Item = (&'a String, &'a SeqMap<()>)> + 'a {
        self.by_subject
            .iter()
            .filter(move |(subject, _)| filter.matches(subject))
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
        index.remove("a.1", 1);
        assert_eq!(index.first_seq("a.1"), Some(3));
        index.remove("a.2", 2);
        assert_eq!(index.num_subjects(), 1);
        assert_eq!(index.count("a.2"), 0);
    }
}
