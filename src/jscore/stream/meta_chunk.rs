//! One chunk of a [`MetaMap`](super::meta_map::MetaMap): the metadata of the messages whose
//! sequences share all but their low 8 bits (256 sequences, `chunk_key.rs`), in one of
//! three layouts:
//!
//! * **open**: a deque of slots from the lowest offset held to the highest, 16 bytes a slot.
//!   The chunk being appended to is open, and so is any chunk changed out of order, until
//!   the map seals it;
//! * **packed**: what a sealed chunk becomes when most of it is live. A bitmap says which
//!   offsets hold a message, and each field is a column of offsets from the chunk's smallest
//!   value, as narrow as the chunk's spread allows (a stream with one subject and equal
//!   sizes keeps 4 bytes of time a message, or nothing when the times are equal too);
//! * **few**: what a sealed chunk becomes when little of it is live, or what a packed one
//!   turns into as it empties: the live messages in a sorted list, 24 bytes each.
//!
//! Which layout a chunk has is not observable through the map. Not replicated by itself;
//! see `meta_map.rs`.

use std::collections::VecDeque;

mod codec;

use super::chunk_key::MetaChunks;

const CHUNK_LEN: usize = MetaChunks::LEN;
const WORDS: usize = MetaChunks::WORDS;
use super::message::MsgMeta;
use super::subject_index::SubjectId;

/// Bytes of one entry of a `Few` chunk.
const FEW_ENTRY: usize = std::mem::size_of::<(u16, MsgMeta)>();
/// A `Few` chunk that grows beyond this (half a chunk) opens again.
const FEW_MAX: usize = CHUNK_LEN / 2;
/// Makes a time's order that of its bits (so the column's base is its smallest time).
const SIGN: u64 = 1 << 63;

#[derive(Clone)]
pub(super) enum Chunk {
    Open(Open),
    Packed(Box<Packed>),
    Few(Vec<(u16, MsgMeta)>),
}

#[derive(Clone, Default)]
pub(super) struct Open {
    /// The offset of `slots[0]`; the first and last slots are occupied when any is.
    start: u16,
    slots: VecDeque<Option<MsgMeta>>,
    live: u16,
}

#[derive(Clone)]
pub(super) struct Packed {
    present: [u64; WORDS],
    live: u16,
    ts: Column,
    size: Column,
    subject: Column,
}

/// The smallest and largest value of a field over a chunk (empty: `min > max`).
#[derive(Clone, Copy)]
struct Span {
    min: u64,
    max: u64,
}

impl Default for Span {
    fn default() -> Self {
        Span {
            min: u64::MAX,
            max: 0,
        }
    }
}

impl Span {
    fn add(&mut self, value: u64) {
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }
}

/// One field of a packed chunk, per offset: `base` plus the stored value, in `width` bytes
/// (little-endian) an offset, as few as the chunk's spread needs: any count from 1 to 8, not
/// only a power of two. A chunk of a stream taking a few messages a second spans minutes,
/// whose nanosecond times need 5 bytes where a `u64` took 8 (1000 streams filled at once:
/// heaptrack counted 82 MB of sealed chunks at 10 M messages, most of it times).
#[derive(Clone)]
struct Column {
    base: u64,
    /// 0: every message of the chunk has `base` (`values` is empty).
    width: u8,
    values: Box<[u8]>,
}

impl Chunk {
    pub(super) fn new() -> Self {
        Chunk::Open(Open::default())
    }

    pub(super) fn live(&self) -> usize {
        match self {
            Chunk::Open(open) => usize::from(open.live),
            Chunk::Packed(packed) => usize::from(packed.live),
            Chunk::Few(few) => few.len(),
        }
    }

    pub(super) fn get(&self, off: u16) -> Option<MsgMeta> {
        match self {
            Chunk::Open(open) => open.get(off),
            Chunk::Packed(packed) => packed.get(off),
            Chunk::Few(few) => few_index(few, off).ok().map(|i| few[i].1),
        }
    }

