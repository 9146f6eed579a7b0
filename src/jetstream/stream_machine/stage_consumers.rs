//! The consumer keys an applied command changed (`stage.rs` says the method): each
//! consumer's config and state record, and its pending entries in chunks of 1024 stream
//! sequences, rewritten once per apply call by `finish_consumers`.

use std::collections::BTreeSet;

use super::entry::ConsumerDefinition;
use super::keys::{self, ConsumerConfigV1, ConsumerStateV1};
use super::stage::{Before, Persisted};
use crate::consensus::{MachineError, MachineTxn};
use crate::jetstream::payload::JsonValue;
use crate::jsapi::ApiError;
use crate::jscore::consumer::{AckOutcome, ConsumerCommand, ConsumerOutcome};
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};

pub(super) fn stage_consumers(
    persisted: &mut Persisted,
    group: &StreamGroup,
    before: &Before,
    command: &StreamCommand,
    outcome: &Result<StreamOutcome, ApiError>,
    removed: &[u64],
    txn: &mut MachineTxn<'_>,
) -> Result<(), MachineError> {
    // Deleted consumers: every key they had.
    let gone: Vec<String> = persisted
        .consumers
        .keys()
        .filter(|name| group.consumer(name).is_none())
        .cloned()
        .collect();
    for name in gone {
        for chunk in persisted.pending_chunks.remove(&name).unwrap_or_default() {
            txn.remove(keys::pending_chunk(&name, chunk));
        }
        for seq in persisted.legacy_pending.remove(&name).unwrap_or_default() {
            txn.remove(keys::pending(&name, seq));
        }
        txn.remove(keys::consumer_config(&name));
        txn.remove(keys::consumer_state(&name));
        persisted.consumers.remove(&name);
    }

    if let (StreamCommand::UpsertConsumer { name, .. }, Ok(_)) = (command, outcome) {
        if let Some(consumer) = group.consumer(name) {
            let config = ConsumerConfigV1 {
                config: JsonValue(ConsumerDefinition {
                    config: consumer.config().clone(),
                    created_nanos: consumer.created_nanos(),
                }),
            };
            txn.insert(keys::consumer_config(name), keys::encode(&config));
            // Known from now on, so a deletion later in this call removes the config key
            // (the state record is only written by `finish`; empty = not written yet).
            persisted.consumers.entry(name.clone()).or_default();
        }
    }

    // Pending entries a removal of messages dropped, in every consumer.
    for (name, consumer) in group.consumers() {
        match before
            .pending
            .as_ref()
            .and_then(|pending| pending.get(name))
        {
            Some(seqs) => {
                let dropped = seqs
                    .iter()
                    .copied()
                    .filter(|seq| consumer.pending_entry(*seq).is_none());
                persisted.mark_pending(name, dropped);
            }
            None => {
                // A pending entry only exists for a delivered sequence.
                let delivered = consumer.delivered().stream_seq;
                let dropped = removed.iter().copied().filter(|seq| *seq <= delivered);
                persisted.mark_pending(name, dropped);
            }
        }
    }

    // The commanded consumer's touched entries.
    if let (
        StreamCommand::Consumer { name, command },
        Ok(StreamOutcome::Consumer { outcome, .. }),
    ) = (command, outcome)
    {
        if group.consumer(name).is_some() {
            persisted.mark_pending(name, touched_pending(command, outcome, &before.due));
        }
    }

    // State records of every consumer this command may have moved: written by `finish`.
    if !removed.is_empty() || before.pending.is_some() {
        persisted.all_states_dirty = true;
    } else if let StreamCommand::Consumer { name, .. }
    | StreamCommand::UpsertConsumer { name, .. } = command
    {
        if !persisted.dirty_states.contains(name) {
            persisted.dirty_states.insert(name.clone());
        }
    }
    Ok(())
}

