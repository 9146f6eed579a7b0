//! The on-disk format of a stream group's state: its sled keys (the group prefix already
//! stripped by consensus) and the records stored under them. The table is in the module doc
//! of `stream_machine`. Append-only: never change what a key or a record version means; a new
//! encoding gets a new version byte (values) or a new layout version (keys).
//!
//! Every value starts with a version byte ([`VALUE_V1`]); records are postcard after it,
//! configs JSON (their serde attributes are tuned for JSON, see `jetstream::payload`).

use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

pub use super::block_format::{block_msg_len, encode_block, parse_block, BlockMsg};
use super::entry::ConsumerDefinition;
use crate::consensus::MachineError;
use crate::jetstream::payload::JsonValue;
use crate::jscore::consumer::{ConsumerExport, LastPerSubjectPlan, PendingEntry, SequencePair};
use crate::jscore::stream::{DedupRecord, StoredMsg, StreamScalars};

/// Key holding the layout version of all the others.
pub const LAYOUT: &[u8] = b"v";
/// Layout 1: one `m/` key per message.
pub const LAYOUT_V1: u8 = 1;
/// Layout 2: messages in `b/` blocks with `x/` tombstones; `m/` keys left by layout 1 are
/// still read, and deleted as their messages go.
pub const LAYOUT_V2: u8 = 2;
/// Layout 3: as layout 2, but a `b/` value may also be a locator of the block in the
/// group's segment files (`segments.rs`, ADR 0022); blocks in sled are still read.
pub const LAYOUT_V3: u8 = 3;
/// Layout 4: as layout 3, but a block in a segment file may be several `BLOCK_V2` frames
/// back to back, its locator covering them all (`extend.rs`, ADR 0031).
pub const LAYOUT_V4: u8 = 4;
/// Version byte of every value written by this code, `b/` blocks excepted.
pub const VALUE_V1: u8 = 1;
/// Version byte of the `b/` blocks written by this code: the postcard body follows a crc32c
/// of it (ADR 0018). Blocks under [`VALUE_V1`] (no checksum) are still read.
pub const BLOCK_V2: u8 = 2;

pub const STREAM_CONFIG: &[u8] = b"s/config";
pub const STREAM_STATE: &[u8] = b"s/state";
/// `s/sched`: 1 ++ postcard i64, the stream's schedule clock (`StreamState::schedule_clock`);
/// absent until a schedule fired (ADR 0025; added in layout 3 without a new version).
pub const SCHEDULE_CLOCK: &[u8] = b"s/sched";
pub const DEDUP_PREFIX: &[u8] = b"d/";
pub const MESSAGE_PREFIX: &[u8] = b"m/";
pub const BLOCK_PREFIX: &[u8] = b"b/";
pub const TOMBSTONE_PREFIX: &[u8] = b"x/";
pub const CONSUMER_PREFIX: &[u8] = b"c/";

/// What follows a consumer's prefix.
pub const CONSUMER_CONFIG: u8 = b'c';
pub const CONSUMER_STATE: u8 = b's';
pub const CONSUMER_PENDING: u8 = b'p';
pub const CONSUMER_PENDING_CHUNK: u8 = b'q';

/// A pending chunk holds the entries of stream sequences `chunk << PENDING_CHUNK_BITS` up
/// to the next chunk.
pub const PENDING_CHUNK_BITS: u32 = 10;

/// The chunk a stream sequence's pending entry lives in.
pub fn pending_chunk_of(stream_seq: u64) -> u64 {
    stream_seq >> PENDING_CHUNK_BITS
}

/// The stream sequences of a chunk.
pub fn pending_chunk_seqs(chunk: u64) -> std::ops::RangeInclusive<u64> {
    let first = chunk << PENDING_CHUNK_BITS;
    first..=first | ((1 << PENDING_CHUNK_BITS) - 1)
}

fn with_u64(prefix: &[u8], value: u64) -> Vec<u8> {
    let mut key = Vec::with_capacity(prefix.len() + 8);
    key.extend_from_slice(prefix);
    key.extend_from_slice(&value.to_be_bytes());
    key
}

/// `m/` ++ sequence (big endian, so keys sort by sequence).
pub fn message(seq: u64) -> Vec<u8> {
    with_u64(MESSAGE_PREFIX, seq)
}