    /// Stores `meta` at `off`, returning what was there. A packed chunk opens again first;
    /// a `Few` chunk does when it outgrows its list.
    pub(super) fn insert(&mut self, off: u16, meta: MsgMeta) -> Option<MsgMeta> {
        match self {
            Chunk::Open(open) => open.insert(off, meta),
            Chunk::Few(few) => {
                let old = match few_index(few, off) {
                    Ok(i) => Some(std::mem::replace(&mut few[i].1, meta)),
                    Err(i) => {
                        few.insert(i, (off, meta));
                        None
                    }
                };
                if few.len() > FEW_MAX {
                    self.open();
                }
                old
            }
            Chunk::Packed(_) => {
                self.open();
                self.insert(off, meta)
            }
        }
    }

    pub(super) fn remove(&mut self, off: u16) -> Option<MsgMeta> {
        let removed = match self {
            Chunk::Open(open) => open.remove(off),
            Chunk::Packed(packed) => packed.remove(off),
            Chunk::Few(few) => few_index(few, off).ok().map(|i| few.remove(i).1),
        };
        if let Chunk::Packed(packed) = self {
            if packed.live > 0 && usize::from(packed.live) * FEW_ENTRY * 2 < packed.bytes() {
                *self = Chunk::Few(self.entries());
            }
        }
        removed
    }

    /// Packs an open chunk in the smaller of the sealed layouts.
    pub(super) fn seal(&mut self) {
        let Chunk::Open(open) = self else {
            return;
        };
        if open.live == 0 {
            return;
        }
        let packed = Packed::build(open.iter(), open.live);
        *self = if usize::from(open.live) * FEW_ENTRY <= packed.bytes() {
            Chunk::Few(open.iter().collect())
        } else {
            Chunk::Packed(Box::new(packed))
        };
    }

    fn open(&mut self) {
        let mut open = Open::default();
        for (off, meta) in self.entries() {
            open.insert(off, meta);
        }
        *self = Chunk::Open(open);
    }

    fn entries(&self) -> Vec<(u16, MsgMeta)> {
        if let Chunk::Open(open) = self {
            return open.iter().collect();
        }
        let mut entries = Vec::with_capacity(self.live());
        let mut next = 0u32;
        while let Some((off, meta)) = self.next_in(next, CHUNK_LEN as u32) {
            entries.push((off, meta));
            next = u32::from(off) + 1;
        }
        entries
    }

    /// The first message at an offset in `lo..hi`.
    pub(super) fn next_in(&self, lo: u32, hi: u32) -> Option<(u16, MsgMeta)> {
        if lo >= hi {
            return None;
        }
        match self {
            Chunk::Open(open) => open.next_in(lo, hi),
            Chunk::Packed(packed) => {
                let off = packed.next_present(lo, hi)?;
                Some((off, packed.read(off)))
            }
            Chunk::Few(few) => {
                let i = few.partition_point(|(off, _)| u32::from(*off) < lo);
                few.get(i).filter(|(off, _)| u32::from(*off) < hi).copied()
            }
        }
    }

    /// The last message at an offset in `lo..hi`.
    pub(super) fn prev_in(&self, lo: u32, hi: u32) -> Option<(u16, MsgMeta)> {
        if lo >= hi {
            return None;
        }
        match self {
            Chunk::Open(open) => open.prev_in(lo, hi),
            Chunk::Packed(packed) => {
                let off = packed.prev_present(lo, hi)?;
                Some((off, packed.read(off)))
            }
            Chunk::Few(few) => {
                let i = few.partition_point(|(off, _)| u32::from(*off) < hi);
                i.checked_sub(1)
                    .map(|i| few[i])
                    .filter(|(off, _)| u32::from(*off) >= lo)
            }
        }
    }

    /// Messages at offsets up to `off`, inclusive.
    pub(super) fn count_up_to(&self, off: u16) -> usize {
        match self {
            Chunk::Open(open) => open
                .slots
                .iter()
                .take((usize::from(off) + 1).saturating_sub(usize::from(open.start)))
                .filter(|slot| slot.is_some())
                .count(),
            Chunk::Packed(packed) => {
                let word = usize::from(off) / 64;
                let bit = u32::from(off) % 64;
                let below: u32 = packed.present[..word].iter().map(|w| w.count_ones()).sum();
                let mask = if bit == 63 {
                    u64::MAX
                } else {
                    (1u64 << (bit + 1)) - 1
                };
                (below + (packed.present[word] & mask).count_ones()) as usize
            }
            Chunk::Few(few) => few.partition_point(|(o, _)| *o <= off),
        }
    }

