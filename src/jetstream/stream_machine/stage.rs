//! Which sled keys one applied command changed, and staging exactly those writes.
//!
//! The in-memory `StreamGroup` is the truth after `apply`; this file works out the few keys
//! that now differ from sled without comparing whole states: from the command and its
//! outcome where they say it (an ack names its sequence, an append its stored and removed
//! sequences, a delivery its delivered ones), and from a small [`Before`] capture where they
//! do not (a purge reports only a count, so the stored sequences are captured before it; a
//! delivery may retire due entries it does not report, so those are captured too). Bulk and
//! rare commands capture more; the hot ones (append, ack, deliver) capture O(1) or O(due).
//! Consumer keys are `stage_consumers.rs`'s.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::consensus::{MachineError, MachineTxn};
use crate::jsapi::stream_config::StreamConfig;
use crate::jsapi::ApiError;
use crate::jscore::consumer::{ConsumerCommand, ConsumerState};
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};
use crate::jscore::stream::StreamState;

use super::block::{Block, Body};
use super::bodies::MessageStore;
use super::chunked::ChunkedMap;
use super::compact::SegmentUse;
use super::keys::{self, DedupEntryV1};
use super::segments::Segments;

/// What sled holds (with the writes staged so far), as far as staging needs to know without
/// reading it: kept by the machine, rebuilt by `load`, updated as writes are staged. If a
/// batch fails to commit, the group stops and the restart's `load` rebuilds it from sled.
#[derive(Debug, Default)]
pub struct Persisted {
    /// The stored stream config; `None` while the stream has no keys at all (a new stream
    /// writes the layout version and its config on its first apply).
    pub config: Option<StreamConfig>,
    /// Last written `s/state` value; an unchanged record is not rewritten.
    pub stream_record: Option<Bytes>,
    /// Ordinal of the oldest `d/` key.
    pub dedup_first: u64,
    /// Last written `c/<name>s` value per consumer in sled (empty: config staged, state
    /// record not written yet).
    pub consumers: BTreeMap<String, Bytes>,
    /// The layout version written to `v` (`None` while the stream has no keys).
    pub layout: Option<u8>,
    /// The `b/` blocks by first sequence.
    pub blocks: ChunkedMap<BlockInfo>,
    /// Per segment file, its share of `blocks` (`segments.rs`, `compact.rs`).
    pub segments: BTreeMap<u32, SegmentUse>,
    /// Sequences with an `x/` key.
    pub tombstones: BTreeSet<u64>,
    /// Sequences still in `m/` keys of layout 1.
    pub legacy: BTreeSet<u64>,
    /// Removed by this apply call from a block written before it: `finish` settles them.
    pub removed: Vec<u64>,
    /// The `c/<name>q<chunk>` keys in sled, per consumer.
    pub pending_chunks: BTreeMap<String, BTreeSet<u64>>,
    /// Sequences still in layout-1 `c/<name>p<seq>` keys, per consumer.
    pub legacy_pending: BTreeMap<String, BTreeSet<u64>>,
    /// Chunks whose entries this apply call changed, per consumer: `finish` rewrites them.
    pub dirty_chunks: BTreeMap<String, BTreeSet<u64>>,
    /// Consumers whose state record this apply call may have changed (all of them when set).
    pub dirty_states: BTreeSet<String>,
    pub all_states_dirty: bool,
    /// The `o/` origin positions in sled (`sources.rs`).
    pub sources: BTreeMap<String, u64>,
    /// The `s/sched` schedule clock in sled (0: none stored).
    pub schedule_clock: i64,
}

/// What is known about one `b/` block without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockInfo {
    pub last_seq: u64,
    /// Its messages still in the stream. Exact (load counts the same thing), so replicas
    /// and restarts drop a block at the same apply.
    pub live: u64,
    /// The messages written into it (live or not).
    pub written: u64,
    /// Its length in its segment (0 for a block kept in sled).
    pub len: u32,
    /// Where it starts in its segment (0 for a block kept in sled).
    pub offset: u64,
    /// The segment file holding it; `None` for a block kept in sled itself.
    pub segment: Option<u32>,
}

