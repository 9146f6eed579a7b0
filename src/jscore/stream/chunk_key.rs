//! Sequences cut into chunks, the unit of the stream's compact maps: a sequence is a chunk
//! number and an offset in it, and a chunk's presence bitmap is a word per 64 sequences.
//!
//! Two sizes: [`SeqChunks`] of 4096 for each subject's sequences (`seq_set.rs`), and
//! [`MetaChunks`] of 256 for message metadata (`meta_map.rs`). The metadata map keeps the
//! chunk being appended to open, 16 bytes a slot, until appends move past it, and two sealed
//! ones beside it, so its length bounds what every stream keeps: 4 KiB open a stream rather
//! than 16 (1024) or 64 (4096; heaptrack: 66 MB over 1000 streams of 3000 messages each,
//! `bench/HISTORY.md`). A sealed chunk of 256 costs the same per message but for ~200 bytes of
//! headers (under 1 byte a message).

/// Chunks of `1 << SHIFT` sequences.
pub(super) struct Chunking<const SHIFT: u32>;

pub(super) type SeqChunks = Chunking<12>;
pub(super) type MetaChunks = Chunking<8>;

impl<const SHIFT: u32> Chunking<SHIFT> {
    pub(super) const LEN: usize = 1 << SHIFT;
    /// Words of a chunk's bitmap.
    pub(super) const WORDS: usize = Self::LEN / 64;

    /// The chunk number of `seq`.
    pub(super) fn key(seq: u64) -> u64 {
        seq >> SHIFT
    }

    /// The chunk number of `seq` and its offset in the chunk.
    pub(super) fn split(seq: u64) -> (u64, u16) {
        (Self::key(seq), (seq & (Self::LEN as u64 - 1)) as u16)
    }

    /// The sequence at `offset` of chunk `key`.
    pub(super) fn join(key: u64, offset: u16) -> u64 {
        (key << SHIFT) | u64::from(offset)
    }
}
