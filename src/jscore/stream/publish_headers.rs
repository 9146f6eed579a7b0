//! The `Nats-*` publish headers a stream interprets when it stores a message
//! (jetstream-wire.md §3.4): de-duplication id, expected stream / last sequence / last
//! subject sequence / last msg id, and rollup.
//!
//! Parsed while applying an Append, from the header block in the command, so every replica
//! reaches the same verdict.

use crate::wire::headers::lookup;

pub const MSG_ID: &str = "Nats-Msg-Id";
pub const EXPECTED_STREAM: &str = "Nats-Expected-Stream";
pub const EXPECTED_LAST_SEQ: &str = "Nats-Expected-Last-Sequence";
pub const EXPECTED_LAST_SUBJECT_SEQ: &str = "Nats-Expected-Last-Subject-Sequence";
pub const EXPECTED_LAST_SUBJECT_SEQ_SUBJECT: &str = "Nats-Expected-Last-Subject-Sequence-Subject";
pub const EXPECTED_LAST_MSG_ID: &str = "Nats-Expected-Last-Msg-Id";
pub const ROLLUP: &str = "Nats-Rollup";

/// A header block holding `headers`, in order (tests).
#[cfg(test)]
pub fn header_block(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut block = String::from("NATS/1.0\r\n");
    for (name, value) in headers {
        block += &format!("{name}: {value}\r\n");
    }
    block += "\r\n";
    block.into_bytes()
}

/// What a `Nats-Rollup` header asks for after the message is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollup {
    /// `sub`: keep only this message on its subject.
    Subject,
    /// `all`: keep only this message in the stream.
    All,
}

/// The interpreted headers of one publish. Absent or empty headers are `None`, as
/// nats-server treats an empty value like a missing header.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PublishHeaders {
    pub msg_id: Option<String>,
    pub expected_stream: Option<String>,
    pub expected_last_seq: Option<u64>,
    pub expected_last_subject_seq: Option<u64>,
    pub expected_last_subject_seq_subject: Option<String>,
    pub expected_last_msg_id: Option<String>,
    /// The raw rollup value, lower-cased; validated by the stream (it needs the config).
    pub rollup: Option<String>,
}

impl PublishHeaders {
    pub fn parse(block: Option<&[u8]>) -> Self {
        let Some(block) = block else {
            return Self::default();
        };
        let text = |name: &str| {
            lookup(block, name)
                .filter(|value| !value.is_empty())
                .map(|value| String::from_utf8_lossy(value).trim_end().to_string())
        };
        Self {
            msg_id: text(MSG_ID),
            expected_stream: text(EXPECTED_STREAM),
            expected_last_seq: text(EXPECTED_LAST_SEQ).map(|v| parse_sequence(&v)),
            expected_last_subject_seq: text(EXPECTED_LAST_SUBJECT_SEQ).map(|v| parse_sequence(&v)),
            expected_last_subject_seq_subject: text(EXPECTED_LAST_SUBJECT_SEQ_SUBJECT),
            expected_last_msg_id: text(EXPECTED_LAST_MSG_ID),
            rollup: text(ROLLUP).map(|v| v.to_ascii_lowercase()),
        }
    }

    /// The rollup requested, `Err(value)` for an unknown value.
    pub fn rollup(&self) -> Result<Option<Rollup>, &str> {
        match self.rollup.as_deref() {
            None => Ok(None),
            Some("sub") => Ok(Some(Rollup::Subject)),
            Some("all") => Ok(Some(Rollup::All)),
            Some(other) => Err(other),
        }
    }
}

/// An expected-sequence value. nats-server parses these with a helper that yields -1 on
/// garbage, which as an unsigned sequence never matches; `u64::MAX` keeps that outcome.
fn parse_sequence(value: &str) -> u64 {
    value.parse().unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_headers() {
        let block = b"NATS/1.0\r\nNats-Msg-Id: m1\r\nNats-Expected-Last-Sequence: 7\r\nNats-Rollup: SUB\r\nNats-Expected-Stream: S\r\n\r\n";
        let headers = PublishHeaders::parse(Some(block));
        assert_eq!(headers.msg_id.as_deref(), Some("m1"));
        assert_eq!(headers.expected_last_seq, Some(7));
        assert_eq!(headers.expected_stream.as_deref(), Some("S"));
        assert_eq!(headers.rollup(), Ok(Some(Rollup::Subject)));
        assert_eq!(headers.expected_last_subject_seq, None);
    }

    #[test]
    fn garbage_sequence_never_matches_and_bad_rollup_is_reported() {
        let block = b"NATS/1.0\r\nNats-Expected-Last-Sequence: x\r\nNats-Rollup: some\r\n\r\n";
        let headers = PublishHeaders::parse(Some(block));
        assert_eq!(headers.expected_last_seq, Some(u64::MAX));
        assert_eq!(headers.rollup(), Err("some"));
        assert_eq!(PublishHeaders::parse(None), PublishHeaders::default());
    }
}
