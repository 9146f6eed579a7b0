//! `StreamMachine`: the `GroupMachine` of a stream group. `apply` decodes a command, runs
//! it through the in-memory `StreamGroup` (jscore) and stages the sled writes it caused
//! (`stage.rs`); `load` rebuilds the `StreamGroup` from the group's keys (`keys.rs`): the
//! messages' metadata only, read from the segment summaries or the blocks without copying a
//! body (`load_blocks.rs`). The bodies are the
//! `MessageStore`'s (`bodies.rs`), which `finish` hands each new block and `submitted` tells
//! when sled will have it.
//! One per stream group on every replica, owned by the group's state-machine task.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::consensus::machine::{ApplyPosition, ImportFn, Imported, StoredValueExport};
use crate::consensus::{
    Command, GroupMachine, MachineError, MachineTxn, MachineView, Response, WriteTicket,
};
use crate::jsapi::stream_config::{StorageType, StreamConfig};
use crate::jsapi::ApiError;
use crate::jscore::consumer::{ConsumerState, PendingEntry};
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};
use crate::jscore::stream::{
    stored_size, value_body, AppendOutcome, AppendRequest, CounterBase, DedupRecord, MetaSpill,
    MsgInfo, ScheduleBody, StreamState,
};

use super::block::Body;
use super::bodies::MessageStore;
use super::cache::BlockCache;
use super::entry;
use super::keys::{self, ConsumerConfigV1, ConsumerKey, ConsumerStateV1, DedupEntryV1};
use super::load_blocks::{load_blocks, Live, LoadedBlocks};
use super::meta_file::MetaFile;
use super::response::encode_response;
use super::segments::{Locator, Segments};
use super::stage::{self, Before, Persisted};
use super::view::{StreamView, StreamViewWriter};

pub struct StreamMachine {
    /// The config of a stream that has no keys yet (first start of a new stream); a stream
    /// with keys takes its config from them.
    initial_config: StreamConfig,
    writer: StreamViewWriter,
    store: Arc<MessageStore>,
    persisted: Persisted,
    /// Raft index of the last command applied, signalled to readers by `finish`.
    last_applied: u64,
}

impl std::fmt::Debug for StreamMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamMachine")
            .field("stream", &self.initial_config.name)
            .finish()
    }
}

impl StreamMachine {
    /// A machine for the stream `config` describes, reading bodies through the node's
    /// `cache`, and the view the front reads it with. The state stays empty until consensus
    /// calls `load`.
    pub fn new(config: StreamConfig, cache: Arc<BlockCache>) -> (StreamMachine, StreamView) {
        let store = Arc::new(MessageStore::new(config.storage, cache));
        let (writer, view) = StreamView::new(StreamGroup::new(config.clone()), store.clone());
        let machine = StreamMachine {
            initial_config: config,
            writer,
            store,
            persisted: Persisted::default(),
            last_applied: 0,
        };
        (machine, view)
    }
}

#[cfg(test)]
impl StreamMachine {
    /// The group's segment files (after `load`).
    pub(super) fn segments(&self) -> Option<Arc<Segments>> {
        self.store.segments()
    }
}

impl GroupMachine for StreamMachine {
    /// An open tail chunk keeps 16 bytes a message (its deque up to twice that); sealed, a few.
    /// A stream left alone keeps it sealed until its next append (1000 streams: 16 MB of open
    /// tails after publishing to all of them, heaptrack).
    ///
    /// The segment taking new blocks is summarized too if it took none for a second (a group
    /// left alone settles 5–10 s after its last apply): a restart then reads nothing of it
    /// block by block.
    fn snapshot_taken(&mut self) {
        self.writer.write(StreamGroup::seal_metadata);
        if let Some(segments) = self.store.segments() {
            segments.summarize_quiet();
        }
    }

    /// Message blocks carry a checksum (ADR 0018): checked before they leave in a snapshot.
    /// A block in the group's segment files leaves as the block itself.
    fn stored_value_export(&self) -> StoredValueExport {
        let store = self.store.clone();
        Arc::new(move |key, value| {
            if !key.starts_with(keys::BLOCK_PREFIX) {
                return Ok(None);
            }
            match Locator::decode(value)? {
                None => keys::parse_block(value).map(|_| None),
                Some(locator) => {
                    let block = store.read_located(locator)?;
                    keys::parse_block(&block)?;
                    Ok(Some(block))
                }
            }
        })
    }

