//! `MetaMap`: a stream's message metadata ([`MsgMeta`]) by sequence, ordered, in as little
//! memory as the stream's shape allows.
//!
//! The sequences are cut into chunks of 1024 (`meta_chunk.rs`, `chunk_key.rs`), kept in a
//! `BTreeMap` by chunk number, so a stream costs a tree node per 1024 sequences, not per
//! message, and a stretch with no message costs nothing (an interior delete of a whole
//! chunk, a stream that skipped ahead). The chunk being appended to is open (16 bytes a slot); when an append
//! moves on to the next chunk, the one before is sealed into columns as narrow as its values
//! allow: a busy stream of one subject keeps about 4 bytes a message, where a 16-byte slot
//! per message and a doubling deque (before) kept 16 to 34. A restore seals every chunk,
//! the last too, once it has them all ([`seal_all`](MetaMap::seal_all)).
//!
//! Lookups are by value ([`MsgMeta`] is `Copy`): a packed chunk has no `MsgMeta` to lend.
//!
//! Not replicated by itself: it is part of `StreamState`, whose contents are. Its layout is
//! local (a replica that restarted has its chunks sealed where another has them open) and
//! not observable.

use std::collections::{btree_map, BTreeMap};
use std::iter::Chain;
use std::ops::{Bound, RangeBounds};
use std::option;

use super::chunk_key::MetaChunks as C;
use super::message::MsgMeta;
use super::meta_chunk::Chunk;

#[derive(Clone, Default)]
pub(super) struct MetaMap {
    /// Every chunk but the tail.
    chunks: BTreeMap<u64, Chunk>,
    /// The chunk appends go to, kept out of the tree so an append or a read of a recent
    /// message costs no descent: its number is above every number in `chunks`, and it holds
    /// a message.
    tail: Option<(u64, Chunk)>,
    len: usize,
}

type Chunks<'a> = Chain<btree_map::Range<'a, u64, Chunk>, option::IntoIter<(&'a u64, &'a Chunk)>>;

impl MetaMap {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn chunk(&self, key: u64) -> Option<&Chunk> {
        match &self.tail {
            Some((tail, chunk)) if *tail == key => Some(chunk),
            _ => self.chunks.get(&key),
        }
    }

    /// The chunks numbered in `range`, ascending, the tail last.
    fn chunks_in(&self, range: impl RangeBounds<u64> + Clone) -> Chunks<'_> {
        let tail = self.tail.as_ref().map(|(key, chunk)| (key, chunk));
        self.chunks
            .range(range.clone())
            .chain(tail.filter(|(key, _)| range.contains(*key)))
    }

    pub fn get(&self, seq: u64) -> Option<MsgMeta> {
        let (key, off) = C::split(seq);
        self.chunk(key)?.get(off)
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.get(seq).is_some()
    }

    pub fn first(&self) -> Option<(u64, MsgMeta)> {
        let (key, chunk) = self.chunks_in(..).next()?;
        let (off, meta) = chunk.next_in(0, C::LEN as u32)?;
        Some((C::join(*key, off), meta))
    }

    pub fn last(&self) -> Option<(u64, MsgMeta)> {
        let (key, chunk) = self.chunks_in(..).next_back()?;
        let (off, meta) = chunk.prev_in(0, C::LEN as u32)?;
        Some((C::join(*key, off), meta))
    }

    /// Stores `meta` at `seq`, returning what was there. An append past the tail seals it
    /// into the tree and starts a new one.
    pub fn insert(&mut self, seq: u64, meta: MsgMeta) -> Option<MsgMeta> {
        let (key, off) = C::split(seq);
        let top = match &self.tail {
            Some((tail, _)) => Some(*tail),
            None => self.chunks.last_key_value().map(|(last, _)| *last),
        };
        let old = match &mut self.tail {
            Some((tail, chunk)) if *tail == key => chunk.insert(off, meta),
            _ if top.is_none_or(|top| top < key) => {
                match self.tail.take() {
                    Some((tail, mut chunk)) => {
                        chunk.seal();
                        self.chunks.insert(tail, chunk);
                    }
                    None => {
                        if let Some(mut last) = self.chunks.last_entry() {
                            last.get_mut().seal();
                        }
                    }
                }
                let mut chunk = Chunk::new();
                chunk.insert(off, meta);
                self.tail = Some((key, chunk));
                None
            }
            _ => self
                .chunks
                .entry(key)
                .or_insert_with(Chunk::new)
                .insert(off, meta),
        };
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, seq: u64) -> Option<MsgMeta> {
        let (key, off) = C::split(seq);
        let old = match &mut self.tail {
            Some((tail, chunk)) if *tail == key => {
                let old = chunk.remove(off)?;
                if chunk.live() == 0 {
                    self.tail = None;
                }
                old
            }
            _ => {
                let chunk = self.chunks.get_mut(&key)?;
                let old = chunk.remove(off)?;
                if chunk.live() == 0 {
                    self.chunks.remove(&key);
                }
                old
            }
        };
        self.len -= 1;
        Some(old)
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.tail = None;
        self.len = 0;
    }

    /// Seals every chunk but the tail.
    pub fn seal(&mut self) {
        for chunk in self.chunks.values_mut() {
            chunk.seal();
        }
    }

    /// Seals every chunk, the tail too (after a restore, which inserts in any order): a
    /// restored stream may stay idle, and an open tail costs 16 bytes a slot, its deque up to
    /// twice that (64 KiB for a full chunk; 1000 streams of 10 MiB each ran in 274 MB after a
    /// restart with their tails sealed, 399 MB without). The next append opens it again.
    pub fn seal_all(&mut self) {
        self.seal();
        if let Some((_, tail)) = &mut self.tail {
            tail.seal();
        }
    }

    pub fn range(&self, range: impl RangeBounds<u64>) -> Iter<'_> {
        let lo = match range.start_bound() {
            Bound::Included(&seq) => seq,
            Bound::Excluded(&seq) => seq.saturating_add(1),
            Bound::Unbounded => 0,
        };
        // Exclusive; a stream never reaches sequence u64::MAX.
        let hi = match range.end_bound() {
            Bound::Included(&seq) => seq.saturating_add(1),
            Bound::Excluded(&seq) => seq,
            Bound::Unbounded => u64::MAX,
        };
        let chunks = match lo < hi {
            true => self.chunks_in(C::split(lo).0..=C::split(hi - 1).0),
            false => self.chunks_in(1..1),
        };
        Iter {
            chunks,
            lo,
            hi,
            front: None,
            back: None,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.range(..)
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.iter().map(|(seq, _)| seq)
    }

    /// Number of messages with a sequence greater than `after`: O(1) without holes,
    /// otherwise a walk over the chunks on the shorter side of `after` (this runs on every
    /// delivery).
    pub fn count_after(&self, after: u64) -> u64 {
        let (Some((first, _)), Some((last, _))) = (self.first(), self.last()) else {
            return 0;
        };
        let len = self.len as u64;
        if after >= last {
            return 0;
        }
        if after < first {
            return len;
        }
        if last - first + 1 == len {
            return last - after;
        }
        let (key, off) = C::split(after);
        let within = self
            .chunk(key)
            .map_or(0, |chunk| chunk.count_up_to(off) as u64);
        let live = |(_, chunk): (&u64, &Chunk)| chunk.live() as u64;
        if after - first < last - after {
            let below: u64 = self.chunks_in(..key).map(live).sum();
            len - below - within
        } else {
            let above: u64 = self.chunks_in(key + 1..).map(live).sum();
            let whole = self.chunk(key).map_or(0, |chunk| chunk.live() as u64);
            above + whole - within
        }
    }

    /// Heap bytes held (chunks and the tree's entries, roughly), for tests.
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, Chunk)>();
        self.chunks_in(..)
            .map(|(_, chunk)| chunk.heap_bytes() + entry)
            .sum()
    }

    /// Each chunk's number and layout, for tests.
    #[cfg(test)]
    pub(super) fn layouts(&self) -> Vec<(u64, &'static str)> {
        self.chunks_in(..)
            .map(|(key, chunk)| (*key, chunk.layout()))
            .collect()
    }
}

