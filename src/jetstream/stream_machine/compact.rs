//! Segment compaction: a segment whose blocks have lost most of their messages (interior
//! removals: a KV key's old revisions, work-queue acks out of order, `MSG.DELETE`) has its
//! live messages rewritten as new blocks at the end of the active segment, so that it goes
//! (ADR 0029). Without it one live message kept its whole 8 MiB segment.
//!
//! Local to the replica: which blocks and segments hold a message is not replicated state
//! (load reads whatever layout a replica wrote). Run by `finish`, the only writer of the
//! group's segments, for the segments its removals touched, in the same sled batch: the new
//! blocks' segment is synced before the batch moves the keys to them, and the old segment
//! is removed only once sled's forgetting it is durable.

use std::collections::BTreeSet;

use crate::consensus::MachineTxn;
use crate::jscore::stream::StreamState;

use super::bodies::MessageStore;
use super::segments::Segments;
use super::stage::{self, BlockInfo, Persisted};

/// A segment's share of the stream's blocks, in bytes of its file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentUse {
    /// Blocks of the stream it holds.
    pub blocks: u64,
    /// Bytes written to its file (its length): removed blocks' bytes stay until it goes.
    pub written: u64,
    /// Of those, the bytes of its blocks' live messages, estimated per block as its length
    /// times the share of its messages still in the stream.
    pub live: u64,
}

impl SegmentUse {
    /// A block of `len` bytes appended to it, all of its messages live.
    pub fn append(&mut self, len: u64) {
        self.blocks += 1;
        self.written += len;
        self.live += len;
    }

    /// Block `before` grew to `after` by a frame appended to the file (`extend.rs`).
    pub fn extend(&mut self, before: &BlockInfo, after: &BlockInfo) {
        self.written += u64::from(after.len - before.len);
        self.live = (self.live + after.live_bytes()).saturating_sub(before.live_bytes());
    }

    /// A block found in it by `load` (whose file length is counted by [`Self::file_len`]).
    pub fn found(&mut self, block: &BlockInfo) {
        self.blocks += 1;
        self.live += block.live_bytes();
    }

    /// Its file's length, as `load` finds it.
    pub fn file_len(&mut self, len: u64) {
        self.written = len;
    }

    /// `block` lost a message: it had one more live than it has now.
    pub fn lose(&mut self, block: &BlockInfo) {
        let before = BlockInfo {
            live: block.live + 1,
            ..*block
        };
        self.live = self
            .live
            .saturating_sub(before.live_bytes() - block.live_bytes());
    }

    /// `block` goes.
    pub fn drop_block(&mut self, block: &BlockInfo) {
        self.blocks = self.blocks.saturating_sub(1);
        self.live = self.live.saturating_sub(block.live_bytes());
    }

    /// Whether rewriting its live messages is worth it: less than half of its file is live
    /// (as nats-server compacts a block), so the rewrite is smaller than what it frees and a
    /// segment never holds more than twice its live messages for long.
    pub fn worth_compacting(&self) -> bool {
        self.live > 0 && self.live * 2 < self.written
    }
}

impl BlockInfo {
    /// Its bytes in proportion to its live messages.
    pub fn live_bytes(&self) -> u64 {
        u64::from(self.len) * self.live / self.written.max(1)
    }
}

/// Compacts the segments of `touched` worth it (not the active one). A block that cannot be
/// read (damage, which the read reported) leaves its segment as it is.
pub fn compact(
    persisted: &mut Persisted,
    stream: &StreamState,
    store: &MessageStore,
    segments: &Segments,
    touched: BTreeSet<u32>,
    txn: &mut MachineTxn<'_>,
) {
    let active = segments.active();
    for segment in touched {
        let worth = persisted
            .segments
            .get(&segment)
            .is_some_and(SegmentUse::worth_compacting);
        if !worth || Some(segment) == active {
            continue;
        }
        if let Err(error) = compact_one(persisted, stream, store, segments, segment, txn) {
            tracing::warn!(segment, %error, "compacting a segment");
        }
    }
}

fn compact_one(
    persisted: &mut Persisted,
    stream: &StreamState,
    store: &MessageStore,
    segments: &Segments,
    segment: u32,
    txn: &mut MachineTxn<'_>,
) -> Result<(), crate::consensus::MachineError> {
    let ranges: Vec<(u64, u64)> = persisted
        .blocks
        .iter()
        .filter(|(_, block)| block.segment == Some(segment))
        .map(|(first, block)| (first, block.last_seq))
        .collect();
    // Every live body first, read by sequence over the block's whole range: a frame that
    // extends the block (`extend.rs`) is held apart from it in the store until its batch is
    // written, so the block as read may not hold all of it yet. A segment is compacted whole
    // or not at all: a body that cannot be read (damage, which the read reported) leaves it.
    let mut moved = Vec::with_capacity(ranges.len());
    for &(first, last) in &ranges {
        let seqs: Vec<u64> = (first..=last).filter(|seq| stream.contains(*seq)).collect();
        let mut bodies = Vec::with_capacity(seqs.len());
        for (seq, body) in seqs.iter().zip(store.bodies(seqs.iter().copied())) {
            let Some(body) = body else {
                return Ok(());
            };
            bodies.push((*seq, body));
        }
        moved.push((first, bodies));
    }
    for (first, bodies) in moved {
        let msgs = stage::block_msgs(stream, &bodies);
        let Some(old) = stage::forget_block(persisted, first, txn) else {
            continue;
        };
        stage::write_blocks(persisted, store, segments, &msgs, txn)?;
        let replaced = msgs.first().is_some_and(|msg| msg.seq == first);
        store.rewritten(first, old.last_seq, replaced);
    }
    stage::retire_if_empty(persisted, segments, segment, txn);
    Ok(())
}