/// Largest block value: beyond it a new block starts. The unit the block cache holds and a
/// cold read fetches.
const BLOCK_BYTES: usize = 64 << 10;

/// State captured before applying a command: only what its outcome will not tell.
pub struct Before {
    pub(super) last_seq: u64,
    pub(super) dedup_entries: usize,
    /// Stored sequences, for commands whose outcome does not list removals.
    pub(super) message_seqs: Option<Vec<u64>>,
    /// Pending sequences per consumer, for commands that may remove many pending entries.
    pub(super) pending: Option<BTreeMap<String, Vec<u64>>>,
    /// For a delivery: the consumer's entries due at `now`, which it may retire unreported.
    pub(super) due: Vec<u64>,
}

impl Before {
    pub fn capture(group: &StreamGroup, command: &StreamCommand) -> Before {
        let stream = group.stream();
        // Commands whose outcome lists every removed message: no capture needed for them.
        // A consumer reset lists its removals but drops every pending entry of its consumer
        // unlisted (rare: the pending sets are captured).
        let lists_removals = match command {
            StreamCommand::Consumer {
                command: ConsumerCommand::Reset { .. },
                ..
            } => false,
            StreamCommand::Append(_)
            | StreamCommand::Consumer { .. }
            | StreamCommand::Sourced(_) => true,
            _ => false,
        };
        let unlisted_removals = matches!(
            command,
            StreamCommand::Purge(_) | StreamCommand::DeleteConsumer { .. }
        );
        let due = match command {
            StreamCommand::Consumer {
                name,
                command: ConsumerCommand::DeliverNext { now_nanos, .. },
            } => group
                .consumer(name)
                .map(|consumer| consumer.pending().due(*now_nanos).collect())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        Before {
            last_seq: stream.last_seq(),
            dedup_entries: stream.dedup_entry_count(),
            message_seqs: unlisted_removals.then(|| stream.seqs().collect()),
            pending: (!lists_removals).then(|| {
                group
                    .consumers()
                    .map(|(name, consumer)| (name.to_string(), pending_seqs(consumer)))
                    .collect()
            }),
            due,
        }
    }
}

fn pending_seqs(consumer: &ConsumerState) -> Vec<u64> {
    consumer.pending().iter().map(|(seq, _)| seq).collect()
}

/// Stages in `txn` every key `command` changed. Runs whatever the outcome: a refused
/// publish may still have aged out duplicate-window entries. `appended` is the body of an
/// Append command (the stream state keeps none).
#[allow(clippy::too_many_arguments)]
pub fn stage(
    persisted: &mut Persisted,
    store: &MessageStore,
    group: &StreamGroup,
    before: &Before,
    command: &StreamCommand,
    appended: Option<Body>,
    outcome: &Result<StreamOutcome, ApiError>,
    txn: &mut MachineTxn<'_>,
) -> Result<(), MachineError> {
    let removed = stage_messages(persisted, store, group, before, appended, outcome, txn);
    stage_dedup(persisted, group, before, txn)?;
    super::stage_consumers::stage_consumers(
        persisted, group, before, command, outcome, &removed, txn,
    )
}

/// Once per apply call, after its last command: the messages it stored as new blocks (also
/// handed to the message store, which serves them until sled has them), the blocks and
/// tombstones its removals settled, and the stream record.
pub fn finish(
    persisted: &mut Persisted,
    group: &StreamGroup,
    store: &MessageStore,
    txn: &mut MachineTxn<'_>,
) -> Result<(), MachineError> {
    let stream = group.stream();
    let segments = store
        .segments()
        .ok_or_else(|| MachineError::Corrupt("stream written before its load".into()))?;
    let touched = settle_removed(persisted, stream.first_seq(), store, &segments, txn);
    let applied = store.applied_bodies();
    let stored = block_msgs(stream, &applied);
    let extended = super::extend::extend_last_block(persisted, store, &segments, &stored, txn)?;
    write_blocks(persisted, store, &segments, &stored[extended..], txn)?;
    drop(stored);
    store.flushed();
    super::compact::compact(persisted, stream, store, &segments, touched, txn);
    stage_stream_record(persisted, group, txn);
    super::stage_consumers::finish_consumers(persisted, group, txn);
    super::sources::stage_sources(persisted, group, txn);
    Ok(())
}

/// The messages of `bodies` still in `stream`, as a block holds them (subjects and times
/// from the stream, headers and payloads from the bodies).
pub(super) fn block_msgs<'a>(
    stream: &'a StreamState,
    bodies: &'a [(u64, Body)],
) -> Vec<keys::BlockMsg<'a>> {
    bodies
        .iter()
        .filter_map(|(seq, body)| {
            let msg = stream.get(*seq)?;
            Some(keys::BlockMsg {
                seq: *seq,
                subject: msg.subject,
                headers: body.headers.as_deref(),
                payload: &body.payload,
                ts_nanos: msg.ts_nanos,
            })
        })
        .collect()
}

