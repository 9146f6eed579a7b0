//! The stream group's entries: how a `jscore::group::StreamCommand` is written into a Raft
//! entry and read back (the responses are in `response.rs`). The format's home: every
//! command of a stream group's log is encoded and decoded here, and `tests_formats.rs` pins the
//! bytes of every kind and variant.
//!
//! | kind | name | payload |
//! |---|---|---|
//! | 1 | [`STREAM_COMMAND_V1`] | postcard [`StreamCommandWire`] (every command; older logs hold appends this way too) |
//! | 3 | [`STREAM_APPEND_V1`] | an `Append` as raw fields ([`encode_append`]: the publish hot path) |
//! | 4 | [`STREAM_APPEND_BATCH_V1`] | an `AppendBatch` (atomic batch, ADR-50): member count, then each member as a length and a `STREAM_APPEND_V1` payload ([`encode_append_batch`]) |
//!
//! (Kinds are one namespace with the meta group's: see `jetstream::payload`.)
//!
//! Variant indexes of `StreamCommandWire` (postcard writes the index first): 0 Append,
//! 1 Purge, 2 DeleteMsg, 3 Expire, 4 UpdateStream, 5 UpsertConsumer, 6 DeleteConsumer,
//! 7 Consumer, 8 Sourced (a `jscore::sourcing::SourcedMessage`: source, kind (0 Mirror,
//! 1 Source), origin seq, expected position, subject, headers, payload, time), 9 AppendBatch
//! (each member's `STREAM_APPEND_V1` payload; written as kind 4, this form only decodes). Of `jscore::consumer::ConsumerCommand` (inside `Consumer`): 0 DeliverNext,
//! 1 Ack, 2 AckAll, 3 Nak, 4 Term, 5 InProgress.
//!
//! Appends are most of a stream's log: written raw they cost no serde, and are read back
//! without copying the payload. A `STREAM_COMMAND_V1` `Append` (older logs) still decodes.
//!
//! **Mirror policy** (the same for the entries and the responses): a jscore type that travels
//! in an entry or a response derives serde itself when every field is plain data, so its
//! postcard form is its declaration — `ConsumerCommand` here, `StreamOutcome` and what it
//! holds in responses. A type is mirrored only when it carries a field with JSON-tuned serde
//! (a config, an `ApiError`), which postcard (not self-describing) cannot honour: so
//! `StreamCommand`, whose `UpdateStream` and `UpsertConsumer` carry configs, has the mirror
//! [`StreamCommandWire`], configs inside travel as JSON text ([`JsonValue`]), and errors as
//! `WireError`. Either way postcard encodes an enum as its variant index and a struct as its
//! fields in order, so the declaration order is the format. **Append only**: never reorder,
//! remove or reuse a variant or field; a changed shape is a new command kind.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::consensus::Command;
use crate::jetstream::payload::{self, JsonValue, PayloadError};
use crate::jsapi::consumer_config::ConsumerConfig;
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::StreamCommand;
use crate::jscore::sourcing::SourcedMessage;
use crate::jscore::stream::{AppendRequest, PurgeRequest};

/// A stream group command (`jscore::group::StreamCommand`) as postcard [`StreamCommandWire`],
/// version 1.
pub const STREAM_COMMAND_V1: u16 = 1;
/// A stream group `Append` as raw fields rather than postcard ([`encode_append`] has the
/// layout). Same meaning as `STREAM_COMMAND_V1`'s `Append`.
pub const STREAM_APPEND_V1: u16 = 3;
/// A stream group `AppendBatch` (one atomic batch: all its members in one entry, so every
/// replica applies all or none) as raw fields ([`encode_append_batch`] has the layout).
pub const STREAM_APPEND_BATCH_V1: u16 = 4;

