//! Real inputs for the fuzz targets' seed corpora (`fuzz/corpus/<target>/seed-*`), made by
//! jetraft's own encoders and stores, so the seeds stay true to the formats: the commands of
//! the golden-bytes test, a WAL written by the `LogEngine`, a snapshot dumped from a
//! `StreamMachine`'s sled keys, and the Raft RPCs the cluster transport sends.
//!
//! `cargo test --lib fuzzing -- --ignored write_seed_corpus` rewrites the seed files.
//! The framing of multi-part inputs ([`frame`], [`frames`]) is shared with the targets.

use std::path::Path;

use bytes::Bytes;
use openraft::raft::{AppendEntriesRequest, VoteRequest};
use openraft::{CommittedLeaderId, EntryPayload};

use super::StreamStateFixture;
use crate::consensus::machine::ApplyPosition;
use crate::consensus::types::{Entry, LogId, SnapshotMeta, StoredMembership, Vote};
use crate::consensus::{
    raft_codec, snapshot, Command, GroupMachine, MachineError, MachineTxn, MachineView, Proposal,
    TypeConfig,
};
use crate::jetstream::meta::MetaCommand;
use crate::jetstream::payload::{self, JsonValue, META_COMMAND_V1};
use crate::jetstream::stream_machine::entry::encode_command;
use crate::jetstream::stream_machine::StreamMachine;
use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::StreamCommand;
use crate::jscore::stream::{AppendRequest, PurgeRequest};
use crate::store::log::{LogEngine, LogError, LogOp, LogOptions, MetaKey};

/// Appends `part` to `out` as one frame: its length (u16, little endian), then its bytes.
/// Parts longer than `u16::MAX` are cut.
pub fn frame(out: &mut Vec<u8>, part: &[u8]) {
    let part = &part[..part.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(part.len() as u16).to_le_bytes());
    out.extend_from_slice(part);
}

/// The frames of `data` (see [`frame`]); a last frame cut short ends at the end of `data`.
pub fn frames(mut data: &[u8]) -> Vec<&[u8]> {
    let mut parts = Vec::new();
    while let Some((len, rest)) = data.split_first_chunk::<2>() {
        let len = usize::from(u16::from_le_bytes(*len)).min(rest.len());
        let (part, after) = rest.split_at(len);
        parts.push(part);
        data = after;
    }
    parts
}

/// The stream every seed is about.
pub fn stream_config() -> StreamConfig {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.max_msgs = 100;
    config
}

/// One command of each kind a stream group applies, in an order that exercises them: three
/// appends, a config update, a consumer and its deliveries and acks, a purge, a deletion.
pub fn stream_commands() -> Vec<StreamCommand> {
    let append = |subject: &str, headers: Option<&'static [u8]>, now_nanos| {
        StreamCommand::Append(AppendRequest {
            subject: subject.into(),
            headers: headers.map(Bytes::from_static),
            payload: Bytes::from_static(b"hello"),
            now_nanos,
        })
    };
    let consumer = |command| StreamCommand::Consumer {
        name: "d".into(),
        command,
    };
    vec![
        StreamCommand::UpdateStream {
            config: stream_config(),
            now_nanos: 1,
        },
        append("s.a", None, 10),
        append("s.b", Some(b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"), 11),
        append("s.a", None, 12),
        StreamCommand::UpsertConsumer {
            name: "d".into(),
            config: ConsumerConfig {
                durable_name: "d".into(),
                ack_policy: AckPolicy::Explicit,
                ..Default::default()
            },
            created_nanos: 13,
        },
        consumer(ConsumerCommand::DeliverNext {
            max_messages: 2,
            now_nanos: 14,
        }),
        consumer(ConsumerCommand::Ack { stream_seq: 1 }),
        consumer(ConsumerCommand::Nak {
            stream_seq: 2,
            delay_nanos: Some(5),
            now_nanos: 15,
        }),
        StreamCommand::Purge(PurgeRequest {
            filter: Some("s.b".into()),
            seq: 0,
            keep: 0,
        }),
        StreamCommand::DeleteMsg { seq: 3 },
        append("s.c", None, 16),
    ]
}

/// [`stream_commands`] as the entries' commands carry them.
pub fn encoded_stream_commands() -> Vec<Command> {
    stream_commands().into_iter().map(encode_command).collect()
}

/// A meta command creating the seeds' stream on three nodes.
pub fn meta_command() -> Command {
    payload::command(
        META_COMMAND_V1,
        &MetaCommand::CreateStreamOn {
            config: JsonValue(stream_config()),
            created_nanos: 1,
            replicas: vec![1, 2, 3],
        },
    )
}

fn log_id(index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(2, 1), index)
}

