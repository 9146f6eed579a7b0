//! [`Iter`]: a [`MetaMap`] range walked chunk by chunk, from either end, reading a chunk
//! that is away from the spill without bringing it back into the map.

use std::ops::{Bound, RangeBounds};

use super::{ChunkRef, Chunks, MetaMap, C};
use crate::jscore::stream::message::MsgMeta;

/// Ascending (and, from the back, descending) `(seq, meta)` pairs of a [`MetaMap`] range.
pub(in crate::jscore::stream) struct Iter<'a> {
    map: &'a MetaMap,
    chunks: Chunks<'a>,
    /// The sequences not yet yielded from either end: `lo..hi`.
    lo: u64,
    hi: u64,
    front: Option<(u64, ChunkRef<'a>)>,
    back: Option<(u64, ChunkRef<'a>)>,
}

impl<'a> Iter<'a> {
    /// The messages of `map` whose sequences are in `range`.
    pub(super) fn over(map: &'a MetaMap, range: impl RangeBounds<u64>) -> Iter<'a> {
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
            true => map.chunks_in(C::split(lo).0..=C::split(hi - 1).0),
            false => map.chunks_in(1..1),
        };
        Iter {
            map,
            chunks,
            lo,
            hi,
            front: None,
            back: None,
        }
    }

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
            if let Some((key, chunk)) = &self.front {
                let key = *key;
                let (lo, hi) = self.window(key);
                if let Some((off, meta)) = chunk.next_in(lo, hi) {
                    let seq = C::join(key, off);
                    self.lo = seq + 1;
                    return Some((seq, meta));
                }
                self.front = None;
            }
            match self.chunks.next() {
                Some((key, slot)) => self.front = Some((key, self.map.read(slot))),
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
            if let Some((key, chunk)) = &self.back {
                let key = *key;
                let (lo, hi) = self.window(key);
                if let Some((off, meta)) = chunk.prev_in(lo, hi) {
                    let seq = C::join(key, off);
                    self.hi = seq;
                    return Some((seq, meta));
                }
                self.back = None;
            }
            match self.chunks.next_back() {
                Some((key, slot)) => self.back = Some((key, self.map.read(slot))),
                None => {
                    self.back = Some(self.front.take()?);
                }
            }
        }
    }
}