/// Writes `msgs` (ascending) as new blocks of up to [`BLOCK_BYTES`] at the end of the active
/// segment, stages their locators and pins them in the message store until sled has them.
pub(super) fn write_blocks(
    persisted: &mut Persisted,
    store: &MessageStore,
    segments: &Segments,
    msgs: &[keys::BlockMsg<'_>],
    txn: &mut MachineTxn<'_>,
) -> Result<(), MachineError> {
    let mut rest = msgs;
    while !rest.is_empty() {
        let take = fitting(rest, 0);
        let (block, after) = rest.split_at(take);
        rest = after;
        let value = keys::encode_block(block.iter().copied());
        let (first, last) = (block[0].seq, block[block.len() - 1].seq);
        let (locator, file) = segments.append(&value)?;
        if store.durable() {
            txn.sync_before(file);
        }
        store.stored(first, last, Block::decode(value)?);
        txn.insert(keys::block(first), locator.encode());
        let count = block.len() as u64;
        persisted.blocks.insert(
            first,
            BlockInfo {
                last_seq: last,
                live: count,
                written: count,
                len: locator.len,
                offset: locator.offset,
                segment: Some(locator.segment),
            },
        );
        persisted
            .segments
            .entry(locator.segment)
            .or_default()
            .append(u64::from(locator.len));
    }
    Ok(())
}

/// How many of `msgs` go into a block already `bytes` long: each while the block is under
/// [`BLOCK_BYTES`] before it (so a new block takes at least one).
pub(super) fn fitting(msgs: &[keys::BlockMsg<'_>], mut bytes: usize) -> usize {
    msgs.iter()
        .take_while(|msg| {
            let fits = bytes < BLOCK_BYTES;
            bytes += keys::block_msg_len(
                msg.subject.len(),
                msg.headers.map_or(0, <[u8]>::len),
                msg.payload.len(),
            );
            fits
        })
        .count()
}

/// Messages removed from written blocks: a block none of whose messages is left goes (with
/// its tombstones); otherwise a removed message at or above the stream's first sequence
/// gets a tombstone (below it, `load` skips it anyway: the first sequence never goes back).
/// Returns the segments that lost messages and still hold blocks.
fn settle_removed(
    persisted: &mut Persisted,
    first_seq: u64,
    store: &MessageStore,
    segments: &Segments,
    txn: &mut MachineTxn<'_>,
) -> BTreeSet<u32> {
    let mut emptied = Vec::new();
    let mut touched = BTreeSet::new();
    for seq in std::mem::take(&mut persisted.removed) {
        let Some((first, block)) = persisted.blocks.at_or_below_mut(seq) else {
            continue;
        };
        if seq > block.last_seq {
            continue;
        }
        block.live = block.live.saturating_sub(1);
        if let Some(segment) = block.segment {
            if let Some(used) = persisted.segments.get_mut(&segment) {
                used.lose(block);
                touched.insert(segment);
            }
        }
        if seq >= first_seq {
            txn.insert(keys::tombstone(seq), Bytes::new());
            persisted.tombstones.insert(seq);
        }
        if block.live == 0 {
            emptied.push(first);
        }
    }
    for first in emptied {
        let Some(block) = forget_block(persisted, first, txn) else {
            continue;
        };
        store.removed(first);
        if let Some(segment) = block.segment {
            retire_if_empty(persisted, segments, segment, txn);
        }
    }
    touched
}

/// Forgets block `first`: its key, its tombstones and its share of its segment (which the
/// caller retires if it was the last: [`retire_if_empty`]). Returns what was known of it.
pub(super) fn forget_block(
    persisted: &mut Persisted,
    first: u64,
    txn: &mut MachineTxn<'_>,
) -> Option<BlockInfo> {
    let block = persisted.blocks.remove(first)?;
    txn.remove(keys::block(first));
    if let Some(used) = block
        .segment
        .and_then(|segment| persisted.segments.get_mut(&segment))
    {
        used.drop_block(&block);
    }
    let inside: Vec<u64> = persisted
        .tombstones
        .range(first..=block.last_seq)
        .copied()
        .collect();
    for seq in inside {
        txn.remove(keys::tombstone(seq));
        persisted.tombstones.remove(&seq);
    }
    Some(block)
}

/// A segment none of whose blocks is left goes once sled forgot them durably.
pub(super) fn retire_if_empty(
    persisted: &mut Persisted,
    segments: &Segments,
    segment: u32,
    txn: &mut MachineTxn<'_>,
) {
    if persisted
        .segments
        .get(&segment)
        .is_some_and(|used| used.blocks == 0)
    {
        persisted.segments.remove(&segment);
        for path in segments.retire(segment) {
            txn.unlink_after_sync(path);
        }
    }
}

/// Message keys; returns the removed sequences. A stored message waits for `finish` to be
/// written in a block; a removed one is settled there too, unless it never reached sled
/// (stored by this same call) or sits in a layout-1 `m/` key (deleted at once).
fn stage_messages(
    persisted: &mut Persisted,
    store: &MessageStore,
    group: &StreamGroup,
    before: &Before,
    appended: Option<Body>,
    outcome: &Result<StreamOutcome, ApiError>,
    txn: &mut MachineTxn<'_>,
) -> Vec<u64> {
    let stream = group.stream();
    let removed = match (outcome, &before.message_seqs) {
        (_, Some(seqs)) => seqs
            .iter()
            .copied()
            .filter(|s| !stream.contains(*s))
            .collect(),
        (Ok(StreamOutcome::Appended(stored)), None) if stored.stored().is_some() => {
            let (seq, removed) = stored.stored().expect("checked");
            if let Some(body) = appended {
                store.applied(seq, body);
            }
            removed.to_vec()
        }
        (Ok(StreamOutcome::Removed { seqs }), None) => seqs.clone(),
        (Ok(StreamOutcome::Expired { removed, markers }), None) => {
            stage_markers(store, stream, markers);
            removed.clone()
        }
        (
            Ok(StreamOutcome::Scheduled {
                removed,
                markers,
                produced,
            }),
            None,
        ) => {
            // Markers come before the produced messages (the apply stores them first).
            stage_markers(store, stream, markers);
            for produced in produced.iter().filter(|p| stream.contains(p.seq)) {
                let body = Body {
                    headers: Some(Bytes::from(produced.headers.clone())),
                    payload: Bytes::from(produced.payload.clone()),
                };
                store.applied(produced.seq, body);
            }
            removed.clone()
        }
        (Ok(StreamOutcome::Consumer { removed, .. }), None) => removed.clone(),
        _ => Vec::new(),
    };
    let unflushed_from = store.first_applied().unwrap_or(u64::MAX);
    for &seq in &removed {
        if seq >= unflushed_from {
            continue;
        }
        if persisted.legacy.remove(&seq) {
            txn.remove(keys::message(seq));
        } else {
            persisted.removed.push(seq);
        }
    }
    removed
}

/// Markers are made by the apply: their body is the stream's marker headers.
fn stage_markers(store: &MessageStore, stream: &StreamState, markers: &[u64]) {
    let headers = stream.marker_headers().map(Bytes::from);
    for &seq in markers.iter().filter(|seq| stream.contains(**seq)) {
        let body = Body {
            headers: headers.clone(),
            payload: Bytes::new(),
        };
        store.applied(seq, body);
    }
}

/// Duplicate-window keys. The window is a queue: an apply pops entries at the front
/// (expiry) and then pushes at most at the back (a new id). Pushed entries are recognisable
/// because a new id is always recorded with a sequence assigned by this very apply.
fn stage_dedup(
    persisted: &mut Persisted,
    group: &StreamGroup,
    before: &Before,
    txn: &mut MachineTxn<'_>,
) -> Result<(), MachineError> {
    let stream = group.stream();
    let after = stream.dedup_entry_count();
    let pushed = stream
        .dedup_entries()
        .rev()
        .take_while(|(_, _, seq)| seq.is_some_and(|seq| seq > before.last_seq))
        .count();
    let popped = (before.dedup_entries + pushed)
        .checked_sub(after)
        .filter(|popped| *popped <= before.dedup_entries)
        .ok_or_else(|| {
            MachineError::Corrupt("duplicate window changed other than at its ends".into())
        })?;
    for ordinal in persisted.dedup_first..persisted.dedup_first + popped as u64 {
        txn.remove(keys::dedup(ordinal));
    }
    persisted.dedup_first += popped as u64;
    let first_pushed = persisted.dedup_first + (after - pushed) as u64;
    for (offset, (ts_nanos, msg_id, seq)) in stream.dedup_entries().skip(after - pushed).enumerate()
    {
        let entry = DedupEntryV1 {
            ts_nanos,
            msg_id: msg_id.to_string(),
            seq,
        };
        txn.insert(
            keys::dedup(first_pushed + offset as u64),
            keys::encode(&entry),
        );
    }
    Ok(())
}

/// Layout, stream config and `s/state`, each only when it changed.
fn stage_stream_record(persisted: &mut Persisted, group: &StreamGroup, txn: &mut MachineTxn<'_>) {
    let stream = group.stream();
    if persisted.layout != Some(keys::LAYOUT_V4) {
        txn.insert(keys::LAYOUT, vec![keys::LAYOUT_V4]);
        persisted.layout = Some(keys::LAYOUT_V4);
    }
    if persisted.config.as_ref() != Some(stream.config()) {
        let json = serde_json::to_vec(stream.config()).expect("config serializes");
        let mut value = vec![keys::VALUE_V1];
        value.extend_from_slice(&json);
        txn.insert(keys::STREAM_CONFIG, value);
        persisted.config = Some(stream.config().clone());
    }
    let record = keys::encode(&keys::StreamRecordV1::new(
        stream.scalars(),
        persisted.dedup_first,
    ));
    if persisted.stream_record.as_ref() != Some(&record) {
        txn.insert(keys::STREAM_STATE, record.clone());
        persisted.stream_record = Some(record);
    }
    if persisted.schedule_clock != stream.schedule_clock() {
        txn.insert(keys::SCHEDULE_CLOCK, keys::encode(&stream.schedule_clock()));
        persisted.schedule_clock = stream.schedule_clock();
    }
}