    /// Blocks of a received snapshot go to new segment files, their locators to sled, as
    /// `finish` writes them (ADR 0022).
    fn stored_value_import(&self, view: &MachineView) -> Result<Box<ImportFn>, MachineError> {
        let segments = Segments::open(view.files_dir())?;
        Ok(Box::new(move |key, value| {
            let inline = key.starts_with(keys::BLOCK_PREFIX) && Locator::decode(&value)?.is_none();
            if !inline {
                return Ok(Imported {
                    value,
                    sync_first: None,
                });
            }
            keys::parse_block(&value)?;
            let (locator, file) = segments.append(&value)?;
            Ok(Imported {
                value: locator.encode().to_vec(),
                sync_first: Some(file),
            })
        }))
    }

    fn load(&mut self, view: &MachineView) -> Result<(), MachineError> {
        let segments = Arc::new(Segments::open(view.files_dir())?);
        let (group, persisted) = match view.get(keys::LAYOUT)? {
            None => {
                if let Some(item) = view.scan_prefix(b"").next() {
                    let (key, _) = item?;
                    return Err(MachineError::Corrupt(format!(
                        "stream keys without a layout version (first key {key:?})"
                    )));
                }
                // A new stream: its first segment is opened now, off its first PubAck's path.
                segments.prepare()?;
                let mut group = StreamGroup::new(self.initial_config.clone());
                if let Some(spill) = metadata_spill(&self.initial_config, view)? {
                    group.spill_metadata_to(spill);
                }
                (group, Persisted::default())
            }
            Some(layout) if layout.as_ref() == [keys::LAYOUT_V1] => {
                load_keys(view, keys::LAYOUT_V1, &segments)?
            }
            Some(layout) if layout.as_ref() == [keys::LAYOUT_V2] => {
                load_keys(view, keys::LAYOUT_V2, &segments)?
            }
            Some(layout) if layout.as_ref() == [keys::LAYOUT_V3] => {
                load_keys(view, keys::LAYOUT_V3, &segments)?
            }
            Some(layout) if layout.as_ref() == [keys::LAYOUT_V4] => {
                load_keys(view, keys::LAYOUT_V4, &segments)?
            }
            Some(layout) => {
                return Err(MachineError::Corrupt(format!(
                    "unknown stream key layout {layout:?}"
                )))
            }
        };
        view.unlink_after_sync(
            segments.unreferenced(&persisted.segments.keys().copied().collect())?,
        );
        self.store.reset(
            view.clone(),
            persisted
                .blocks
                .iter()
                .map(|(first, block)| (first, block.last_seq)),
            segments,
        );
        self.writer.replace(group);
        self.persisted = persisted;
        Ok(())
    }

    fn apply(
        &mut self,
        at: ApplyPosition,
        command: &Command,
        txn: &mut MachineTxn<'_>,
    ) -> Result<Response, MachineError> {
        let command = entry::decode_command(command).map_err(MachineError::undecodable(at))?;
        let persisted = &mut self.persisted;
        let store = &self.store;
        let outcome = self.writer.write(|group| match command {
            StreamCommand::AppendBatch(members) => {
                apply_batch(group, persisted, store, members, txn)
            }
            command => apply_one(group, persisted, store, command, txn),
        })?;
        self.last_applied = at.index;
        Ok(encode_response(&outcome))
    }

    fn finish(&mut self, txn: &mut MachineTxn<'_>) -> Result<(), MachineError> {
        let (persisted, store) = (&mut self.persisted, &self.store);
        self.writer
            .read(|group| stage::finish(persisted, group, store, txn))?;
        store.release_written();
        if store.has_pinned() {
            // Let the blocks go once sled has them, even if the stream applies nothing more
            // (1000 idle streams kept 61 MB pinned, beside the cache's budget).
            let store = Arc::downgrade(store);
            txn.after_written(move || {
                if let Some(store) = store.upgrade() {
                    store.release_written();
                }
            });
        }
        // Readers waiting for new state wake once per apply call, not once per command.
        self.writer.mark_applied(self.last_applied);
        Ok(())
    }

