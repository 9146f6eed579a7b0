//! `SeqSet`: an ordered set of stream sequences — what a `BTreeSet<u64>` does for the
//! sequences of one subject, in a few bytes per sequence or less.
//!
//! The subject index keeps one set per subject. A tree costs about ten bytes per sequence,
//! which for a subject among a hundred interleaved ones (every hundredth message) outweighed
//! the message's own metadata and was slow to rebuild on restart. So the sequences are
//! grouped in chunks of 4096 (`seq >> 12`), in a `BTreeMap` by chunk number; a chunk is a
//! sorted list of 12-bit offsets while it is short (2 bytes each) and a 4096-bit bitmap (512
//! bytes) once a list would be larger. A dense subject costs about a bit per sequence, one
//! holding every hundredth about 3.5 bytes (its offsets and its share of a tree node).
//!
//! A chunk costs about 64 bytes besides its offsets, and the map's first node about 350, so
//! a small set, or one thinner than 16 sequences per chunk (a KV key with a few values, one
//! of thousands of interleaved subjects), is instead a flat sorted deque of sequences, 8
//! bytes each. It turns into chunks at 64 sequences and 16 per chunk, and back below half of
//! either, so a set at a boundary does not convert back and forth.
//!
//! Streams append at the end and remove from the front: both ends of the deque are O(1), a
//! list appends by a push and shifts at most 256 offsets. Which layout is used is not
//! observable: equality compares the sequences. Not replicated by itself: it is part of
//! `StreamState`, whose contents are.

use std::collections::{btree_map::Entry, BTreeMap, VecDeque};
use std::ops::Bound::{Excluded, Unbounded};

use super::chunk_key::SeqChunks as C;
use super::seq_chunk::{Chunk, Either};

/// A flat set with at least this many sequences, and as many per chunk...
const CHUNKED_MIN_LEN: usize = 64;
/// ...as this, is chunked (and turns flat again below half of either).
const CHUNKED_PER_CHUNK: usize = 16;

#[derive(Clone)]
pub struct SeqSet {
    repr: Repr,
    len: usize,
}

#[derive(Clone)]
enum Repr {
    /// Ascending; `chunks` counts the distinct chunk numbers among them.
    Flat { seqs: VecDeque<u64>, chunks: usize },
    /// By chunk number; no chunk is empty.
    Chunked(BTreeMap<u64, Chunk>),
}

impl Default for SeqSet {
    fn default() -> Self {
        let seqs = VecDeque::new();
        let repr = Repr::Flat { seqs, chunks: 0 };
        SeqSet { repr, len: 0 }
    }
}

impl SeqSet {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// (Only the tests clear or probe one set so far: the index drops whole entries.)
    #[cfg(test)]
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    #[cfg(test)]
    pub fn contains(&self, seq: u64) -> bool {
        self.last_at_or_below(seq) == Some(seq)
    }

    pub fn first(&self) -> Option<u64> {
        self.iter().next()
    }

    pub fn last(&self) -> Option<u64> {
        self.iter().next_back()
    }