    /// Heap bytes this chunk holds (for tests and the bench's accounting).
    #[cfg(test)]
    pub(super) fn heap_bytes(&self) -> usize {
        match self {
            Chunk::Open(open) => open.slots.capacity() * std::mem::size_of::<Option<MsgMeta>>(),
            Chunk::Packed(packed) => std::mem::size_of::<Packed>() + packed.bytes(),
            Chunk::Few(few) => few.capacity() * FEW_ENTRY,
        }
    }

    #[cfg(test)]
    pub(super) fn layout(&self) -> &'static str {
        match self {
            Chunk::Open(_) => "open",
            Chunk::Packed(_) => "packed",
            Chunk::Few(_) => "few",
        }
    }
}

fn few_index(few: &[(u16, MsgMeta)], off: u16) -> Result<usize, usize> {
    few.binary_search_by_key(&off, |(o, _)| *o)
}

impl Open {
    fn get(&self, off: u16) -> Option<MsgMeta> {
        let index = usize::from(off.checked_sub(self.start)?);
        *self.slots.get(index)?
    }

    fn insert(&mut self, off: u16, meta: MsgMeta) -> Option<MsgMeta> {
        if !self.slots.is_empty() && usize::from(off) == usize::from(self.start) + self.slots.len()
        {
            self.slots.push_back(Some(meta));
            self.live += 1;
            return None;
        }
        if self.slots.is_empty() {
            self.start = off;
        }
        while off < self.start {
            self.slots.push_front(None);
            self.start -= 1;
        }
        let index = usize::from(off - self.start);
        if index >= self.slots.len() {
            self.slots.resize(index + 1, None);
        }
        let old = self.slots[index].replace(meta);
        if old.is_none() {
            self.live += 1;
        }
        old
    }

    fn remove(&mut self, off: u16) -> Option<MsgMeta> {
        let index = usize::from(off.checked_sub(self.start)?);
        let old = self.slots.get_mut(index)?.take()?;
        self.live -= 1;
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.start += 1;
        }
        while let Some(None) = self.slots.back() {
            self.slots.pop_back();
        }
        // A queue that drained keeps no high-water mark of slots.
        if self.slots.capacity() > 64 && self.slots.len() * 4 < self.slots.capacity() {
            self.slots.shrink_to_fit();
        }
        Some(old)
    }

    /// Its messages, ascending.
    fn iter(&self) -> impl Iterator<Item = (u16, MsgMeta)> + Clone + '_ {
        let start = usize::from(self.start);
        let slots = self.slots.iter().enumerate();
        slots.filter_map(move |(i, slot)| slot.map(|meta| ((start + i) as u16, meta)))
    }

    fn next_in(&self, lo: u32, hi: u32) -> Option<(u16, MsgMeta)> {
        let start = u32::from(self.start);
        let from = lo.saturating_sub(start) as usize;
        let to = (hi.saturating_sub(start) as usize).min(self.slots.len());
        (from..to).find_map(|i| self.slots[i].map(|meta| ((start + i as u32) as u16, meta)))
    }

    fn prev_in(&self, lo: u32, hi: u32) -> Option<(u16, MsgMeta)> {
        let start = u32::from(self.start);
        let from = lo.saturating_sub(start) as usize;
        let to = (hi.saturating_sub(start) as usize).min(self.slots.len());
        (from..to)
            .rev()
            .find_map(|i| self.slots[i].map(|meta| ((start + i as u32) as u16, meta)))
    }
}