    fn submitted(&mut self, ticket: WriteTicket) {
        self.store.submitted(ticket);
    }
}

/// Applies one command to `group` and stages the sled writes it caused.
fn apply_one(
    group: &mut StreamGroup,
    persisted: &mut Persisted,
    store: &MessageStore,
    command: StreamCommand,
    txn: &mut MachineTxn<'_>,
) -> Result<Result<StreamOutcome, ApiError>, MachineError> {
    // An `Expire` fires the due schedules, whose bodies it reads (ADR 0023).
    if let StreamCommand::Expire { now_nanos } = command {
        let due = group.due_schedules(now_nanos);
        if !due.is_empty() {
            let before = Before::capture(group, &command);
            let bodies = due
                .into_iter()
                .map(|seq| {
                    let body = stored_body(store, seq, "schedule")?;
                    let headers = body.headers.unwrap_or_default();
                    let source = match group.schedule_source_seq(&headers) {
                        Some(source) => {
                            let source = stored_body(store, source, "schedule source")?;
                            Some((source.headers.unwrap_or_default(), source.payload))
                        }
                        None => None,
                    };
                    Ok(ScheduleBody {
                        seq,
                        headers,
                        payload: body.payload,
                        source,
                    })
                })
                .collect::<Result<Vec<_>, MachineError>>()?;
            let outcome = group.expire_and_fire(now_nanos, bodies);
            stage::stage(
                persisted, store, group, &before, &command, None, &outcome, txn,
            )?;
            return Ok(outcome);
        }
    }
    // A counter stream adds to the body of the subject's last message (ADR 0020).
    let base = match group.counter_base_seq(&command) {
        Some(seq) => Some(counter_base(store, seq)?),
        None => None,
    };
    let before = Before::capture(group, &command);
    // Staging reads no field of an append (its outcome says what it stored), so an
    // append is not cloned for it; its body (shared, not copied) goes to the block
    // `finish` writes, since the stream state keeps none.
    let (applied, staged, body) = match command {
        StreamCommand::Append(request) => {
            let body = Body {
                headers: request.headers.clone(),
                payload: request.payload.clone(),
            };
            let stand_in = StreamCommand::Append(AppendRequest {
                subject: String::new(),
                headers: None,
                payload: bytes::Bytes::new(),
                now_nanos: request.now_nanos,
            });
            (StreamCommand::Append(request), stand_in, Some(body))
        }
        StreamCommand::Sourced(message) => {
            let body = Body {
                headers: message.headers.clone(),
                payload: message.payload.clone(),
            };
            let staged = StreamCommand::Sourced(message.clone());
            (StreamCommand::Sourced(message), staged, Some(body))
        }
        other => (other.clone(), other, None),
    };
    let outcome = group.apply_counted(applied, base.as_ref());
    // What a counter stream stores is the value the apply computed.
    let body = match &outcome {
        Ok(StreamOutcome::Appended(AppendOutcome::Counted { val, headers, .. })) => Some(Body {
            headers: Some(headers.clone()),
            payload: value_body(val),
        }),
        _ => body,
    };
    stage::stage(
        persisted, store, group, &before, &staged, body, &outcome, txn,
    )?;
    Ok(outcome)
}

/// The body of message `seq`, the last on a counter's subject: stored by this apply call
/// (not yet in a block) or read through the message store. Every replica holds it; one that
/// cannot read it is damaged (the read reported it, ADR 0018) and must not count from
/// anything else.
fn counter_base(store: &MessageStore, seq: u64) -> Result<CounterBase, MachineError> {
    let body = stored_body(store, seq, "counter")?;
    Ok(CounterBase {
        headers: body.headers,
        payload: body.payload,
    })
}

/// The body of live message `seq` (a `what` message), read through the message store (which
/// holds those this apply call stored, not yet in a block).
fn stored_body(store: &MessageStore, seq: u64, what: &str) -> Result<Body, MachineError> {
    store
        .body(seq)
        .ok_or_else(|| MachineError::Corrupt(format!("{what} message {seq} has no readable body")))
}

