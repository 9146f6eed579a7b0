//! Sequences cut into chunks of 4096, the unit of the stream's compact maps (`meta_map.rs`
//! for message metadata, `seq_set.rs` for each subject's sequences): a sequence is a chunk
//! number and a 12-bit offset in it, and a chunk's presence bitmap is 64 words.

pub(super) const CHUNK_SHIFT: u32 = 12;
pub(super) const CHUNK_LEN: usize = 1 << CHUNK_SHIFT;
/// Words of a chunk's bitmap.
pub(super) const WORDS: usize = CHUNK_LEN / 64;

/// The chunk number of `seq`.
pub(super) fn key(seq: u64) -> u64 {
    seq >> CHUNK_SHIFT
}

/// The chunk number of `seq` and its offset in the chunk.
pub(super) fn split(seq: u64) -> (u64, u16) {
    (key(seq), (seq & (CHUNK_LEN as u64 - 1)) as u16)
}

/// The sequence at `offset` of chunk `key`.
pub(super) fn join(key: u64, offset: u16) -> u64 {
    (key << CHUNK_SHIFT) | u64::from(offset)
}