impl Packed {
    /// `live` entries, ascending: one pass for the bitmap and each field's span, one per
    /// column to fill.
    fn build(entries: impl Iterator<Item = (u16, MsgMeta)> + Clone, live: u16) -> Packed {
        let ts = |meta: &MsgMeta| meta.ts_nanos as u64 ^ SIGN;
        let size = |meta: &MsgMeta| u64::from(meta.size);
        let subject = |meta: &MsgMeta| u64::from(meta.subject.raw());
        let mut present = [0u64; WORDS];
        let mut len = 0;
        let mut spans = [Span::default(); 3];
        for (off, meta) in entries.clone() {
            present[usize::from(off) / 64] |= 1 << (off % 64);
            len = usize::from(off) + 1;
            spans[0].add(ts(&meta));
            spans[1].add(size(&meta));
            spans[2].add(subject(&meta));
        }
        Packed {
            present,
            live,
            ts: Column::build(len, entries.clone(), ts, spans[0]),
            size: Column::build(len, entries.clone(), size, spans[1]),
            subject: Column::build(len, entries, subject, spans[2]),
        }
    }

    fn bytes(&self) -> usize {
        std::mem::size_of_val(&self.present)
            + self.ts.bytes()
            + self.size.bytes()
            + self.subject.bytes()
    }

    fn has(&self, off: u16) -> bool {
        self.present[usize::from(off) / 64] & (1 << (off % 64)) != 0
    }

    fn get(&self, off: u16) -> Option<MsgMeta> {
        self.has(off).then(|| self.read(off))
    }

    fn read(&self, off: u16) -> MsgMeta {
        let off = usize::from(off);
        MsgMeta {
            ts_nanos: (self.ts.get(off) ^ SIGN) as i64,
            size: self.size.get(off) as u32,
            subject: SubjectId::from_raw(self.subject.get(off) as u32),
        }
    }

    fn remove(&mut self, off: u16) -> Option<MsgMeta> {
        let meta = self.get(off)?;
        self.present[usize::from(off) / 64] &= !(1 << (off % 64));
        self.live -= 1;
        Some(meta)
    }

    fn next_present(&self, lo: u32, hi: u32) -> Option<u16> {
        let mut word = (lo / 64) as usize;
        let mut bits = self.present[word] & (u64::MAX << (lo % 64));
        loop {
            if bits != 0 {
                let off = word as u32 * 64 + bits.trailing_zeros();
                return (off < hi).then_some(off as u16);
            }
            word += 1;
            if word >= WORDS || word as u32 * 64 >= hi {
                return None;
            }
            bits = self.present[word];
        }
    }

    fn prev_present(&self, lo: u32, hi: u32) -> Option<u16> {
        let last = hi - 1;
        let mut word = (last / 64) as usize;
        let mut bits = self.present[word] & (u64::MAX >> (63 - last % 64));
        loop {
            if bits != 0 {
                let off = word as u32 * 64 + 63 - bits.leading_zeros();
                return (off >= lo).then_some(off as u16);
            }
            if word == 0 || (word as u32 * 64) <= lo {
                return None;
            }
            word -= 1;
            bits = self.present[word];
        }
    }
}

impl Column {
    /// A column of `len` offsets holding `field` of each entry, whose values lie in `span`
    /// (offsets not given hold `base`).
    fn build(
        len: usize,
        entries: impl Iterator<Item = (u16, MsgMeta)>,
        field: impl Fn(&MsgMeta) -> u64,
        span: Span,
    ) -> Column {
        let base = if span.min > span.max { 0 } else { span.min };
        let spread = span.max.saturating_sub(base);
        let width = (u64::BITS - spread.leading_zeros()).div_ceil(8) as usize;
        let mut values = vec![0u8; len * width];
        if width > 0 {
            for (off, meta) in entries {
                let at = usize::from(off) * width;
                let delta = (field(&meta) - base).to_le_bytes();
                values[at..at + width].copy_from_slice(&delta[..width]);
            }
        }
        Column {
            base,
            width: width as u8,
            values: values.into_boxed_slice(),
        }
    }

    fn get(&self, off: usize) -> u64 {
        let width = usize::from(self.width);
        let mut delta = [0u8; 8];
        let at = off * width;
        delta[..width].copy_from_slice(&self.values[at..at + width]);
        self.base.wrapping_add(u64::from_le_bytes(delta))
    }

    fn bytes(&self) -> usize {
        self.values.len()
    }
}