/// Applies an atomic batch (ADR-50) as `StreamGroup::apply_batch_with` does, each member
/// applied and staged as an `Append`, all in this one entry's apply and sled batch. (Counter
/// streams take no batches, `jsapi::unsupported`.)
fn apply_batch(
    group: &mut StreamGroup,
    persisted: &mut Persisted,
    store: &MessageStore,
    members: Vec<AppendRequest>,
    txn: &mut MachineTxn<'_>,
) -> Result<Result<StreamOutcome, ApiError>, MachineError> {
    group.apply_batch_with(members, |group, member| {
        apply_one(group, persisted, store, StreamCommand::Append(member), txn)
    })
}

/// Where a file stream keeps its sealed metadata chunks beyond the few touched last: a spill
/// beside its segments (ADR 0033). A memory stream keeps all of it in memory.
fn metadata_spill(
    config: &StreamConfig,
    view: &MachineView,
) -> Result<Option<Arc<dyn MetaSpill>>, MachineError> {
    if config.storage != StorageType::File {
        return Ok(None);
    }
    Ok(Some(Arc::new(MetaFile::create(&view.files_dir())?)))
}

/// Rebuilds the group and what is known to be in sled from layout-1 or layout-2 keys (a
/// layout-1 store has only `m/` message keys; layout 2 adds `b/` blocks and `x/` tombstones).
fn load_keys(
    view: &MachineView,
    layout: u8,
    segments: &Segments,
) -> Result<(StreamGroup, Persisted), MachineError> {
    let missing = |what: &str| MachineError::Corrupt(format!("stream keys lack {what}"));
    let config_value = view
        .get(keys::STREAM_CONFIG)?
        .ok_or_else(|| missing("config"))?;
    let config: StreamConfig = match config_value.split_first() {
        Some((&keys::VALUE_V1, json)) => serde_json::from_slice(json)
            .map_err(|e| MachineError::Corrupt(format!("stream config: {e}")))?,
        _ => return Err(MachineError::Corrupt("stream config version".into())),
    };
    let record_value = view
        .get(keys::STREAM_STATE)?
        .ok_or_else(|| missing("state"))?;
    let record: keys::StreamRecordV1 = keys::decode("stream state", &record_value)?;

    // The entries are contiguous ordinals from `dedup_first` (see `stage_dedup`).
    let mut dedup: Vec<DedupRecord> = Vec::new();
    let entries = (record.dedup_first..).zip(view.scan_prefix(keys::DEDUP_PREFIX));
    for (expected_ordinal, item) in entries {
        let (key, value) = item?;
        let ordinal = keys::parse_u64_key(keys::DEDUP_PREFIX, &key)?;
        if ordinal != expected_ordinal {
            return Err(MachineError::Corrupt(format!(
                "duplicate window entry {ordinal}, expected {expected_ordinal}"
            )));
        }
        dedup.push(keys::decode::<DedupEntryV1>("dedup entry", &value)?.into());
    }

    // Metadata only: subjects and times are read in place, bodies never copied.
    let storage = config.storage;
    let mut legacy_msgs: Vec<(u64, keys::StoredMsgV1)> = Vec::new();
    let mut legacy = BTreeSet::new();
    for item in view.scan_prefix(keys::MESSAGE_PREFIX) {
        let (key, value) = item?;
        let seq = keys::parse_u64_key(keys::MESSAGE_PREFIX, &key)?;
        legacy_msgs.push((seq, keys::decode("message", &value)?));
        legacy.insert(seq);
    }
    let mut tombstones = BTreeSet::new();
    for item in view.scan_prefix(keys::TOMBSTONE_PREFIX) {
        let (key, _) = item?;
        tombstones.insert(keys::parse_u64_key(keys::TOMBSTONE_PREFIX, &key)?);
    }
    let mut restoring = StreamState::restoring();
    if let Some(spill) = metadata_spill(&config, view)? {
        restoring.spill_metadata_to(spill);
    }
    for (seq, msg) in &legacy_msgs {
        let headers_len = msg.headers.as_ref().map_or(0, |h| h.len());
        let info = MsgInfo {
            subject: &msg.subject,
            ts_nanos: msg.ts_nanos,
            stored_size: stored_size(storage, msg.subject.len(), headers_len, msg.payload.len()),
        };
        restoring.push(*seq, info, msg.headers.as_deref());
    }
    drop(legacy_msgs);
    // Block messages below the first sequence, or tombstoned, were removed (see
    // `stage::settle_removed`).
    let live = Live {
        first_seq: record.first_seq,
        tombstones: &tombstones,
    };
    let LoadedBlocks {
        blocks,
        segments: live_blocks,
    } = load_blocks(view, segments, storage, live, &mut restoring)?;

    let schedule_clock: i64 = match view.get(keys::SCHEDULE_CLOCK)? {
        Some(value) => keys::decode("schedule clock", &value)?,
        None => 0,
    };
    restoring.set_schedule_clock(schedule_clock);
    let persisted_config = config.clone();
    let dedup_first = record.dedup_first;
    let stream = StreamState::restore_from(config, record.clone().scalars(), restoring, dedup);
    let loaded = load_consumers(view)?;
    let persisted = Persisted {
        config: Some(persisted_config),
        stream_record: Some(keys::encode(&record)),
        dedup_first,
        consumers: loaded.records,
        layout: Some(layout),
        blocks,
        segments: live_blocks,
        tombstones,
        legacy,
        pending_chunks: loaded.pending_chunks,
        legacy_pending: loaded.legacy_pending,
        schedule_clock,
        ..Persisted::default()
    };
    let sources = super::sources::load_sources(view)?;
    let persisted = Persisted {
        sources: sources.iter().map(|(k, v)| (k.to_owned(), v)).collect(),
        ..persisted
    };
    let group = StreamGroup::from_parts(stream, loaded.consumers).with_source_positions(sources);
    Ok((group, persisted))
}

