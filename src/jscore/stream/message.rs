//! A stream message: what the stream keeps of it in memory ([`MsgMeta`], 16 bytes), what
//! its queries return of it ([`MsgInfo`]), the whole message as the front reads it from the
//! message store ([`StoredMsg`]), and the byte size a stream accounts for it.
//!
//! Replicated: every replica keeps the same metadata for the same sequence (the timestamp
//! comes from the Append command, never from a local clock). The headers and payload are not
//! kept here: the stream group's state machine writes them to its message blocks and the
//! front reads them back through the node's block cache (`jetstream::stream_machine`).

use bytes::Bytes;

use crate::jsapi::stream_config::StorageType;

use super::subject_index::SubjectId;

/// What a stream keeps in memory per message: its time, the size it accounts for it and
/// its interned subject. 16 bytes, and an `Option` of it too (the subject id is non-zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MsgMeta {
    pub ts_nanos: i64,
    /// `stored_size` for the stream's storage type (a message is below 4 GiB: max_payload).
    pub size: u32,
    pub subject: SubjectId,
}

/// A stored message as the stream's queries return it: everything but its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgInfo<'a> {
    pub subject: &'a str,
    /// Receive time in nanoseconds since the Unix epoch, chosen by the leader.
    pub ts_nanos: i64,
    /// The size the stream accounts for it (`stored_size`).
    pub stored_size: u64,
}

/// A whole message as stored in a stream: what the publisher sent (minus the reply subject,
/// which is only used for the PubAck) plus the receive time assigned by the leader. The
/// stream state does not hold these; the front assembles one from a [`MsgInfo`] and the
/// body it reads from the message store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMsg {
    pub subject: String,
    /// The `NATS/1.0` header block exactly as published, `None` when there was none.
    pub headers: Option<Bytes>,
    pub payload: Bytes,
    /// Receive time in nanoseconds since the Unix epoch, chosen by the leader.
    pub ts_nanos: i64,
}

impl StoredMsg {
    /// Length of the header block (0 without headers).
    pub fn headers_len(&self) -> usize {
        self.headers.as_ref().map_or(0, Bytes::len)
    }

    /// The size this message adds to the stream's `bytes`, as nats-server computes it for the
    /// stream's storage type (so `nats stream info` shows the same numbers).
    pub fn stored_size(&self, storage: StorageType) -> u64 {
        stored_size(
            storage,
            self.subject.len(),
            self.headers_len(),
            self.payload.len(),
        )
    }
}

/// nats-server's per-message accounting. The two store types count differently, and
/// clients see the difference in `state.bytes`, so we follow the configured one:
///
/// * file storage (`fileStoreMsgSize`): the on-disk record, that is 4 (length), 8 (seq),
///   8 (ts), 2 (subject length), subject, payload and 8 (hash), plus 4 (header length) and
///   the headers when there are headers;
/// * memory storage (`memStoreMsgSize`): subject + headers + payload + 16 (seq and ts).
pub fn stored_size(
    storage: StorageType,
    subject_len: usize,
    headers_len: usize,
    payload_len: usize,
) -> u64 {
    const FILE_RECORD_OVERHEAD: usize = 4 + 8 + 8 + 2 + 8;
    const FILE_HEADER_LENGTH_FIELD: usize = 4;
    const MEMORY_OVERHEAD: usize = 16;
    let size = match storage {
        StorageType::File if headers_len == 0 => FILE_RECORD_OVERHEAD + subject_len + payload_len,
        StorageType::File => {
            FILE_RECORD_OVERHEAD
                + subject_len
                + FILE_HEADER_LENGTH_FIELD
                + headers_len
                + payload_len
        }
        StorageType::Memory => subject_len + headers_len + payload_len + MEMORY_OVERHEAD,
    };
    size as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_nats_server_formulas() {
        // "orders.new" (10) with "Order #1234" (11): 30 + 10 + 11 on file.
        assert_eq!(stored_size(StorageType::File, 10, 0, 11), 51);
        // Headers add their length and a 4-byte length field on file.
        assert_eq!(stored_size(StorageType::File, 10, 20, 11), 75);
        assert_eq!(stored_size(StorageType::Memory, 10, 20, 11), 57);
        assert_eq!(stored_size(StorageType::Memory, 10, 0, 11), 37);
    }
}
