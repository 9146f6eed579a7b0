//! `MetaMap`: a stream's message metadata ([`MsgMeta`]) by sequence, ordered, in as little
//! memory as the stream's shape allows.
//!
//! The sequences are cut into chunks of 256 (`meta_chunk.rs`, `chunk_key.rs`), kept in a
//! `BTreeMap` by chunk number, so a stream costs a tree node per 256 sequences, not per
//! message, and a stretch with no message costs nothing (an interior delete of a whole
//! chunk, a stream that skipped ahead). The chunk being appended to is open (16 bytes a slot); when an append
//! moves on to the next chunk, the one before is sealed into columns as narrow as its values
//! allow: a busy stream of one subject keeps about 4 bytes a message, where a 16-byte slot
//! per message and a doubling deque (before) kept 16 to 34. A restore seals every chunk,
//! the last too, once it has them all ([`seal_all`](MetaMap::seal_all)).
//!
//! Lookups are by value ([`MsgMeta`] is `Copy`): a packed chunk has no `MsgMeta` to lend.
//!
//! With a spill ([`spill_to`](MetaMap::spill_to), ADR 0033) only the tail and the sealed
//! chunks touched last stay in memory; the others are read back from the spill when a query
//! reaches them, and brought back into memory when a change does. The first and last
//! messages are kept beside the chunks, so the queries every delivery makes read nothing back.
//!
//! Not replicated by itself: it is part of `StreamState`, whose contents are. Its layout is
//! local (a replica that restarted has its chunks sealed where another has them open) and
//! not observable.

use std::collections::{btree_map, BTreeMap};
use std::iter::{Chain, Map};
use std::ops::{Deref, RangeBounds};
use std::option;
use std::sync::Arc;

use super::chunk_key::MetaChunks as C;
use super::message::MsgMeta;
use super::meta_chunk::Chunk;
use super::meta_spill::{Away, MetaSpill, Spill};

mod iter;
pub(super) use iter::Iter;

#[derive(Default)]
pub(super) struct MetaMap {
    /// Every chunk but the tail.
    chunks: BTreeMap<u64, Slot>,
    /// The chunk appends go to, kept out of the tree so an append or a read of a recent
    /// message costs no descent: its number is above every number in `chunks`, and it holds
    /// a message.
    tail: Option<(u64, Chunk)>,
    len: usize,
    /// The lowest and highest sequences held, with their metadata: `first` and `last` (and
    /// so every delivery's `count_after`) read no chunk.
    ends: Option<((u64, MsgMeta), (u64, MsgMeta))>,
    /// Where sealed chunks go out of memory; `None`: every chunk stays in memory.
    spill: Option<Spill>,
}

/// A chunk of the tree: in memory, or out of it in the spill.
enum Slot {
    Here(Chunk),
    Away(Away),
}

/// A chunk as the map's readers reach it, without bringing it back into memory.
#[derive(Clone, Copy)]
enum SlotRef<'a> {
    Here(&'a Chunk),
    Away(Away),
}

impl SlotRef<'_> {
    fn live(self) -> usize {
        match self {
            SlotRef::Here(chunk) => chunk.live(),
            SlotRef::Away(away) => usize::from(away.live),
        }
    }
}

/// A chunk to read: borrowed from memory, or read back from the spill (shared with the
/// spill's one-chunk read cache, never put back in the map).
enum ChunkRef<'a> {
    Borrowed(&'a Chunk),
    Loaded(Arc<Chunk>),
}

impl Deref for ChunkRef<'_> {
    type Target = Chunk;

    fn deref(&self) -> &Chunk {
        match self {
            ChunkRef::Borrowed(chunk) => chunk,
            ChunkRef::Loaded(chunk) => chunk,
        }
    }
}

type Entry<'a> = (u64, SlotRef<'a>);
type ToEntry<'a> = fn((&'a u64, &'a Slot)) -> Entry<'a>;
type Chunks<'a> =
    Chain<Map<btree_map::Range<'a, u64, Slot>, ToEntry<'a>>, option::IntoIter<Entry<'a>>>;

fn slot_ref<'a>((key, slot): (&'a u64, &'a Slot)) -> Entry<'a> {
    (*key, slot.as_ref())
}