/// A committed stream command that did not decode.
#[derive(Debug, thiserror::Error)]
pub enum EntryError {
    /// A `STREAM_APPEND_V1` payload (alone or in a batch) shorter than its lengths say, or a
    /// subject not UTF-8.
    #[error("malformed append")]
    MalformedAppend,
    /// Not a stream command kind, or an undecodable postcard payload.
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

/// A consumer's config with the time it was created, as JSON: the config's own fields plus
/// `jetraft_created` (nanoseconds; absent, so 0, in entries and records written before it
/// was kept). Used by the `UpsertConsumer` command and the consumer's config record, so the
/// JSON stays readable by either version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerDefinition {
    #[serde(flatten)]
    pub config: ConsumerConfig,
    #[serde(rename = "jetraft_created", default)]
    pub created_nanos: i64,
}

/// A `StreamCommand` as it travels in a `STREAM_COMMAND_V1` entry (see the mirror policy).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StreamCommandWire {
    Append {
        subject: String,
        headers: Option<Bytes>,
        payload: Bytes,
        now_nanos: i64,
    },
    Purge {
        filter: Option<String>,
        seq: u64,
        keep: u64,
    },
    DeleteMsg {
        seq: u64,
    },
    Expire {
        now_nanos: i64,
    },
    UpdateStream {
        config: JsonValue<StreamConfig>,
        now_nanos: i64,
    },
    UpsertConsumer {
        name: String,
        /// The config with the creation time (JSON, so entries from before it was carried
        /// still decode).
        config: JsonValue<ConsumerDefinition>,
    },
    DeleteConsumer {
        name: String,
    },
    Consumer {
        name: String,
        command: ConsumerCommand,
    },
    /// A mirrored or sourced message (plain data: `SourcedMessage`'s own serde).
    Sourced(SourcedMessage),
    /// An atomic batch: each member as a `STREAM_APPEND_V1` payload (written as kind 4).
    AppendBatch {
        members: Vec<Bytes>,
    },
}

impl From<StreamCommand> for StreamCommandWire {
    fn from(command: StreamCommand) -> Self {
        match command {
            StreamCommand::Append(request) => StreamCommandWire::Append {
                subject: request.subject,
                headers: request.headers,
                payload: request.payload,
                now_nanos: request.now_nanos,
            },
            StreamCommand::Purge(request) => StreamCommandWire::Purge {
                filter: request.filter,
                seq: request.seq,
                keep: request.keep,
            },
            StreamCommand::DeleteMsg { seq } => StreamCommandWire::DeleteMsg { seq },
            StreamCommand::Expire { now_nanos } => StreamCommandWire::Expire { now_nanos },
            StreamCommand::UpdateStream { config, now_nanos } => StreamCommandWire::UpdateStream {
                config: JsonValue(config),
                now_nanos,
            },
            StreamCommand::UpsertConsumer {
                name,
                config,
                created_nanos,
            } => StreamCommandWire::UpsertConsumer {
                name,
                config: JsonValue(ConsumerDefinition {
                    config,
                    created_nanos,
                }),
            },
            StreamCommand::DeleteConsumer { name } => StreamCommandWire::DeleteConsumer { name },
            StreamCommand::Consumer { name, command } => {
                StreamCommandWire::Consumer { name, command }
            }
            StreamCommand::Sourced(message) => StreamCommandWire::Sourced(message),
            StreamCommand::AppendBatch(members) => StreamCommandWire::AppendBatch {
                members: members.iter().map(append_payload).collect(),
            },
        }
    }
}

impl TryFrom<StreamCommandWire> for StreamCommand {
    type Error = EntryError;

