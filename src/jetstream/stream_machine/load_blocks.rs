//! `load`'s pass over a stream's `b/` keys: every stored message's metadata into the stream
//! being restored, and what `Persisted` keeps of each block. A block in a segment that has a
//! summary is read from the summary (a few bytes a message, ADR 0028); any other block is read
//! and checked whole, and a segment read that way gets its summary written for the next load.

use std::collections::{BTreeMap, BTreeSet};

use crate::consensus::{MachineError, MachineView};
use crate::jsapi::stream_config::StorageType;
use crate::jscore::stream::{stored_size, MsgInfo, Restoring, SubjectId};

use super::chunked::ChunkedMap;
use super::compact::SegmentUse;
use super::keys;
use super::read_ahead;
use super::segments::{Locator, Segments};
use super::stage::BlockInfo;
use super::summary::{self, MsgMetaRef, SegmentSummary};

/// The blocks found, by first sequence, and how many of them each segment holds.
pub struct LoadedBlocks {
    pub blocks: ChunkedMap<BlockInfo>,
    pub segments: BTreeMap<u32, SegmentUse>,
}

/// Which messages of the blocks are still in the stream: those at or above its first
/// sequence and without a tombstone (see `stage::settle_removed`).
pub struct Live<'a> {
    pub first_seq: u64,
    pub tombstones: &'a BTreeSet<u64>,
}

/// The pass, with the summaries read ahead of it (`read_ahead.rs`).
pub fn load_blocks(
    view: &MachineView,
    segments: &Segments,
    storage: StorageType,
    live: Live<'_>,
    restoring: &mut Restoring,
) -> Result<LoadedBlocks, MachineError> {
    read_ahead::while_reading_ahead(segments, || {
        load_all(view, segments, storage, live, restoring)
    })
}

fn load_all(
    view: &MachineView,
    segments: &Segments,
    storage: StorageType,
    live: Live<'_>,
    restoring: &mut Restoring,
) -> Result<LoadedBlocks, MachineError> {
    let mut summaries = Summaries::new(segments);
    let mut loaded = LoadedBlocks {
        blocks: ChunkedMap::new(),
        segments: BTreeMap::new(),
    };
    let mut ids: Vec<Option<SubjectId>> = Vec::new();
    for item in view.scan_prefix(keys::BLOCK_PREFIX) {
        let (key, value) = item?;
        let first = keys::parse_u64_key(keys::BLOCK_PREFIX, &key)?;
        let locator = Locator::decode(&value)?;
        let mut block = BlockLoad {
            first: None,
            last_seq: first,
            live: 0,
            written: 0,
        };
        // The subject ids of the block's subjects (by their index in its summary), each
        // resolved by the first of its messages that `restoring` takes.
        ids.clear();
        let mut take = |msg: MsgMetaRef<'_>, slot: Option<usize>| {
            block.first.get_or_insert(msg.seq);
            block.last_seq = msg.seq;
            block.written += 1;
            if msg.seq < live.first_seq || live.tombstones.contains(&msg.seq) {
                return;
            }
            let headers_len = msg.headers.map_or(0, <[u8]>::len);
            let info = MsgInfo {
                subject: msg.subject,
                ts_nanos: msg.ts_nanos,
                stored_size: stored_size(storage, msg.subject.len(), headers_len, msg.payload_len),
            };
            match slot.and_then(|slot| ids.get(slot).copied().flatten()) {
                Some(id) => restoring.push_as(msg.seq, id, info, msg.headers),
                None => {
                    let id = restoring.push(msg.seq, info, msg.headers);
                    if let Some(slot) = slot {
                        if ids.len() <= slot {
                            ids.resize(slot + 1, None);
                        }
                        ids[slot] = Some(id);
                    }
                }
            }
            block.live += 1;
        };
        let summarized = locator.is_some_and(|locator| {
            summaries
                .of(locator.segment)
                .is_some_and(|summary| summary.for_each(locator, |msg, slot| take(msg, Some(slot))))
        });
        if !summarized {
            let value = match locator {
                Some(locator) => segments.read(locator)?,
                None => value,
            };
            let msgs = keys::parse_block(&value)?;
            msgs.iter().for_each(|msg| take(msg.into(), None));
            if let Some(locator) = locator {
                summaries.record(locator, &msgs);
            }
        }
        if block.first != Some(first) {
            return Err(MachineError::Corrupt(format!(
                "message block {first} does not start at its key"
            )));
        }
        let segment = locator.map(|locator| locator.segment);
        let info = BlockInfo {
            last_seq: block.last_seq,
            live: block.live,
            written: block.written,
            len: locator.map_or(0, |locator| locator.len),
            offset: locator.map_or(0, |locator| locator.offset),
            segment,
        };
        if let Some(segment) = segment {
            loaded.segments.entry(segment).or_default().found(&info);
        }
        loaded.blocks.insert(first, info);
    }
    for (&segment, used) in loaded.segments.iter_mut() {
        used.file_len(segments.file_len(segment)?);
    }
    summaries.write_new();
    Ok(loaded)
}

struct BlockLoad {
    first: Option<u64>,
    last_seq: u64,
    live: u64,
    written: u64,
}

/// The summaries `load` reads (the last segment's kept: blocks come in sequence order, and
/// so mostly segment by segment) and the ones it writes for segments whose summary lacked
/// blocks (none, or one written while the segment was active: a prefix of it).
struct Summaries<'s> {
    segments: &'s Segments,
    current: Option<(u32, Option<SegmentSummary>)>,
    /// Segments with blocks their summary lacks: every block's record, by offset (what
    /// their summary had, and the blocks read whole), written at the end.
    new: BTreeMap<u32, BTreeMap<u64, Vec<u8>>>,
}

impl<'s> Summaries<'s> {
    fn new(segments: &'s Segments) -> Self {
        Summaries {
            segments,
            current: None,
            new: BTreeMap::new(),
        }
    }

    fn of(&mut self, segment: u32) -> Option<&SegmentSummary> {
        if self.current.as_ref().is_none_or(|(id, _)| *id != segment) {
            let read = SegmentSummary::read(&self.segments.summary_path(segment));
            self.current = Some((segment, read));
        }
        self.current
            .as_ref()
            .and_then(|(_, summary)| summary.as_ref())
    }

    /// A block read whole (its segment's summary, read by [`of`](Self::of) just before,
    /// lacks it): its record goes into its segment's new summary, which starts with what
    /// the summary had.
    fn record(&mut self, locator: Locator, msgs: &[keys::BlockMsg<'_>]) {
        let segment = locator.segment;
        let records = self
            .new
            .entry(segment)
            .or_insert_with(|| match &self.current {
                Some((id, Some(summary))) if *id == segment => summary.records(),
                _ => BTreeMap::new(),
            });
        let record = summary::encode_record(locator.offset, locator.len, msgs);
        records.insert(locator.offset, record);
    }

    /// Every segment is complete at a load (the next block goes to a new one): the ones read
    /// whole get their summary now. A failure only costs the next load the same reads.
    fn write_new(self) {
        for (segment, records) in self.new {
            let records: Vec<Vec<u8>> = records.into_values().collect();
            let path = self.segments.summary_path(segment);
            if let Err(error) = summary::write(&path, &records) {
                tracing::debug!(path = %path.display(), %error, "writing a segment summary");
            }
        }
    }
}