/// The Raft entries of a stream group: one per command, after a blank leader entry.
pub fn raft_entries() -> Vec<Entry> {
    let mut entries = vec![Entry {
        log_id: log_id(1),
        payload: EntryPayload::Blank,
    }];
    for (index, command) in (2u64..).zip(encoded_stream_commands()) {
        entries.push(Entry {
            log_id: log_id(index),
            payload: EntryPayload::Normal(Proposal {
                commands: vec![command],
            }),
        });
    }
    entries
}

/// An `AppendEntries` RPC carrying [`raft_entries`], as the transport encodes it.
pub fn append_entries_rpc() -> Bytes {
    let rpc = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(2, 1),
        prev_log_id: None,
        entries: raft_entries(),
        leader_commit: Some(log_id(1)),
    };
    raft_codec::encode(&rpc)
}

/// A vote request, as the transport encodes it.
pub fn vote_rpc() -> Bytes {
    raft_codec::encode(&VoteRequest::<u64> {
        vote: Vote::new(3, 2),
        last_log_id: Some(log_id(7)),
    })
}

/// A forwarded proposal holding every sample command and the meta command.
pub fn proposal() -> Bytes {
    let mut commands = encoded_stream_commands();
    commands.push(meta_command());
    raft_codec::encode(&Proposal { commands })
}

/// The segment files of a WAL in `dir` holding six groups' entries, votes and purges, cut
/// into several segments.
pub fn wal_segments(dir: &Path) -> Result<Vec<Vec<u8>>, LogError> {
    let options = LogOptions {
        segment_size: 4096,
        preallocate: 0,
        fsync: false,
        reclaim_max_bytes: 0,
        ..LogOptions::default()
    };
    let (engine, _) = LogEngine::open(dir, options)?;
    let vote = raft_codec::encode(&Vote::new_committed(2, 1));
    engine.write_blocking(vec![LogOp::SetMeta {
        group: 7,
        key: MetaKey::VOTE,
        value: vote,
    }])?;
    for entry in raft_entries() {
        let index = entry.log_id.index;
        let encoded = raft_codec::encode(&entry);
        let ops = (7..=12).map(|group| LogOp::Append {
            group,
            index,
            payload: encoded.clone(),
        });
        engine.write_blocking(ops.collect())?;
    }
    engine.write_blocking(vec![LogOp::PurgeUpTo { group: 7, index: 3 }])?;
    engine.write_blocking(vec![LogOp::TruncateFrom { group: 9, index: 8 }])?;
    drop(engine);
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .map_err(|error| LogError::io("list", dir, error))?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "wal"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read(path).map_err(|error| LogError::io("read", path, error)))
        .collect()
}

impl StreamStateFixture {
    /// Applies [`stream_commands`] to an empty group and commits what they wrote, as
    /// consensus does; returns the group's keys afterwards and its snapshot file's bytes.
    pub fn sample_state(&self, dir: &Path) -> Result<SampleState, MachineError> {
        self.replace_keys(&[])?;
        let view = MachineView::new(self.db.clone(), super::FIXTURE_GROUP);
        let (mut machine, _view) = StreamMachine::new(stream_config(), Default::default());
        machine.load(&view)?;
        let mut txn = MachineTxn::new(&view);
        for (index, command) in (1u64..).zip(encoded_stream_commands()) {
            machine.apply(ApplyPosition { index, position: 0 }, &command, &mut txn)?;
        }
        machine.finish(&mut txn)?;
        let tree = self.db.tree();
        let mut batch = sled::Batch::default();
        for (key, value) in txn.into_writes() {
            match value {
                Some(value) => batch.insert(key, value.as_ref()),
                None => batch.remove(key),
            }
        }
        tree.apply_batch(batch)?;
        // Self-contained: blocks as a snapshot carries them, not locators into this
        // fixture's segment files (ADR 0022).
        let export = machine.stored_value_export();
        let keys = view
            .scan_prefix(b"")
            .map(|item| {
                let (key, value) = item?;
                let value = export(&key, &value)?.unwrap_or(value);
                Ok((key, value.to_vec()))
            })
            .collect::<Result<Vec<_>, MachineError>>()?;
        let meta = SnapshotMeta {
            last_log_id: Some(log_id(11)),
            last_membership: StoredMembership::default(),
            snapshot_id: "seed".into(),
        };
        let path = dir.join("seed.snap");
        let corrupt = |error: std::io::Error| MachineError::Corrupt(error.to_string());
        snapshot::write_checked_dump(tree, super::FIXTURE_GROUP, &meta, &path, &*export)
            .map_err(corrupt)?;
        let snapshot = std::fs::read(&path).map_err(corrupt)?;
        std::fs::remove_file(&path).map_err(corrupt)?;
        Ok(SampleState { keys, snapshot })
    }
}

/// What [`StreamStateFixture::sample_state`] made.
pub struct SampleState {
    pub keys: super::Records,
    pub snapshot: Vec<u8>,
}

#[cfg(test)]
#[path = "seeds_tests.rs"]
mod tests;
