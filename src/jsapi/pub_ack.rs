//! The reply to a publish into a stream: `{"stream","seq"}` (plus `duplicate` when the
//! `Nats-Msg-Id` was seen within the window, `domain` when configured), or on failure
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

    /// JSON bytes for the reply.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("PubAck serializes")
    }
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
        });
        assert_eq!(
            dup.to_json(),
            br#"{"stream":"ORDERS","seq":17,"domain":"hub","duplicate":true}"#
        );
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