/// `b/` ++ first sequence of the block (big endian).
pub fn block(first_seq: u64) -> Vec<u8> {
    with_u64(BLOCK_PREFIX, first_seq)
}

/// `x/` ++ sequence: a message deleted from a block that is still stored.
pub fn tombstone(seq: u64) -> Vec<u8> {
    with_u64(TOMBSTONE_PREFIX, seq)
}

/// `d/` ++ ordinal: duplicate-window entries in recording order.
pub fn dedup(ordinal: u64) -> Vec<u8> {
    with_u64(DEDUP_PREFIX, ordinal)
}

/// `c/` ++ name length (u32 BE) ++ name. Length-prefixed rather than separator-terminated so
/// no name is a key prefix of another's keys, whatever characters names may contain.
pub fn consumer_prefix(name: &str) -> Vec<u8> {
    let mut key = CONSUMER_PREFIX.to_vec();
    key.extend_from_slice(&(name.len() as u32).to_be_bytes());
    key.extend_from_slice(name.as_bytes());
    key
}

pub fn consumer_config(name: &str) -> Vec<u8> {
    let mut key = consumer_prefix(name);
    key.push(CONSUMER_CONFIG);
    key
}

pub fn consumer_state(name: &str) -> Vec<u8> {
    let mut key = consumer_prefix(name);
    key.push(CONSUMER_STATE);
    key
}

pub fn pending(name: &str, stream_seq: u64) -> Vec<u8> {
    let mut key = consumer_prefix(name);
    key.push(CONSUMER_PENDING);
    key.extend_from_slice(&stream_seq.to_be_bytes());
    key
}

/// `c/<name>q<chunk>`: the consumer's pending entries of one chunk of stream sequences.
pub fn pending_chunk(name: &str, chunk: u64) -> Vec<u8> {
    let mut key = consumer_prefix(name);
    key.push(CONSUMER_PENDING_CHUNK);
    key.extend_from_slice(&chunk.to_be_bytes());
    key
}

/// A key under `c/`, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub enum ConsumerKey {
    Config(String),
    State(String),
    /// Layout 1: one pending entry per key.
    Pending(String, u64),
    PendingChunk(String, u64),
}

pub fn parse_consumer_key(key: &[u8]) -> Result<ConsumerKey, MachineError> {
    let corrupt = || MachineError::Corrupt(format!("bad consumer key {key:?}"));
    let rest = key.strip_prefix(CONSUMER_PREFIX).ok_or_else(corrupt)?;
    let (len, rest) = rest.split_first_chunk::<4>().ok_or_else(corrupt)?;
    let len = u32::from_be_bytes(*len) as usize;
    if rest.len() <= len {
        return Err(corrupt());
    }
    let (name, rest) = rest.split_at(len);
    let name = String::from_utf8(name.to_vec()).map_err(|_| corrupt())?;
    match rest {
        [CONSUMER_CONFIG] => Ok(ConsumerKey::Config(name)),
        [CONSUMER_STATE] => Ok(ConsumerKey::State(name)),
        [CONSUMER_PENDING, seq @ ..] => {
            let seq: [u8; 8] = seq.try_into().map_err(|_| corrupt())?;
            Ok(ConsumerKey::Pending(name, u64::from_be_bytes(seq)))
        }
        [CONSUMER_PENDING_CHUNK, chunk @ ..] => {
            let chunk: [u8; 8] = chunk.try_into().map_err(|_| corrupt())?;
            Ok(ConsumerKey::PendingChunk(name, u64::from_be_bytes(chunk)))
        }
        _ => Err(corrupt()),
    }
}

/// The big-endian u64 after `prefix` (message and dedup keys).
pub fn parse_u64_key(prefix: &[u8], key: &[u8]) -> Result<u64, MachineError> {
    key.strip_prefix(prefix)
        .and_then(|rest| <[u8; 8]>::try_from(rest).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| MachineError::Corrupt(format!("bad key {key:?}")))
}

/// `VALUE_V1` ++ postcard.
pub fn encode<T: Serialize>(record: &T) -> Bytes {
    encode_with_capacity(record, 64)
}