    fn try_from(wire: StreamCommandWire) -> Result<Self, EntryError> {
        Ok(match wire {
            StreamCommandWire::Append {
                subject,
                headers,
                payload,
                now_nanos,
            } => StreamCommand::Append(AppendRequest {
                subject,
                headers,
                payload,
                now_nanos,
            }),
            StreamCommandWire::Purge { filter, seq, keep } => {
                StreamCommand::Purge(PurgeRequest { filter, seq, keep })
            }
            StreamCommandWire::DeleteMsg { seq } => StreamCommand::DeleteMsg { seq },
            StreamCommandWire::Expire { now_nanos } => StreamCommand::Expire { now_nanos },
            StreamCommandWire::UpdateStream { config, now_nanos } => StreamCommand::UpdateStream {
                config: config.0,
                now_nanos,
            },
            StreamCommandWire::UpsertConsumer { name, config } => StreamCommand::UpsertConsumer {
                name,
                config: config.0.config,
                created_nanos: config.0.created_nanos,
            },
            StreamCommandWire::DeleteConsumer { name } => StreamCommand::DeleteConsumer { name },
            StreamCommandWire::Consumer { name, command } => {
                StreamCommand::Consumer { name, command }
            }
            StreamCommandWire::Sourced(message) => StreamCommand::Sourced(message),
            StreamCommandWire::AppendBatch { members } => StreamCommand::AppendBatch(
                members
                    .iter()
                    .map(decode_append)
                    .collect::<Option<_>>()
                    .ok_or(EntryError::MalformedAppend)?,
            ),
        })
    }
}

/// `headers_len` meaning "no header block" in [`encode_append`].
const NO_HEADERS: u32 = u32::MAX;

/// An `Append` as a command of kind `STREAM_APPEND_V1`: `now_nanos` (i64 LE),
/// subject length (u32 LE), subject (UTF-8), header block length (u32 LE, `u32::MAX` for
/// none), header block, then the payload up to the end. Written straight from the
/// published message's bytes, and read back without copying the payload (the stored
/// message shares the command's buffer).
pub fn encode_append(
    subject: &[u8],
    headers: Option<&[u8]>,
    payload: &[u8],
    now_nanos: i64,
) -> Command {
    let subject: std::borrow::Cow<'_, str> = String::from_utf8_lossy(subject);
    let headers_len = headers.map_or(0, <[u8]>::len);
    let mut out = Vec::with_capacity(16 + subject.len() + headers_len + payload.len());
    out.extend_from_slice(&now_nanos.to_le_bytes());
    out.extend_from_slice(&(subject.len() as u32).to_le_bytes());
    out.extend_from_slice(subject.as_bytes());
    match headers {
        Some(block) => {
            out.extend_from_slice(&(block.len() as u32).to_le_bytes());
            out.extend_from_slice(block);
        }
        None => out.extend_from_slice(&NO_HEADERS.to_le_bytes()),
    }
    out.extend_from_slice(payload);
    Command::new(STREAM_APPEND_V1, out)
}

/// The `Append` of a `STREAM_APPEND_V1` command; `None` if it is malformed.
pub fn decode_append(payload: &Bytes) -> Option<AppendRequest> {
    let take_u32 = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            payload.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let now_nanos = i64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    let subject_len = take_u32(8)? as usize;
    let subject_end = 12usize.checked_add(subject_len)?;
    let subject = std::str::from_utf8(payload.get(12..subject_end)?)
        .ok()?
        .to_owned();
    let headers_len = take_u32(subject_end)?;
    let mut at = subject_end + 4;
    let headers = match headers_len {
        NO_HEADERS => None,
        len => {
            let end = at.checked_add(len as usize)?;
            let block = payload.get(at..end).map(|_| payload.slice(at..end))?;
            at = end;
            Some(block)
        }
    };
    Some(AppendRequest {
        subject,
        headers,
        payload: payload.slice(at..),
        now_nanos,
    })
}

/// The `STREAM_APPEND_V1` payload of `request`.
fn append_payload(request: &AppendRequest) -> Bytes {
    encode_append(
        request.subject.as_bytes(),
        request.headers.as_deref(),
        &request.payload,
        request.now_nanos,
    )
    .payload
}

/// An `AppendBatch` as a command of kind `STREAM_APPEND_BATCH_V1`: the member count (u32
/// LE), then each member as its length (u32 LE) and its `STREAM_APPEND_V1` payload
/// ([`encode_append`]). Read back without copying a payload.
pub fn encode_append_batch(members: &[AppendRequest]) -> Command {
    let payloads: Vec<Bytes> = members.iter().map(append_payload).collect();
    let total: usize = payloads.iter().map(|member| 4 + member.len()).sum();
    let mut out = Vec::with_capacity(4 + total);
    out.extend_from_slice(&(payloads.len() as u32).to_le_bytes());
    for member in &payloads {
        out.extend_from_slice(&(member.len() as u32).to_le_bytes());
        out.extend_from_slice(member);
    }
    Command::new(STREAM_APPEND_BATCH_V1, out)
}