    /// The sequences, ascending (descending from the back), read as they are consumed.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        match &self.repr {
            Repr::Flat { seqs, .. } => Either::A(seqs.iter().copied()),
            Repr::Chunked(map) => Either::B(
                map.iter()
                    .flat_map(|(&key, chunk)| chunk.iter().map(move |o| C::join(key, o))),
            ),
        }
    }

    /// Adds `seq`; false if it was there already.
    pub fn insert(&mut self, seq: u64) -> bool {
        let new = match &mut self.repr {
            Repr::Flat { seqs, chunks } => {
                let at = match seqs.back() {
                    Some(&last) if last >= seq => match seqs.binary_search(&seq) {
                        Ok(_) => return false,
                        Err(at) => at,
                    },
                    _ => seqs.len(),
                };
                *chunks += usize::from(alone_in_chunk(seqs, at, seq));
                seqs.insert(at, seq);
                true
            }
            Repr::Chunked(map) => insert_chunked(map, seq),
        };
        self.len += usize::from(new);
        self.relayout();
        new
    }

    /// Inserts every sequence of `seqs` (any order, duplicates allowed). Consecutive ones of
    /// one chunk take one lookup of it, where [`insert`](Self::insert) descends the chunk
    /// map for each: a restore adds each subject's sequences this way.
    pub fn extend_from_slice(&mut self, seqs: &[u64]) {
        let mut rest = seqs;
        while let Some(&first) = rest.first() {
            let Repr::Chunked(map) = &mut self.repr else {
                self.insert(first);
                rest = &rest[1..];
                continue;
            };
            let (key, _) = C::split(first);
            let n = rest
                .iter()
                .take_while(|&&seq| C::split(seq).0 == key)
                .count();
            let (group, after) = rest.split_at(n);
            let mut new = usize::from(insert_chunked(map, first));
            if let Some(chunk) = map.get_mut(&key) {
                for &seq in &group[1..] {
                    new += usize::from(chunk.insert(C::split(seq).1));
                }
            }
            self.len += new;
            rest = after;
        }
        self.relayout();
    }

    /// Removes `seq`; false if it was not there.
    pub fn remove(&mut self, seq: u64) -> bool {
        match &mut self.repr {
            Repr::Flat { seqs, chunks } => {
                let Ok(at) = seqs.binary_search(&seq) else {
                    return false;
                };
                seqs.remove(at);
                *chunks -= usize::from(alone_in_chunk(seqs, at, seq));
                if seqs.capacity() >= 2 * seqs.len() + 16 {
                    seqs.shrink_to_fit();
                }
            }
            Repr::Chunked(map) => {
                let (key, offset) = C::split(seq);
                let Some(chunk) = map.get_mut(&key) else {
                    return false;
                };
                if !chunk.remove(offset) {
                    return false;
                }
                if chunk.len() == 0 {
                    map.remove(&key);
                }
            }
        }
        self.len -= 1;
        self.relayout();
        true
    }

    /// The highest sequence at or below `seq`.
    pub fn last_at_or_below(&self, seq: u64) -> Option<u64> {
        let map = match &self.repr {
            Repr::Flat { seqs, .. } => {
                let below = seqs.partition_point(|&s| s <= seq);
                return below.checked_sub(1).map(|i| seqs[i]);
            }
            Repr::Chunked(map) => map,
        };
        let (key, offset) = C::split(seq);
        let mut below = map.range(..=key);
        let (&at, chunk) = below.next_back()?;
        let in_chunk = if at == key {
            chunk.last_at_or_below(offset)
        } else {
            chunk.iter().next_back()
        };
        if let Some(offset) = in_chunk {
            return Some(C::join(at, offset));
        }
        let (&at, chunk) = below.next_back()?;
        chunk.iter().next_back().map(|offset| C::join(at, offset))
    }

    /// Number of sequences greater than `after`: a binary search when flat; when chunked,
    /// the counts of the chunks on the side of `after` with fewer chunk numbers (O(1) when
    /// `after` is outside the set; this runs on every delivery) and a popcount or binary
    /// search in `after`'s own chunk.
    pub fn count_after(&self, after: u64) -> u64 {
        let map = match &self.repr {
            Repr::Flat { seqs, .. } => {
                return (self.len - seqs.partition_point(|&s| s <= after)) as u64
            }
            Repr::Chunked(map) => map,
        };
        let (Some(first), Some(last)) = (self.first(), self.last()) else {
            return 0;
        };
        if after >= last || after < first {
            return if after < first { self.len as u64 } else { 0 };
        }
        let (at, offset) = C::split(after);
        let chunk = map.get(&at);
        let above_in_chunk = chunk.map_or(0, |c| c.count_above(offset));
        let count = if at - C::key(first) < C::key(last) - at {
            let below: usize = map.range(..at).map(|(_, c)| c.len()).sum();
            self.len - below - chunk.map_or(0, |c| c.len() - above_in_chunk)
        } else {
            let above: usize = map
                .range((Excluded(at), Unbounded))
                .map(|(_, c)| c.len())
                .sum();
            above + above_in_chunk
        };
        count as u64
    }

    /// Turns flat or chunked when the other layout has become clearly smaller.
    fn relayout(&mut self) {
        let (chunked, chunks) = match &self.repr {
            Repr::Flat { chunks, .. } => (false, *chunks),
            Repr::Chunked(map) => (true, map.len()),
        };
        let (min_len, per_chunk) = match chunked {
            true => (CHUNKED_MIN_LEN / 2, CHUNKED_PER_CHUNK / 2),
            false => (CHUNKED_MIN_LEN, CHUNKED_PER_CHUNK),
        };
        if (self.len >= min_len && self.len >= chunks * per_chunk) == chunked {
            return;
        }
        self.repr = if chunked {
            Repr::Flat {
                seqs: self.iter().collect(),
                chunks,
            }
        } else {
            let mut map = BTreeMap::new();
            for seq in self.iter() {
                insert_chunked(&mut map, seq);
            }
            Repr::Chunked(map)
        };
    }

    /// `None` when flat, else each chunk's number, layout ("bits" or "list") and count.
    #[cfg(test)]
    pub(super) fn layouts(&self) -> Option<Vec<(u64, &'static str, usize)>> {
        let Repr::Chunked(map) = &self.repr else {
            return None;
        };
        let name = |c: &Chunk| {
            if let Chunk::Bits { .. } = c {
                "bits"
            } else {
                "list"
            }
        };
        Some(map.iter().map(|(&k, c)| (k, name(c), c.len())).collect())
    }

    /// Estimated heap bytes, allocator headers left out: the deque's capacity, or each
    /// chunk's bitmap or list capacity plus its map entry counted twice (B-tree nodes filled
    /// in order are about half empty; within 1% of a counting allocator for 1 M sequences).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        let map = match &self.repr {
            Repr::Flat { seqs, .. } => return seqs.capacity() * 8,
            Repr::Chunked(map) => map,
        };
        let entry = 2 * std::mem::size_of::<(u64, Chunk)>();
        let buffer = |c: &Chunk| match c {
            Chunk::Bits { .. } => C::WORDS * 8,
            Chunk::List(list) => list.capacity() * 2,
        };
        map.values().map(|c| entry + buffer(c)).sum()
    }
}

