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

use super::chunk_key::{join, key, split, WORDS};

/// Longest list: 256 offsets take 512 bytes, a bitmap's size, so a list is only used while
/// it is smaller.
const LIST_MAX: usize = 256;
/// A bitmap holding fewer than this turns back into a list.
const BITS_MIN: usize = LIST_MAX / 2;
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

#[derive(Clone)]
enum Chunk {
    /// Bit `offset % 64` of word `offset / 64`; `count` bits are set.
    Bits {
        words: Box<[u64; WORDS]>,
        count: u16,
    },
    /// Ascending, at most `LIST_MAX`.
    List(Vec<u16>),
}

/// Word index of `offset` in a bitmap, and the mask of it and the bits below it.
fn bit(offset: u16) -> (usize, u64, u64) {
    let mask = 1u64 << (offset % 64);
    (usize::from(offset / 64), mask, mask | (mask - 1))
}

/// The set bits of one bitmap word as offsets: lowest first, highest from the back.
struct WordBits {
    base: u16,
    bits: u64,
}

impl Iterator for WordBits {
    type Item = u16;

    fn next(&mut self) -> Option<u16> {
        let low = self.bits.trailing_zeros() as u16;
        (self.bits != 0).then(|| {
            self.bits &= self.bits - 1;
            self.base + low
        })
    }
}

impl DoubleEndedIterator for WordBits {
    fn next_back(&mut self) -> Option<u16> {
        let high = 63u16.checked_sub(self.bits.leading_zeros() as u16)?;
        self.bits &= !(1 << high);
        Some(self.base + high)
    }
}

/// One of two iterators (a chunk's bitmap or list; a set's chunks or flat deque).
enum Either<A, B> {
    A(A),
    B(B),
}

impl<A: Iterator, B: Iterator<Item = A::Item>> Iterator for Either<A, B> {
    type Item = A::Item;

    fn next(&mut self) -> Option<A::Item> {
        match self {
            Either::A(a) => a.next(),
            Either::B(b) => b.next(),
        }
    }
}

impl<A: DoubleEndedIterator, B: DoubleEndedIterator<Item = A::Item>> DoubleEndedIterator
    for Either<A, B>
{
    fn next_back(&mut self) -> Option<A::Item> {
        match self {
            Either::A(a) => a.next_back(),
            Either::B(b) => b.next_back(),
        }
    }
}

impl Chunk {
    fn len(&self) -> usize {
        match self {
            Chunk::Bits { count, .. } => usize::from(*count),
            Chunk::List(list) => list.len(),
        }
    }

    fn iter(&self) -> impl DoubleEndedIterator<Item = u16> + '_ {
        match self {
            Chunk::Bits { words, .. } => {
                Either::A(words.iter().enumerate().flat_map(|(i, &w)| WordBits {
                    base: i as u16 * 64,
                    bits: w,
                }))
            }
            Chunk::List(list) => Either::B(list.iter().copied()),
        }
    }

    fn insert(&mut self, offset: u16) -> bool {
        let (word, mask, _) = bit(offset);
        match self {
            Chunk::Bits { words, count } => {
                let new = words[word] & mask == 0;
                words[word] |= mask;
                *count += u16::from(new);
                new
            }
            Chunk::List(list) => {
                let at = match list.last() {
                    Some(&last) if last >= offset => match list.binary_search(&offset) {
                        Ok(_) => return false,
                        Err(at) => at,
                    },
                    _ => list.len(),
                };
                if list.len() < LIST_MAX {
                    list.insert(at, offset);
                    return true;
                }
                let mut words = Box::new([0u64; WORDS]);
                for &o in list.iter() {
                    words[usize::from(o / 64)] |= 1 << (o % 64);
                }
                let count = list.len() as u16;
                *self = Chunk::Bits { words, count };
                self.insert(offset)
            }
        }
    }

    fn remove(&mut self, offset: u16) -> bool {
        match self {
            Chunk::Bits { words, count } => {
                let (word, mask, _) = bit(offset);
                if words[word] & mask == 0 {
                    return false;
                }
                words[word] &= !mask;
                *count -= 1;
                if usize::from(*count) < BITS_MIN {
                    *self = Chunk::List(self.iter().collect());
                }
            }
            Chunk::List(list) => {
                let Ok(at) = list.binary_search(&offset) else {
                    return false;
                };
                list.remove(at);
                if list.capacity() >= 2 * list.len() + 16 {
                    list.shrink_to_fit();
                }
            }
        }
        true
    }

    /// The highest offset at or below `offset`.
    fn last_at_or_below(&self, offset: u16) -> Option<u16> {
        match self {
            Chunk::Bits { words, .. } => {
                let (at, _, up_to) = bit(offset);
                (0..=at).rev().find_map(|i| {
                    let bits = if i == at { words[i] & up_to } else { words[i] };
                    let base = i as u16 * 64;
                    WordBits { base, bits }.next_back()
                })
            }
            Chunk::List(list) => {
                let below = list.partition_point(|&o| o <= offset);
                below.checked_sub(1).map(|i| list[i])
            }
        }
    }

    /// How many offsets are greater than `offset`.
    fn count_above(&self, offset: u16) -> usize {
        match self {
            Chunk::Bits { words, .. } => {
                let (at, _, up_to) = bit(offset);
                let whole: u32 = words[at + 1..].iter().map(|w| w.count_ones()).sum();
                (whole + (words[at] & !up_to).count_ones()) as usize
            }
            Chunk::List(list) => list.len() - list.partition_point(|&o| o <= offset),
        }
    }
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
                    .flat_map(|(&key, chunk)| chunk.iter().map(move |o| join(key, o))),
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
            let (key, _) = split(first);
            let n = rest.iter().take_while(|&&seq| split(seq).0 == key).count();
            let (group, after) = rest.split_at(n);
            let mut new = usize::from(insert_chunked(map, first));
            if let Some(chunk) = map.get_mut(&key) {
                for &seq in &group[1..] {
                    new += usize::from(chunk.insert(split(seq).1));
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
                let (key, offset) = split(seq);
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
        let (key, offset) = split(seq);
        let mut below = map.range(..=key);
        let (&at, chunk) = below.next_back()?;
        let in_chunk = if at == key {
            chunk.last_at_or_below(offset)
        } else {
            chunk.iter().next_back()
        };
        if let Some(offset) = in_chunk {
            return Some(join(at, offset));
        }
        let (&at, chunk) = below.next_back()?;
        chunk.iter().next_back().map(|offset| join(at, offset))
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
        let (at, offset) = split(after);
        let chunk = map.get(&at);
        let above_in_chunk = chunk.map_or(0, |c| c.count_above(offset));
        let count = if at - key(first) < key(last) - at {
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
            Chunk::Bits { .. } => WORDS * 8,
            Chunk::List(list) => list.capacity() * 2,
        };
        map.values().map(|c| entry + buffer(c)).sum()
    }
}

/// Whether neither `seqs[at - 1]` nor `seqs[at]` (the neighbours of `seq`, inserted there or
/// just removed from there) is in `seq`'s chunk: `seq` is or was its chunk's only sequence.
fn alone_in_chunk(seqs: &VecDeque<u64>, at: usize, seq: u64) -> bool {
    let shares = |i: usize| seqs.get(i).is_some_and(|&s| key(s) == key(seq));
    !shares(at) && (at == 0 || !shares(at - 1))
}

/// Adds `seq` to a chunked set's map; false if it was there already.
fn insert_chunked(map: &mut BTreeMap<u64, Chunk>, seq: u64) -> bool {
    let (key, offset) = split(seq);
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