/// The members of a `STREAM_APPEND_BATCH_V1` command; `None` if it is malformed (a torn
/// member, bytes left over, or fewer members than its count).
pub fn decode_append_batch(payload: &Bytes) -> Option<Vec<AppendRequest>> {
    let take_u32 = |at: usize| -> Option<usize> {
        Some(u32::from_le_bytes(payload.get(at..at + 4)?.try_into().ok()?) as usize)
    };
    let count = take_u32(0)?;
    // Each member takes at least its length and a 16-byte append: a count beyond that is
    // malformed, not an allocation.
    let mut members = Vec::with_capacity(count.min(payload.len() / 20));
    let mut at = 4;
    for _ in 0..count {
        let len = take_u32(at)?;
        let end = (at + 4).checked_add(len)?;
        payload.get(at + 4..end)?;
        members.push(decode_append(&payload.slice(at + 4..end))?);
        at = end;
    }
    (at == payload.len()).then_some(members)
}

/// The Raft command for `command`: appends and atomic batches in their raw form, everything
/// else postcard.
pub fn encode_command(command: StreamCommand) -> Command {
    match command {
        StreamCommand::Append(request) => encode_append(
            request.subject.as_bytes(),
            request.headers.as_deref(),
            &request.payload,
            request.now_nanos,
        ),
        StreamCommand::AppendBatch(members) => encode_append_batch(&members),
        other => payload::command(STREAM_COMMAND_V1, &StreamCommandWire::from(other)),
    }
}