/// Whether neither `seqs[at - 1]` nor `seqs[at]` (the neighbours of `seq`, inserted there or
/// just removed from there) is in `seq`'s chunk: `seq` is or was its chunk's only sequence.
fn alone_in_chunk(seqs: &VecDeque<u64>, at: usize, seq: u64) -> bool {
    let shares = |i: usize| seqs.get(i).is_some_and(|&s| C::key(s) == C::key(seq));
    !shares(at) && (at == 0 || !shares(at - 1))
}

/// Adds `seq` to a chunked set's map; false if it was there already.
fn insert_chunked(map: &mut BTreeMap<u64, Chunk>, seq: u64) -> bool {
    let (key, offset) = C::split(seq);
    match map.last_entry() {
        Some(mut last) if *last.key() == key => last.get_mut().insert(offset),
        last => {
            // A chunk the sequences move past will most likely not grow again: give back its
            // list's spare capacity (up to half of it, from doubling).
            if let Some(mut last) = last.filter(|last| *last.key() < key) {
                if let Chunk::List(list) = last.get_mut() {
                    list.shrink_to_fit();
                }
            }
            match map.entry(key) {
                Entry::Occupied(mut chunk) => chunk.get_mut().insert(offset),
                Entry::Vacant(slot) => {
                    slot.insert(Chunk::List(vec![offset]));
                    true
                }
            }
        }
    }
}

impl FromIterator<u64> for SeqSet {
    fn from_iter<I: IntoIterator<Item = u64>>(iter: I) -> Self {
        let mut set = SeqSet::new();
        for seq in iter {
            set.insert(seq);
        }
        set
    }
}

/// Equal when they hold the same sequences, whatever their layouts.
impl PartialEq for SeqSet {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for SeqSet {}

impl std::fmt::Debug for SeqSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.iter()).finish()
    }
}