/// [`encode`] into a buffer sized up front (messages: their payload dominates), so the
/// encoding never reallocates on the hot path.
pub fn encode_with_capacity<T: Serialize>(record: &T, capacity: usize) -> Bytes {
    let mut value = Vec::with_capacity(capacity);
    value.push(VALUE_V1);
    Bytes::from(postcard::to_extend(record, value).expect("in-memory encoding"))
}

pub fn decode<T: DeserializeOwned>(what: &'static str, value: &[u8]) -> Result<T, MachineError> {
    match value.split_first() {
        Some((&VALUE_V1, body)) => {
            postcard::from_bytes(body).map_err(MachineError::undecodable_record(what))
        }
        _ => Err(MachineError::UnknownRecordVersion { what }),
    }
}

/// `s/state`: the stream's scalars and where the duplicate window's keys start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamRecordV1 {
    pub first_seq: u64,
    pub last_seq: u64,
    pub last_ts_nanos: i64,
    pub bytes: u64,
    pub last_msg_id: String,
    /// Ordinal of the oldest `d/` entry.
    pub dedup_first: u64,
}

impl StreamRecordV1 {
    pub fn new(scalars: StreamScalars, dedup_first: u64) -> Self {
        StreamRecordV1 {
            first_seq: scalars.first_seq,
            last_seq: scalars.last_seq,
            last_ts_nanos: scalars.last_ts_nanos,
            bytes: scalars.bytes,
            last_msg_id: scalars.last_msg_id,
            dedup_first,
        }
    }

    pub fn scalars(self) -> StreamScalars {
        StreamScalars {
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            last_ts_nanos: self.last_ts_nanos,
            bytes: self.bytes,
            last_msg_id: self.last_msg_id,
        }
    }
}

/// `d/<ordinal>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DedupEntryV1 {
    pub ts_nanos: i64,
    pub msg_id: String,
    pub seq: Option<u64>,
}

impl From<DedupEntryV1> for DedupRecord {
    fn from(entry: DedupEntryV1) -> Self {
        DedupRecord {
            ts_nanos: entry.ts_nanos,
            msg_id: entry.msg_id,
            seq: entry.seq,
        }
    }
}

/// `m/<seq>`. `Bytes` serialize as byte strings (bytes' serde feature).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMsgV1 {
    pub subject: String,
    pub headers: Option<Bytes>,
    pub payload: Bytes,
    pub ts_nanos: i64,
}

impl From<&StoredMsg> for StoredMsgV1 {
    fn from(msg: &StoredMsg) -> Self {
        StoredMsgV1 {
            subject: msg.subject.clone(),
            headers: msg.headers.clone(),
            payload: msg.payload.clone(),
            ts_nanos: msg.ts_nanos,
        }
    }
}

impl From<StoredMsgV1> for StoredMsg {
    fn from(msg: StoredMsgV1) -> Self {
        StoredMsg {
            subject: msg.subject,
            headers: msg.headers,
            payload: msg.payload,
            ts_nanos: msg.ts_nanos,
        }
    }
}

/// One message inside a `b/` block value, as written: borrowed from the stored message, so
/// encoding a block copies each message once, into the block.
/// `c/<name>c`: the consumer's config and creation time, as JSON inside the record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerConfigV1 {
    pub config: JsonValue<ConsumerDefinition>,
}

/// `c/<name>s`: a consumer's positions (everything but config and pending entries).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerStateV1 {
    pub next_consumer_seq: u64,
    pub next_stream_seq: u64,
    /// (consumer sequence, stream sequence).
    pub ack_floor: (u64, u64),
    /// (stream sequence, delivery count) of messages out of deliveries.
    pub exhausted: Vec<(u64, u64)>,
    /// The `last_per_subject` plan: sequences still to deliver, and where to resume.
    pub last_per_subject: Option<(Vec<u64>, u64)>,
}

impl From<ConsumerExport> for ConsumerStateV1 {
    fn from(export: ConsumerExport) -> Self {
        ConsumerStateV1 {
            next_consumer_seq: export.next_consumer_seq,
            next_stream_seq: export.next_stream_seq,
            ack_floor: (export.ack_floor.consumer_seq, export.ack_floor.stream_seq),
            exhausted: export.exhausted.into_iter().collect(),
            last_per_subject: export
                .last_per_subject
                .map(|plan| (plan.seqs.into(), plan.resume_after)),
        }
    }
}