/// The group command in a Raft command of any stream kind.
pub fn decode_command(command: &Command) -> Result<StreamCommand, EntryError> {
    match command.kind {
        STREAM_APPEND_V1 => decode_append(&command.payload)
            .map(StreamCommand::Append)
            .ok_or(EntryError::MalformedAppend),
        STREAM_APPEND_BATCH_V1 => decode_append_batch(&command.payload)
            .map(StreamCommand::AppendBatch)
            .ok_or(EntryError::MalformedAppend),
        _ => payload::decode_command::<StreamCommandWire>(STREAM_COMMAND_V1, command)?.try_into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(command: StreamCommand) {
        let encoded =
            payload::command(STREAM_COMMAND_V1, &StreamCommandWire::from(command.clone()));
        let wire: StreamCommandWire = payload::decode_command(STREAM_COMMAND_V1, &encoded).unwrap();
        assert_eq!(StreamCommand::try_from(wire).unwrap(), command);
    }

    #[test]
    fn every_command_round_trips() {
        let mut stream_config = StreamConfig::new("S", &["s.>"]);
        stream_config.max_msgs = 10;
        let consumer_config = ConsumerConfig {
            durable_name: "d".into(),
            filter_subjects: vec!["s.a".into(), "s.b".into()],
            backoff: vec![1, 2],
            ..Default::default()
        };
        let consumer = |command| StreamCommand::Consumer {
            name: "d".into(),
            command,
        };
        for command in [
            StreamCommand::Append(AppendRequest {
                subject: "s.a".into(),
                headers: Some(Bytes::from_static(b"NATS/1.0\r\nA: b\r\n\r\n")),
                payload: Bytes::from_static(&[0, 1, 255]),
                now_nanos: -3,
            }),
            StreamCommand::Purge(PurgeRequest {
                filter: Some("s.a".into()),
                seq: 3,
                keep: 0,
            }),
            StreamCommand::DeleteMsg { seq: 9 },
            StreamCommand::Expire { now_nanos: 77 },
            StreamCommand::UpdateStream {
                config: stream_config,
                now_nanos: 1,
            },
            StreamCommand::UpsertConsumer {
                name: "d".into(),
                config: consumer_config,
                created_nanos: 7,
            },
            StreamCommand::DeleteConsumer { name: "d".into() },
            consumer(ConsumerCommand::DeliverNext {
                max_messages: 5,
                now_nanos: 2,
            }),
            consumer(ConsumerCommand::Ack { stream_seq: 1 }),
            consumer(ConsumerCommand::AckAll { stream_seq: 2 }),
            consumer(ConsumerCommand::Nak {
                stream_seq: 3,
                delay_nanos: Some(4),
                now_nanos: 5,
            }),
            consumer(ConsumerCommand::Term { stream_seq: 6 }),
            consumer(ConsumerCommand::InProgress {
                stream_seq: 7,
                now_nanos: 8,
            }),
        ] {
            round_trip(command);
        }
    }

    #[test]
    fn appends_travel_raw_and_come_back() {
        for (subject, headers, payload) in [
            ("s.a", None, &b""[..]),
            (
                "s.b",
                Some(&b"NATS/1.0\r\nA: b\r\n\r\n"[..]),
                &b"\0\x01\xff"[..],
            ),
            ("s.c", Some(&b""[..]), &b"x"[..]),
        ] {
            let command = encode_append(subject.as_bytes(), headers, payload, -7);
            assert_eq!(command.kind, STREAM_APPEND_V1);
            let expected = StreamCommand::Append(AppendRequest {
                subject: subject.into(),
                headers: headers.map(Bytes::copy_from_slice),
                payload: Bytes::copy_from_slice(payload),
                now_nanos: -7,
            });
            assert_eq!(decode_command(&command).unwrap(), expected);
            assert_eq!(encode_command(expected.clone()), command);
            for cut in 0..command.payload.len().min(16) {
                let torn = Command::new(STREAM_APPEND_V1, command.payload.slice(..cut));
                assert!(decode_command(&torn).is_err(), "cut at {cut}");
            }
        }
        let purge = StreamCommand::DeleteMsg { seq: 4 };
        assert_eq!(
            decode_command(&encode_command(purge.clone())).unwrap(),
            purge
        );
    }

    #[test]
    fn atomic_batches_travel_raw_and_torn_ones_are_refused() {
        let member = |subject: &str, headers: Option<&'static [u8]>| AppendRequest {
            subject: subject.into(),
            headers: headers.map(Bytes::from_static),
            payload: Bytes::from_static(b"xy"),
            now_nanos: 9,
        };
        let batch = StreamCommand::AppendBatch(vec![
            member("s.a", Some(b"NATS/1.0\r\nNats-Batch-Id: b\r\n\r\n")),
            member("s.b", None),
        ]);
        let command = encode_command(batch.clone());
        assert_eq!(command.kind, STREAM_APPEND_BATCH_V1);
        assert_eq!(decode_command(&command).unwrap(), batch);
        for cut in 0..command.payload.len() {
            let torn = Command::new(STREAM_APPEND_BATCH_V1, command.payload.slice(..cut));
            assert!(decode_command(&torn).is_err(), "cut at {cut}");
        }
        let mut longer = command.payload.to_vec();
        longer.push(0);
        assert!(decode_command(&Command::new(STREAM_APPEND_BATCH_V1, longer)).is_err());
        // A huge member count in a short payload is malformed, not an allocation.
        let lying = Command::new(STREAM_APPEND_BATCH_V1, u32::MAX.to_le_bytes().to_vec());
        assert!(decode_command(&lying).is_err());
        // The postcard form (variant 9) decodes to the same batch.
        round_trip(batch);
    }

    #[test]
    fn variant_indexes_are_the_documented_ones() {
        // postcard writes the variant index first: pin a few so a reorder fails loudly.
        let first_byte = |wire: &StreamCommandWire| payload::encode(wire)[0];
        assert_eq!(first_byte(&StreamCommandWire::Expire { now_nanos: 0 }), 3);
        assert_eq!(
            first_byte(&StreamCommandWire::Consumer {
                name: String::new(),
                command: ConsumerCommand::Term { stream_seq: 0 },
            }),
            7
        );
        assert_eq!(
            payload::encode(&ConsumerCommand::InProgress {
                stream_seq: 0,
                now_nanos: 0
            })[0],
            5
        );
    }
}