impl Persisted {
    /// Notes that the pending entries of `seqs` changed: their chunks are rewritten by
    /// `finish`.
    fn mark_pending(&mut self, name: &str, seqs: impl IntoIterator<Item = u64>) {
        let mut seqs = seqs.into_iter().peekable();
        if seqs.peek().is_none() {
            return;
        }
        let chunks = match self.dirty_chunks.get_mut(name) {
            Some(chunks) => chunks,
            None => self.dirty_chunks.entry(name.to_owned()).or_default(),
        };
        chunks.extend(seqs.map(keys::pending_chunk_of));
    }
}

/// Once per apply call: each consumer chunk whose entries changed, rewritten from the
/// in-memory pending set (or deleted when it is empty), and each consumer state record
/// that changed.
pub(super) fn finish_consumers(
    persisted: &mut Persisted,
    group: &StreamGroup,
    txn: &mut MachineTxn<'_>,
) {
    for (name, chunks) in std::mem::take(&mut persisted.dirty_chunks) {
        let Some(consumer) = group.consumer(&name) else {
            continue; // deleted: `stage_consumers` removed its keys
        };
        let written = persisted.pending_chunks.entry(name.clone()).or_default();
        let legacy = persisted.legacy_pending.get_mut(&name);
        let mut legacy_in_chunks = Vec::new();
        for chunk in chunks {
            let seqs = keys::pending_chunk_seqs(chunk);
            if let Some(legacy) = &legacy {
                legacy_in_chunks.extend(legacy.range(seqs.clone()).copied());
            }
            let mut entries = consumer.pending().range(seqs).peekable();
            if entries.peek().is_some() {
                txn.insert(
                    keys::pending_chunk(&name, chunk),
                    keys::encode_pending_chunk(entries),
                );
                written.insert(chunk);
            } else if written.remove(&chunk) {
                txn.remove(keys::pending_chunk(&name, chunk));
            }
        }
        // The chunk now holds what a layout-1 key of its range held.
        if let Some(legacy) = legacy {
            for seq in legacy_in_chunks {
                legacy.remove(&seq);
                txn.remove(keys::pending(&name, seq));
            }
        }
    }
    let all = std::mem::take(&mut persisted.all_states_dirty);
    let named = std::mem::take(&mut persisted.dirty_states);
    for (name, consumer) in group.consumers() {
        if !(all || named.contains(name)) {
            continue;
        }
        let record = keys::encode(&ConsumerStateV1::from(consumer.export()));
        if persisted.consumers.get(name) != Some(&record) {
            txn.insert(keys::consumer_state(name), record.clone());
            persisted.consumers.insert(name.to_string(), record);
        }
    }
}

/// Pending sequences a consumer command may have changed.
fn touched_pending(
    command: &ConsumerCommand,
    outcome: &ConsumerOutcome,
    due: &[u64],
) -> BTreeSet<u64> {
    let mut touched: BTreeSet<u64> = due.iter().copied().collect();
    match command {
        // A reset's dropped entries: `Before::capture` took the pending sets for it.
        ConsumerCommand::DeliverNext { .. } | ConsumerCommand::Reset { .. } => {}
        ConsumerCommand::Ack { stream_seq }
        | ConsumerCommand::AckAll { stream_seq }
        | ConsumerCommand::Nak { stream_seq, .. }
        | ConsumerCommand::Term { stream_seq }
        | ConsumerCommand::InProgress { stream_seq, .. } => {
            touched.insert(*stream_seq);
        }
    }
    match outcome {
        ConsumerOutcome::Delivered(deliveries) => {
            touched.extend(deliveries.iter().map(|delivery| delivery.stream_seq));
        }
        ConsumerOutcome::Ack(AckOutcome::Acked { stream_seqs }) => {
            touched.extend(stream_seqs.iter().copied());
        }
        ConsumerOutcome::Ack(_) | ConsumerOutcome::Reset { .. } => {}
    }
    touched
}