impl From<ConsumerStateV1> for ConsumerExport {
    fn from(record: ConsumerStateV1) -> Self {
        ConsumerExport {
            next_consumer_seq: record.next_consumer_seq,
            next_stream_seq: record.next_stream_seq,
            ack_floor: SequencePair {
                consumer_seq: record.ack_floor.0,
                stream_seq: record.ack_floor.1,
            },
            exhausted: record.exhausted.into_iter().collect(),
            last_per_subject: record.last_per_subject.map(|(seqs, resume_after)| {
                LastPerSubjectPlan {
                    seqs: seqs.into(),
                    resume_after,
                }
            }),
        }
    }
}

/// `c/<name>q<chunk>`: `VALUE_V1` ++ postcard of (stream sequence, `PendingV1`) pairs, in
/// sequence order: every pending entry of the chunk.
pub fn encode_pending_chunk<'a>(entries: impl Iterator<Item = (u64, &'a PendingEntry)>) -> Bytes {
    let entries: Vec<(u64, PendingV1)> = entries
        .map(|(seq, entry)| (seq, PendingV1::from(entry)))
        .collect();
    encode_with_capacity(&entries, 8 + entries.len() * 24)
}

pub fn decode_pending_chunk(value: &[u8]) -> Result<Vec<(u64, PendingEntry)>, MachineError> {
    let entries: Vec<(u64, PendingV1)> = decode("pending chunk", value)?;
    Ok(entries
        .into_iter()
        .map(|(seq, entry)| (seq, entry.into()))
        .collect())
}

/// `c/<name>p<seq>`: one pending (delivered, unacknowledged) message (layout 1; layout 2
/// writes chunks).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingV1 {
    pub consumer_seq: u64,
    pub deliveries: u64,
    pub last_delivered_nanos: i64,
    pub redeliver_at_nanos: i64,
}

impl From<&PendingEntry> for PendingV1 {
    fn from(entry: &PendingEntry) -> Self {
        PendingV1 {
            consumer_seq: entry.consumer_seq,
            deliveries: entry.deliveries,
            last_delivered_nanos: entry.last_delivered_nanos,
            redeliver_at_nanos: entry.redeliver_at_nanos,
        }
    }
}

impl From<PendingV1> for PendingEntry {
    fn from(entry: PendingV1) -> Self {
        PendingEntry {
            consumer_seq: entry.consumer_seq,
            deliveries: entry.deliveries,
            last_delivered_nanos: entry.last_delivered_nanos,
            redeliver_at_nanos: entry.redeliver_at_nanos,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_keys_parse_back_and_names_never_prefix_each_other() {
        for name in ["a", "ab", "with/slash", ""] {
            assert_eq!(
                parse_consumer_key(&consumer_config(name)).unwrap(),
                ConsumerKey::Config(name.into())
            );
            assert_eq!(
                parse_consumer_key(&consumer_state(name)).unwrap(),
                ConsumerKey::State(name.into())
            );
            assert_eq!(
                parse_consumer_key(&pending(name, 42)).unwrap(),
                ConsumerKey::Pending(name.into(), 42)
            );
        }
        assert_eq!(
            parse_consumer_key(&pending_chunk("ab", 3)).unwrap(),
            ConsumerKey::PendingChunk("ab".into(), 3)
        );
        assert_eq!(pending_chunk_of(1023), 0);
        assert_eq!(pending_chunk_of(1024), 1);
        assert_eq!(pending_chunk_seqs(1), 1024..=2047);
        assert!(!pending("ab", 1).starts_with(&consumer_prefix("a")));
        assert!(parse_consumer_key(b"c/\0\0\0\x05ab").is_err());
        assert!(message(1) < message(256), "sequences sort numerically");
        assert_eq!(parse_u64_key(MESSAGE_PREFIX, &message(77)).unwrap(), 77);
    }

    #[test]
    fn values_carry_their_version() {
        let msg = StoredMsgV1 {
            subject: "s.a".into(),
            headers: Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")),
            payload: Bytes::from_static(b"payload"),
            ts_nanos: 5,
        };
        let value = encode(&msg);
        assert_eq!(value[0], VALUE_V1);
        assert_eq!(decode::<StoredMsgV1>("msg", &value).unwrap(), msg);
        let mut future = value.to_vec();
        future[0] = 2;
        assert!(decode::<StoredMsgV1>("msg", &future).is_err());
    }
}