#[derive(Default)]
struct ConsumerParts {
    config: Option<ConsumerConfigV1>,
    state: Option<(ConsumerStateV1, bytes::Bytes)>,
    pending: Vec<(u64, PendingEntry)>,
}

/// The consumers and what `Persisted` needs to know about their keys.
#[derive(Default)]
struct LoadedConsumers {
    consumers: BTreeMap<String, ConsumerState>,
    records: BTreeMap<String, bytes::Bytes>,
    pending_chunks: BTreeMap<String, BTreeSet<u64>>,
    legacy_pending: BTreeMap<String, BTreeSet<u64>>,
}

fn load_consumers(view: &MachineView) -> Result<LoadedConsumers, MachineError> {
    let mut loaded = LoadedConsumers::default();
    let mut parts: BTreeMap<String, ConsumerParts> = BTreeMap::new();
    for item in view.scan_prefix(keys::CONSUMER_PREFIX) {
        let (key, value) = item?;
        match keys::parse_consumer_key(&key)? {
            ConsumerKey::Config(name) => {
                parts.entry(name).or_default().config =
                    Some(keys::decode("consumer config", &value)?);
            }
            ConsumerKey::State(name) => {
                let state = keys::decode("consumer state", &value)?;
                parts.entry(name).or_default().state = Some((state, value));
            }
            ConsumerKey::Pending(name, seq) => {
                let entry: keys::PendingV1 = keys::decode("pending entry", &value)?;
                loaded
                    .legacy_pending
                    .entry(name.clone())
                    .or_default()
                    .insert(seq);
                parts
                    .entry(name)
                    .or_default()
                    .pending
                    .push((seq, entry.into()));
            }
            ConsumerKey::PendingChunk(name, chunk) => {
                let entries = keys::decode_pending_chunk(&value)?;
                if entries
                    .iter()
                    .any(|(seq, _)| keys::pending_chunk_of(*seq) != chunk)
                {
                    return Err(MachineError::Corrupt(format!(
                        "consumer {name}: pending chunk {chunk} holds a sequence of another chunk"
                    )));
                }
                loaded
                    .pending_chunks
                    .entry(name.clone())
                    .or_default()
                    .insert(chunk);
                parts.entry(name).or_default().pending.extend(entries);
            }
        }
    }
    for (name, part) in parts {
        let (Some(config), Some((state, record))) = (part.config, part.state) else {
            return Err(MachineError::Corrupt(format!(
                "consumer {name} lacks its config or state key"
            )));
        };
        let definition = config.config.0;
        let mut consumer = ConsumerState::import(definition.config, state.into(), part.pending);
        consumer.set_created_nanos(definition.created_nanos);
        loaded.consumers.insert(name.clone(), consumer);
        loaded.records.insert(name, record);
    }
    Ok(loaded)
}
