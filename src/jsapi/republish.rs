//! The message a stream republishes after storing one (ADR-28, `republish` in the stream
//! config): its destination is the republish transform of the stored subject, its headers
//! the stored ones followed by `Nats-Stream`, `Nats-Subject`, `Nats-Sequence`,
//! `Nats-Time-Stamp` and `Nats-Last-Sequence` (the last sequence on the same subject before
//! this one, 0 if none), plus `Nats-Msg-Size` and no payload when `headers_only` is set — the
//! headers and order nats-server's `processJetStreamMsg` writes.
//!
//! Pure: the front (`jetstream::republish`) sends what this builds, on the stream's leader.

use bytes::Bytes;

use super::direct_get::StoredHeaders;
use super::stream_config::RePublish;
use super::time::Timestamp;
use crate::subject::transform::SubjectTransform;

/// A stream's parsed `republish` setting. Built from the config whenever it is read.
#[derive(Debug, Clone)]
pub struct Republisher {
    transform: SubjectTransform,
    headers_only: bool,
}

/// One stored message, as the republisher needs it.
#[derive(Debug, Clone, Copy)]
pub struct StoredRef<'a> {
    pub stream: &'a str,
    pub subject: &'a str,
    pub headers: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub seq: u64,
    pub ts_nanos: i64,
    pub last_subject_seq: u64,
}

/// What to publish: destination, header block, payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Republished {
    pub subject: String,
    pub headers: Bytes,
    pub payload: Bytes,
}

impl Republisher {
    /// `None` without a republish setting, or (never for a validated config) with a
    /// transform that does not parse.
    pub fn of(config: Option<&RePublish>) -> Option<Self> {
        let config = config?;
        let transform = SubjectTransform::new(&config.src, &config.dest).ok()?;
        Some(Self {
            transform,
            headers_only: config.headers_only,
        })
    }

    /// The message to republish for `stored`, or `None` when its subject is not the
    /// republish source's.
    pub fn message(&self, stored: &StoredRef<'_>) -> Option<Republished> {
        let subject = self.transform.apply(stored.subject)?;
        let mut block = StoredHeaders::extend(stored.headers);
        block.line("Nats-Stream", stored.stream);
        block.line("Nats-Subject", stored.subject);
        block.line("Nats-Sequence", &stored.seq.to_string());
        let time = Timestamp::from_unix_nanos(stored.ts_nanos).to_string();
        block.line("Nats-Time-Stamp", &time);
        block.line("Nats-Last-Sequence", &stored.last_subject_seq.to_string());
        let payload = if self.headers_only {
            block.line("Nats-Msg-Size", &stored.payload.len().to_string());
            Bytes::new()
        } else {
            Bytes::copy_from_slice(stored.payload)
        };
        Some(Republished {
            subject,
            headers: Bytes::from(block.finish()),
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn republisher(src: &str, dest: &str, headers_only: bool) -> Republisher {
        Republisher::of(Some(&RePublish {
            src: src.into(),
            dest: dest.into(),
            headers_only,
        }))
        .unwrap()
    }

    fn stored<'a>(subject: &'a str, headers: Option<&'a [u8]>) -> StoredRef<'a> {
        StoredRef {
            stream: "ORDERS",
            subject,
            headers,
            payload: b"hello",
            seq: 7,
            ts_nanos: 1_500_000_000,
            last_subject_seq: 3,
        }
    }

    #[test]
    fn headers_follow_nats_servers_order() {
        let out = republisher("orders.*", "copy.$1", false)
            .message(&stored("orders.a", None))
            .unwrap();
        assert_eq!(out.subject, "copy.a");
        assert_eq!(
            &out.headers[..],
            b"NATS/1.0\r\nNats-Stream: ORDERS\r\nNats-Subject: orders.a\r\nNats-Sequence: 7\r\n\
              Nats-Time-Stamp: 1970-01-01T00:00:01.5Z\r\nNats-Last-Sequence: 3\r\n\r\n"
        );
        assert_eq!(&out.payload[..], b"hello");
    }

    #[test]
    fn stored_headers_come_first_and_headers_only_sends_the_size() {
        let out = republisher(">", "copy.>", true)
            .message(&stored("orders.a", Some(b"NATS/1.0\r\nX: 1\r\n\r\n")))
            .unwrap();
        assert_eq!(out.subject, "copy.orders.a");
        assert!(out
            .headers
            .starts_with(b"NATS/1.0\r\nX: 1\r\nNats-Stream: ORDERS\r\n"));
        assert!(out
            .headers
            .ends_with(b"Nats-Last-Sequence: 3\r\nNats-Msg-Size: 5\r\n\r\n"));
        assert!(out.payload.is_empty());
    }

    #[test]
    fn other_subjects_are_not_republished() {
        let republisher = republisher("orders.a", "copy", false);
        assert!(republisher.message(&stored("orders.b", None)).is_none());
    }
}
