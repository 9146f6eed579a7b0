//! `$JS.API.STREAM.MSG.GET.<S>` (and the JSON form of `DIRECT.GET`): which message to fetch,
//! and the stored message as the JSON reply carries it (headers and data base64-encoded).

use serde::{Deserialize, Serialize};

use super::base64::serde_bytes;
use super::error::{ApiError, ErrorKind};
use super::serde_util::{is_false, is_zero_i64, is_zero_u64, nullable};
use super::time::{self, Timestamp};

/// A message-get request. Exactly one way of choosing is allowed: `seq`, `last_by_subj`,
/// `next_by_subj` (optionally from `seq`), or `start_time` (optionally with `next_by_subj`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MsgGetRequest {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub seq: u64,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub last_by_subj: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub next_by_subj: String,
    /// Direct-get batch (ADR-31); not valid on `STREAM.MSG.GET`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub batch: i64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_bytes: i64,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Timestamp>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub multi_last: Vec<String>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub up_to_seq: u64,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub up_to_time: Option<Timestamp>,
    /// Leave the stored headers out.
    #[serde(
        rename = "no_hdr",
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub no_headers: bool,
}

/// What a single-message get asks for, once validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MsgSelector {
    /// The message with exactly this sequence.
    Sequence(u64),
    /// The last message on a subject (wildcards allowed).
    LastBySubject(String),
    /// The first message at or after `from_seq` on a subject (wildcards allowed).
    NextBySubject { subject: String, from_seq: u64 },
    /// The first message at or after a time, optionally on a subject.
    FirstAtOrAfter { time: Timestamp, subject: String },
}

impl MsgGetRequest {
    /// Validates the combination as nats-server does for `STREAM.MSG.GET` (10003 when
    /// contradictory, empty, or a batch form).
    pub fn selector(&self) -> Result<MsgSelector, ApiError> {
        let bad = || ApiError::new(ErrorKind::BadRequest);
        if self.batch > 0 || self.max_bytes > 0 || !self.multi_last.is_empty() {
            return Err(bad());
        }
        let has_seq = self.seq > 0;
        let has_last = !self.last_by_subj.is_empty();
        let has_next = !self.next_by_subj.is_empty();
        let has_time = self.start_time.is_some();
        if (has_seq && has_last)
            || (!has_seq && !has_last && !has_next && !has_time)
            || (has_seq && has_time)
            || (has_time && has_last)
            || (has_last && has_next)
        {
            return Err(bad());
        }
        Ok(if let Some(time) = self.start_time {
            MsgSelector::FirstAtOrAfter {
                time,
                subject: self.next_by_subj.clone(),
            }
        } else if has_last {
            MsgSelector::LastBySubject(self.last_by_subj.clone())
        } else if has_next {
            MsgSelector::NextBySubject {
                subject: self.next_by_subj.clone(),
                from_seq: self.seq,
            }
        } else {
            MsgSelector::Sequence(self.seq)
        })
    }
}

/// A stored message in a `stream_msg_get_response`. `hdrs` is the raw `NATS/1.0` header
/// block; both byte fields are base64 and omitted when empty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoredMsg {
    pub subject: String,
    pub seq: u64,
    #[serde(
        rename = "hdrs",
        with = "serde_bytes",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub headers: Vec<u8>,
    #[serde(with = "serde_bytes", skip_serializing_if = "Vec::is_empty")]
    pub data: Vec<u8>,
    pub time: Timestamp,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn selector(body: serde_json::Value) -> Result<MsgSelector, ApiError> {
        serde_json::from_value::<MsgGetRequest>(body)
            .unwrap()
            .selector()
    }

    #[test]
    fn selectors() {
        assert_eq!(selector(json!({"seq":5})), Ok(MsgSelector::Sequence(5)));
        assert_eq!(
            selector(json!({"last_by_subj":"orders.new"})),
            Ok(MsgSelector::LastBySubject("orders.new".into()))
        );
        assert_eq!(
            selector(json!({"next_by_subj":"orders.*","seq":3})),
            Ok(MsgSelector::NextBySubject {
                subject: "orders.*".into(),
                from_seq: 3
            })
        );
        for bad in [
            json!({}),
            json!({"seq":1,"last_by_subj":"a"}),
            json!({"last_by_subj":"a","next_by_subj":"b"}),
            json!({"seq":1,"batch":5}),
        ] {
            assert_eq!(selector(bad.clone()).unwrap_err().err_code, 10003, "{bad}");
        }
    }

    #[test]
    fn stored_msg_is_base64() {
        let msg = StoredMsg {
            subject: "orders.new".into(),
            seq: 1,
            headers: b"NATS/1.0\r\nA: b\r\n\r\n".to_vec(),
            data: b"Order #1234".to_vec(),
            time: Timestamp::from_unix_nanos(0),
        };
        let value = serde_json::to_value(&msg).unwrap();
        assert_eq!(value["data"], json!("T3JkZXIgIzEyMzQ="));
        assert_eq!(value["hdrs"], json!("TkFUUy8xLjANCkE6IGINCg0K"));
        assert_eq!(serde_json::from_value::<StoredMsg>(value).unwrap(), msg);
        let bare = StoredMsg {
            subject: "a".into(),
            seq: 2,
            ..StoredMsg::default()
        };
        let value = serde_json::to_value(&bare).unwrap();
        assert!(value.get("data").is_none() && value.get("hdrs").is_none());
    }
}
