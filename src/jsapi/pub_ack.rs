//! The reply to a publish into a stream: `{"stream","seq"}` (plus `duplicate` when the
//! `Nats-Msg-Id` was seen within the window, `domain` when configured, `val` on a counter
//! stream), or on failure
//! `{"error":{…},"stream":…,"seq":0}`. There is no `type` field.

use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::serde_util::{is_false, nullable};

/// A successful publish.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PubAck {
    pub stream: String,
    /// The message's sequence; for a duplicate, the original message's sequence.
    pub seq: u64,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub domain: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub duplicate: bool,
    /// A counter stream's new value (ADR-49), an integer in decimal.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub val: String,
}

/// What goes on the wire: a PubAck, or an error with the stream name and `seq: 0`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PubAckResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    #[serde(flatten)]
    pub ack: PubAck,
}

impl PubAckResponse {
    pub fn success(ack: PubAck) -> Self {
        Self { error: None, ack }
    }

    /// The failure form nats-server sends: error plus stream name and a zero sequence.
    pub fn failure(stream: impl Into<String>, error: ApiError) -> Self {
        Self {
            error: Some(error),
            ack: PubAck {
                stream: stream.into(),
                ..PubAck::default()
            },
        }
    }

    /// JSON bytes for the reply. The success form (every publish of a busy stream) is
    /// written by hand, byte for byte what serde would write; failures go through serde.
    pub fn to_json(&self) -> Vec<u8> {
        match &self.error {
            None => self.ack.to_json(),
            Some(_) => serde_json::to_vec(self).expect("PubAck serializes"),
        }
    }
}

impl PubAck {
    /// `{"stream":…,"seq":…}` plus `"domain"` and `"duplicate":true` when set: the same
    /// bytes as `serde_json::to_vec`, without serde's machinery on the publish hot path.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.stream.len() + self.domain.len());
        out.extend_from_slice(br#"{"stream":"#);
        write_json_string(&mut out, &self.stream);
        out.extend_from_slice(br#","seq":"#);
        out.extend_from_slice(itoa::Buffer::new().format(self.seq).as_bytes());
        if !self.domain.is_empty() {
            out.extend_from_slice(br#","domain":"#);
            write_json_string(&mut out, &self.domain);
        }
        if self.duplicate {
            out.extend_from_slice(br#","duplicate":true"#);
        }
        if !self.val.is_empty() {
            out.extend_from_slice(br#","val":"#);
            write_json_string(&mut out, &self.val);
        }
        out.push(b'}');
        out
    }
}

/// A JSON string literal as serde_json writes it (quotes, `\"`, `\\`, the short escapes,
/// `\u00XX` for other control characters; everything else verbatim).
fn write_json_string(out: &mut Vec<u8>, value: &str) {
    out.push(b'"');
    for &byte in value.as_bytes() {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[(byte >> 4) as usize]);
                out.push(HEX[(byte & 0xf) as usize]);
            }
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::error::ErrorKind;

    #[test]
    fn success_and_duplicate_forms() {
        let ack = PubAckResponse::success(PubAck {
            stream: "ORDERS".into(),
            seq: 42,
            ..PubAck::default()
        });
        assert_eq!(ack.to_json(), br#"{"stream":"ORDERS","seq":42}"#);
        let dup = PubAckResponse::success(PubAck {
            stream: "ORDERS".into(),
            seq: 17,
            duplicate: true,
            domain: "hub".into(),
            ..PubAck::default()
        });
        assert_eq!(
            dup.to_json(),
            br#"{"stream":"ORDERS","seq":17,"domain":"hub","duplicate":true}"#
        );
    }

    #[test]
    fn hand_written_json_is_what_serde_writes() {
        for (stream, domain) in [
            ("ORDERS", ""),
            ("S", "hub"),
            ("we\"ird\\na\u{1}me\n\t\r\u{8}\u{c}é", "d\"o"),
        ] {
            for (seq, duplicate, val) in [
                (0, false, ""),
                (1, true, ""),
                (u64::MAX, false, "-123456789012345678901234567890"),
            ] {
                let ack = PubAck {
                    stream: stream.into(),
                    seq,
                    domain: domain.into(),
                    duplicate,
                    val: val.into(),
                };
                let response = PubAckResponse::success(ack.clone());
                assert_eq!(ack.to_json(), serde_json::to_vec(&response).unwrap());
                assert_eq!(response.to_json(), serde_json::to_vec(&response).unwrap());
            }
        }
    }

    #[test]
    fn failure_form() {
        let err = PubAckResponse::failure(
            "ORDERS",
            ApiError::with(ErrorKind::StreamWrongLastSequence, &[&3u64]),
        );
        assert_eq!(
            String::from_utf8(err.to_json()).unwrap(),
            r#"{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"ORDERS","seq":0}"#
        );
        let back: PubAckResponse = serde_json::from_slice(&err.to_json()).unwrap();
        assert_eq!(back, err);
    }
}
