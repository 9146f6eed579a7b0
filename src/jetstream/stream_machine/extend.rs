//! A small apply call extends the stream's last block instead of starting one (layout 4).
//!
//! An apply call writes its messages as blocks (`stage::write_blocks`). A stream that gets a
//! message or two per call, as each of many streams does when one client publishes to all of
//! them, would get a block, a `b/` key, a locator and an index entry per message: 1,000
//! streams holding 1 GiB of 1 KiB messages took a million blocks, a sled database larger
//! than the messages and minutes of work at a restart. Instead, while the stream's last
//! block is the last thing written to the active segment and has room, the call's messages
//! go after it as a frame of their own (a complete `BLOCK_V2` value, its own checksum), and
//! the block's locator grows to cover it. A block is thus one or more frames back to back
//! (`block_format::parse_block`).
//!
//! Nothing written moves: until the batch holding the longer locator is written, sled's
//! locator ends before the frame and reads the block as it was; a crash in between leaves
//! the frame unreferenced, as a block written after the last batch would be. Readers find
//! the frame's messages in the frame itself, pinned in the message store until that batch
//! is written; then the block's range grows over them (`MessageStore::extended`).

use super::block::Block;
use super::bodies::MessageStore;
use super::keys;
use super::segments::{Locator, Segments};
use super::stage::{fitting, BlockInfo, Persisted};
use crate::consensus::{MachineError, MachineTxn};

/// Writes the first of `msgs` (ascending, all after the stream's last block) into the
/// stream's last block, as many as fit; returns how many it took (0: none, the caller
/// writes them as blocks of their own).
pub(super) fn extend_last_block(
    persisted: &mut Persisted,
    store: &MessageStore,
    segments: &Segments,
    msgs: &[keys::BlockMsg<'_>],
    txn: &mut MachineTxn<'_>,
) -> Result<usize, MachineError> {
    let Some((first, &before)) = persisted.blocks.last() else {
        return Ok(0);
    };
    let Some(segment) = before.segment else {
        return Ok(0);
    };
    if msgs.first().is_none_or(|msg| msg.seq <= before.last_seq) {
        return Ok(0);
    }
    let take = fitting(msgs, before.len as usize);
    if take == 0 {
        return Ok(0);
    }
    let taken = &msgs[..take];
    let frame = keys::encode_block(taken.iter().copied());
    let at = Locator {
        segment,
        offset: before.offset,
        len: before.len,
    };
    let Some((locator, file)) = segments.extend(at, &frame)? else {
        return Ok(0);
    };
    if store.durable() {
        txn.sync_before(file);
    }
    let last_seq = taken[take - 1].seq;
    store.extended(first, taken[0].seq, last_seq, Block::decode(frame)?);
    txn.insert(keys::block(first), locator.encode());
    let count = take as u64;
    let after = BlockInfo {
        last_seq,
        live: before.live + count,
        written: before.written + count,
        len: locator.len,
        ..before
    };
    persisted.blocks.insert(first, after);
    if let Some(used) = persisted.segments.get_mut(&segment) {
        used.extend(&before, &after);
    }
    Ok(take)
}