impl FromIterator<(u64, MsgMeta)> for MetaMap {
    fn from_iter<T: IntoIterator<Item = (u64, MsgMeta)>>(iter: T) -> Self {
        let mut map = MetaMap::new();
        for (seq, meta) in iter {
            map.insert(seq, meta);
        }
        map
    }
}

impl PartialEq for MetaMap {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for MetaMap {}

impl std::fmt::Debug for MetaMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Ascending (and, from the back, descending) `(seq, meta)` pairs of a [`MetaMap`] range.
pub(super) struct Iter<'a> {
    chunks: Chunks<'a>,
    /// The sequences not yet yielded from either end: `lo..hi`.
    lo: u64,
    hi: u64,
    front: Option<(u64, &'a Chunk)>,
    back: Option<(u64, &'a Chunk)>,
}

impl Iter<'_> {
    /// The offsets of chunk `key` still to be yielded, `lo..hi` within it.
    fn window(&self, key: u64) -> (u32, u32) {
        let start = C::join(key, 0);
        let end = start + C::LEN as u64;
        let lo = self.lo.clamp(start, end) - start;
        let hi = self.hi.clamp(start, end) - start;
        (lo as u32, hi as u32)
    }
}

impl Iterator for Iter<'_> {
    type Item = (u64, MsgMeta);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, chunk)) = self.front {
                let (lo, hi) = self.window(key);
                if let Some((off, meta)) = chunk.next_in(lo, hi) {
                    let seq = C::join(key, off);
                    self.lo = seq + 1;
                    return Some((seq, meta));
                }
                self.front = None;
            }
            match self.chunks.next() {
                Some((key, chunk)) => self.front = Some((*key, chunk)),
                None => {
                    self.front = Some(self.back.take()?);
                }
            }
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            if let Some((key, chunk)) = self.back {
                let (lo, hi) = self.window(key);
                if let Some((off, meta)) = chunk.prev_in(lo, hi) {
                    let seq = C::join(key, off);
                    self.hi = seq;
                    return Some((seq, meta));
                }
                self.back = None;
            }
            match self.chunks.next_back() {
                Some((key, chunk)) => self.back = Some((*key, chunk)),
                None => {
                    self.back = Some(self.front.take()?);
                }
            }
        }
    }
}