impl Slot {
    fn as_ref(&self) -> SlotRef<'_> {
        match self {
            Slot::Here(chunk) => SlotRef::Here(chunk),
            Slot::Away(away) => SlotRef::Away(*away),
        }
    }
}

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

    fn chunk(&self, key: u64) -> Option<ChunkRef<'_>> {
        match &self.tail {
            Some((tail, chunk)) if *tail == key => Some(ChunkRef::Borrowed(chunk)),
            _ => Some(self.read(self.chunks.get(&key)?.as_ref())),
        }
    }

    /// A chunk to read, from the spill if it is away.
    fn read<'a>(&self, slot: SlotRef<'a>) -> ChunkRef<'a> {
        match slot {
            SlotRef::Here(chunk) => ChunkRef::Borrowed(chunk),
            SlotRef::Away(away) => {
                let spill = self.spill.as_ref().expect("a chunk away has a spill");
                ChunkRef::Loaded(spill.load(away))
            }
        }
    }

    /// The chunks numbered in `range`, ascending, the tail last.
    fn chunks_in<'a>(&'a self, range: impl RangeBounds<u64> + Clone) -> Chunks<'a> {
        let tail = self
            .tail
            .as_ref()
            .map(|(key, chunk)| (*key, SlotRef::Here(chunk)));
        let tree: Map<_, ToEntry<'a>> = self.chunks.range(range.clone()).map(slot_ref);
        tree.chain(tail.filter(|(key, _)| range.contains(key)))
    }

    pub fn get(&self, seq: u64) -> Option<MsgMeta> {
        let (key, off) = C::split(seq);
        self.chunk(key)?.get(off)
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.get(seq).is_some()
    }

    pub fn first(&self) -> Option<(u64, MsgMeta)> {
        self.ends.map(|(first, _)| first)
    }

    pub fn last(&self) -> Option<(u64, MsgMeta)> {
        self.ends.map(|(_, last)| last)
    }

    /// The lowest message (`first`) or the highest, found in the chunks (after a removal
    /// at that end).
    fn find_end(&self, first: bool) -> Option<(u64, MsgMeta)> {
        let mut chunks = self.chunks_in(..);
        let (key, slot) = match first {
            true => chunks.next(),
            false => chunks.next_back(),
        }?;
        let chunk = self.read(slot);
        let (off, meta) = match first {
            true => chunk.next_in(0, C::LEN as u32),
            false => chunk.prev_in(0, C::LEN as u32),
        }?;
        Some((C::join(key, off), meta))
    }

    /// Keeps `ends` right after `meta` was stored at `seq`.
    fn widen_ends(&mut self, seq: u64, meta: MsgMeta) {
        match &mut self.ends {
            Some((first, last)) => {
                if seq >= last.0 {
                    *last = (seq, meta);
                }
                if seq <= first.0 {
                    *first = (seq, meta);
                }
            }
            None => self.ends = Some(((seq, meta), (seq, meta))),
        }
    }

    /// Chunk `key` of the tree, in memory to be changed (read back if it was away).
    fn here_mut(&mut self, key: u64) -> Option<&mut Chunk> {
        let slot = self.chunks.get_mut(&key)?;
        if let Slot::Away(away) = *slot {
            let spill = self.spill.as_mut().expect("a chunk away has a spill");
            *slot = Slot::Here(spill.take(away));
        }
        if let Some(spill) = &mut self.spill {
            spill.touch(key);
        }
        match slot {
            Slot::Here(chunk) => Some(chunk),
            Slot::Away(_) => unreachable!("brought back above"),
        }
    }

    /// Sends the chunks touched least recently to the spill, beyond what it keeps in memory,
    /// and compacts the spill when its garbage outweighs it. After every change.
    fn settle(&mut self) {
        let Some(spill) = &mut self.spill else {
            return;
        };
        while let Some(key) = spill.next_to_send() {
            let Some(slot) = self.chunks.get_mut(&key) else {
                continue;
            };
            if let Slot::Here(chunk) = slot {
                chunk.seal();
                *slot = Slot::Away(spill.send(chunk));
            }
        }
        if spill.wants_compaction() {
            let away: Vec<(u64, Away)> = self
                .chunks
                .iter()
                .filter_map(|(key, slot)| match slot {
                    Slot::Away(away) => Some((*key, *away)),
                    Slot::Here(_) => None,
                })
                .collect();
            let ranges: Vec<(u64, u32)> = away.iter().map(|(_, a)| (a.at, a.len)).collect();
            let starts = spill.compact(&ranges);
            for ((key, away), at) in away.into_iter().zip(starts) {
                self.chunks.insert(key, Slot::Away(Away { at, ..away }));
            }
        }
    }

    /// From now on, sealed chunks beyond the `keep` touched last live in `file` (emptied
    /// first), not in memory.
    pub fn spill_to(&mut self, file: Arc<dyn MetaSpill>, keep: usize) {
        let mut spill = Spill::new(file, keep);
        for (key, slot) in &self.chunks {
            if let Slot::Here(_) = slot {
                spill.touch(*key);
            }
        }
        self.spill = Some(spill);
        self.settle();
    }

    /// Keeps `keep` sealed chunks in memory from now on (no-op without a spill).
    pub fn keep_resident(&mut self, keep: usize) {
        if let Some(spill) = &mut self.spill {
            spill.keep(keep);
            self.settle();
        }
    }

    /// Whether the chunks sent to the spill may wait in its memory and go out together
    /// (`Spill::batch`); turning it off writes out what waits (no-op without a spill).
    pub fn batch_spill_writes(&mut self, on: bool) {
        if let Some(spill) = &mut self.spill {
            spill.batch(on);
        }
    }

    /// Stores `meta` at `seq`, returning what was there. An append past the tail seals it
    /// into the tree and starts a new one.
    pub fn insert(&mut self, seq: u64, meta: MsgMeta) -> Option<MsgMeta> {
        let (key, off) = C::split(seq);
        let top = match &self.tail {
            Some((tail, _)) => Some(*tail),
            None => self.chunks.last_key_value().map(|(last, _)| *last),
        };
        // An append to the tail (the common case) touches no chunk of the tree: nothing to
        // settle.
        let mut settle = true;
        let old = match &mut self.tail {
            Some((tail, chunk)) if *tail == key => {
                settle = false;
                chunk.insert(off, meta)
            }
            _ if top.is_none_or(|top| top < key) => {
                match self.tail.take() {
                    Some((tail, mut chunk)) => {
                        chunk.seal();
                        self.chunks.insert(tail, Slot::Here(chunk));
                        if let Some(spill) = &mut self.spill {
                            spill.touch(tail);
                        }
                    }
                    None => {
                        if let Some(mut last) = self.chunks.last_entry() {
                            if let Slot::Here(chunk) = last.get_mut() {
                                chunk.seal();
                            }
                        }
                    }
                }
                let mut chunk = Chunk::new();
                chunk.insert(off, meta);
                self.tail = Some((key, chunk));
                None
            }
            _ => match self.here_mut(key) {
                Some(chunk) => chunk.insert(off, meta),
                None => {
                    self.chunks.insert(key, Slot::Here(Chunk::new()));
                    self.here_mut(key)
                        .expect("inserted above")
                        .insert(off, meta)
                }
            },
        };
        if old.is_none() {
            self.len += 1;
        }
        self.widen_ends(seq, meta);
        if settle {
            self.settle();
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
                // A sequence not stored leaves its chunk where it is (away stays away).
                if matches!(self.chunks.get(&key)?, Slot::Away(_)) && self.get(seq).is_none() {
                    return None;
                }
                let chunk = self.here_mut(key)?;
                let old = chunk.remove(off);
                if chunk.live() == 0 {
                    self.chunks.remove(&key);
                    if let Some(spill) = &mut self.spill {
                        spill.forget(key);
                    }
                }
                self.settle();
                old?
            }
        };
        self.len -= 1;
        if let Some((mut first, mut last)) = self.ends {
            if seq == first.0 {
                first = self.find_end(true).unwrap_or(last);
            }
            if seq == last.0 {
                last = self.find_end(false).unwrap_or(first);
            }
            self.ends = (self.len > 0).then_some((first, last));
        }
        Some(old)
    }

    pub fn clear(&mut self) {
        self.chunks.clear();
        self.tail = None;
        self.len = 0;
        self.ends = None;
        if let Some(spill) = &mut self.spill {
            spill.clear();
        }
    }

    /// Seals every chunk but the tail.
    pub fn seal(&mut self) {
        for slot in self.chunks.values_mut() {
            if let Slot::Here(chunk) = slot {
                chunk.seal();
            }
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
        Iter::over(self, range)
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
        let live = |(_, slot): Entry<'_>| slot.live() as u64;
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
        let entry = std::mem::size_of::<(u64, Slot)>();
        self.chunks_in(..)
            .map(|(_, slot)| match slot {
                SlotRef::Here(chunk) => chunk.heap_bytes() + entry,
                SlotRef::Away(_) => entry,
            })
            .sum()
    }

    /// The spill's live and garbage bytes, for tests.
    #[cfg(test)]
    pub(super) fn spill_bytes(&self) -> Option<(u64, u64)> {
        self.spill.as_ref().map(Spill::bytes)
    }

    /// Each chunk's number and layout, for tests.
    #[cfg(test)]
    pub(super) fn layouts(&self) -> Vec<(u64, &'static str)> {
        self.chunks_in(..)
            .map(|(key, slot)| match slot {
                SlotRef::Here(chunk) => (key, chunk.layout()),
                SlotRef::Away(_) => (key, "away"),
            })
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

/// A copy keeps every chunk in memory: the spill is its original's alone.
impl Clone for MetaMap {
    fn clone(&self) -> Self {
        let chunks = self
            .chunks_in(..)
            .filter(|(key, _)| self.tail.as_ref().is_none_or(|(tail, _)| tail != key))
            .map(|(key, slot)| (key, Slot::Here(Chunk::clone(&self.read(slot)))))
            .collect();
        MetaMap {
            chunks,
            tail: self.tail.clone(),
            len: self.len,
            ends: self.ends,
            spill: None,
        }
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
