//! Request bodies of the JetStream API calls other than stream/consumer create (those are
//! `StreamConfigRequest` and `CreateConsumerRequest`), and the body-parsing conventions
//! nats-server applies: an empty body means "no parameters" for optional-parameter calls,
//! delete calls insist on an empty body (10038), and undecodable JSON is 10025.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::error::{ApiError, ErrorKind};
use super::serde_util::{is_false, is_zero_i64, is_zero_u64, nullable};
use super::stream_config::Placement;
use super::time::{self, Timestamp};

/// Most names one `STREAM.NAMES`/`CONSUMER.NAMES` page carries.
pub const NAMES_PAGE_LIMIT: usize = 1024;
/// Most infos one `STREAM.LIST`/`CONSUMER.LIST` page carries.
pub const LIST_PAGE_LIMIT: usize = 256;

fn is_blank(body: &[u8]) -> bool {
    body.iter().all(u8::is_ascii_whitespace)
}

/// Decodes a required JSON body; any failure (including an empty body) is 10025.
pub fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|err| ApiError::with_detail(ErrorKind::InvalidJson, err))
}

/// Decodes an optional JSON body: empty (or whitespace) or `null` means `T::default()`
/// (async-nats sends `null` for "no options").
pub fn parse_optional_body<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, ApiError> {
    if is_blank(body) || body.trim_ascii() == b"null" {
        return Ok(T::default());
    }
    parse_body(body)
}

/// For calls that take no parameters and refuse any (`STREAM.DELETE`, `CONSUMER.DELETE`):
/// empty, `{}` or `null` pass; anything else is 10038.
pub fn require_empty_body(body: &[u8]) -> Result<(), ApiError> {
    if is_blank(body) {
        return Ok(());
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Null) => Ok(()),
        Ok(serde_json::Value::Object(map)) if map.is_empty() => Ok(()),
        _ => Err(ErrorKind::NotEmptyRequest.into()),
    }
}

/// `$JS.API.STREAM.NAMES` / `STREAM.LIST`: a page, optionally only streams whose subjects
/// overlap `subject`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamNamesRequest {
    #[serde(deserialize_with = "nullable")]
    pub offset: i64,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub subject: String,
}

/// `$JS.API.CONSUMER.NAMES.<S>` / `CONSUMER.LIST.<S>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumersRequest {
    #[serde(deserialize_with = "nullable")]
    pub offset: i64,
}

/// `$JS.API.STREAM.INFO.<S>` options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamInfoRequest {
    #[serde(deserialize_with = "nullable")]
    pub offset: i64,
    /// Include the deleted sequences in `state.deleted`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub deleted_details: bool,
    /// Include per-subject counts in `state.subjects` for subjects matching this filter.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub subjects_filter: String,
}

/// `$JS.API.STREAM.PURGE.<S>` options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamPurgeRequest {
    /// Only messages on subjects matching this (wildcards allowed).
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter: String,
    /// Purge up to but not including this sequence.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub seq: u64,
    /// Keep this many newest messages.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub keep: u64,
}

impl StreamPurgeRequest {
    /// `seq` and `keep` are mutually exclusive (10003).
    pub fn validate(&self) -> Result<(), ApiError> {
        if self.seq > 0 && self.keep > 0 {
            return Err(ErrorKind::BadRequest.into());
        }
        Ok(())
    }
}

/// `$JS.API.STREAM.MSG.DELETE.<S>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MsgDeleteRequest {
    #[serde(deserialize_with = "nullable")]
    pub seq: u64,
    /// Remove without overwriting the data on disk.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub no_erase: bool,
}

/// `$JS.API.STREAM.LEADER.STEPDOWN.<S>`, `CONSUMER.LEADER.STEPDOWN.<S>.<C>`,
/// `META.LEADER.STEPDOWN`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LeaderStepdownRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// `$JS.API.STREAM.PEER.REMOVE.<S>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerRemoveRequest {
    /// Server name or peer id.
    #[serde(deserialize_with = "nullable")]
    pub peer: String,
}

/// `$JS.API.CONSUMER.PAUSE.<S>.<C>`: pause until a time; absent or zero = resume.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerPauseRequest {
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<Timestamp>,
}

/// `$JS.API.CONSUMER.UNPIN.<S>.<C>`: drop the pin of a `pinned_client` priority group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerUnpinRequest {
    #[serde(deserialize_with = "nullable")]
    pub group: String,
}

/// `$JS.API.CONSUMER.RESET.<S>.<C>` (nats-server 2.14): start the consumer over from stream
/// sequence `seq`; absent, 0 or an empty body = from just above its ack floor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerResetRequest {
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub seq: u64,
}

/// A pull request sent to `$JS.API.CONSUMER.MSG.NEXT.<S>.<C>` (not a JSON API call: the
/// reply subject receives messages and status messages). Durations in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PullRequest {
    /// Most messages to deliver for this request.
    #[serde(deserialize_with = "nullable")]
    pub batch: i64,
    /// Lifetime; 0 = until the batch is filled or interest goes.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub expires: i64,
    /// Byte budget (0 = none).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_bytes: i64,
    /// Answer now: deliver what is there, end with 404 if the batch is not filled.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub no_wait: bool,
    /// Send `100 Idle Heartbeat` after this much idle time.
    #[serde(
        rename = "idle_heartbeat",
        deserialize_with = "nullable",
        skip_serializing_if = "is_zero_i64"
    )]
    pub idle_heartbeat: i64,
    /// Priority group (2.11).
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub group: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub min_pending: i64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub min_ack_pending: i64,
    /// Pin id for `pinned_client` groups.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub id: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub priority: i64,
}

impl Default for PullRequest {
    /// An empty pull body asks for one message with no expiry.
    fn default() -> Self {
        Self {
            batch: 1,
            expires: 0,
            max_bytes: 0,
            no_wait: false,
            idle_heartbeat: 0,
            group: String::new(),
            min_pending: 0,
            min_ack_pending: 0,
            id: String::new(),
            priority: 0,
        }
    }
}

/// Why a pull request body was refused. The delivery layer answers these with status
/// messages (`400 Bad Request`), not JSON errors.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullRequestError {
    #[error("malformed pull request: {0}")]
    Malformed(String),
    /// nats-server: `400 Bad Request - heartbeat value too large`.
    #[error("heartbeat value too large")]
    HeartbeatTooLarge,
}

impl PullRequest {
    /// Parses a pull body: empty = batch 1; a bare integer = that batch; else JSON. A JSON
    /// body without `batch` (or with 0) asks for one message, as nats-server treats it.
    pub fn parse(body: &[u8]) -> Result<Self, PullRequestError> {
        let text = std::str::from_utf8(body)
            .map_err(|_| PullRequestError::Malformed("not UTF-8".into()))?
            .trim();
        if text.is_empty() {
            return Ok(Self::default());
        }
        let mut request = if text.starts_with('{') {
            serde_json::from_str::<PullRequest>(text)
                .map_err(|err| PullRequestError::Malformed(err.to_string()))?
        } else {
            let batch = text
                .parse::<i64>()
                .map_err(|err| PullRequestError::Malformed(err.to_string()))?;
            Self {
                batch,
                ..Self::default()
            }
        };
        if request.batch <= 0 {
            request.batch = 1;
        }
        // As nats-server: also without `expires` (a heartbeat needs a request that expires).
        if request.idle_heartbeat > 0 && request.idle_heartbeat * 2 > request.expires {
            return Err(PullRequestError::HeartbeatTooLarge);
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_conventions() {
        let req: StreamNamesRequest = parse_optional_body(b"").unwrap();
        assert_eq!(req, StreamNamesRequest::default());
        let req: StreamNamesRequest =
            parse_optional_body(br#"{"offset":0,"subject":"orders.new"}"#).unwrap();
        assert_eq!(req.subject, "orders.new");
        let err = parse_optional_body::<StreamNamesRequest>(b"{nope").unwrap_err();
        assert_eq!(err.err_code, 10025);
        assert!(err.description.starts_with("invalid JSON: "));
        assert_eq!(
            parse_body::<MsgDeleteRequest>(b"").unwrap_err().err_code,
            10025
        );
        assert!(require_empty_body(b"").is_ok());
        assert!(require_empty_body(b" {} ").is_ok());
        assert_eq!(
            require_empty_body(br#"{"x":1}"#).unwrap_err().err_code,
            10038
        );
    }

    #[test]
    fn purge_seq_and_keep_are_exclusive() {
        let req: StreamPurgeRequest = parse_body(br#"{"filter":"a.>","keep":5}"#).unwrap();
        assert!(req.validate().is_ok());
        let req: StreamPurgeRequest = parse_body(br#"{"seq":10,"keep":5}"#).unwrap();
        assert_eq!(req.validate().unwrap_err().err_code, 10003);
    }

    #[test]
    fn pull_request_forms() {
        assert_eq!(PullRequest::parse(b"").unwrap().batch, 1);
        assert_eq!(PullRequest::parse(b"5").unwrap().batch, 5);
        let natscli = PullRequest::parse(br#"{"expires":5000000000,"batch":1}"#).unwrap();
        assert_eq!((natscli.batch, natscli.expires), (1, 5_000_000_000));
        let fetch = PullRequest::parse(br#"{"batch":10,"no_wait":true}"#).unwrap();
        assert!(fetch.no_wait);
        let consume = PullRequest::parse(
            br#"{"expires":30000000000,"batch":500,"idle_heartbeat":15000000000}"#,
        )
        .unwrap();
        assert_eq!(consume.idle_heartbeat, 15_000_000_000);
        assert_eq!(
            PullRequest::parse(br#"{"expires":1000000000,"batch":1,"idle_heartbeat":900000000}"#),
            Err(PullRequestError::HeartbeatTooLarge)
        );
        assert_eq!(
            PullRequest::parse(br#"{"batch":25,"idle_heartbeat":100000000}"#),
            Err(PullRequestError::HeartbeatTooLarge),
            "async-nats's pull_stream_error: a heartbeat without expires"
        );
        assert!(matches!(
            PullRequest::parse(b"abc"),
            Err(PullRequestError::Malformed(_))
        ));
        assert!(matches!(
            PullRequest::parse(b"{bad"),
            Err(PullRequestError::Malformed(_))
        ));
    }

    #[test]
    fn reset_request_seq_is_optional() {
        for empty in [&b""[..], b"null", b"{}", br#"{"seq":null}"#] {
            let req: ConsumerResetRequest = parse_optional_body(empty).unwrap();
            assert_eq!(req.seq, 0);
        }
        let req: ConsumerResetRequest =
            parse_optional_body(br#"{"seq":8,"unknown":true}"#).unwrap();
        assert_eq!(req.seq, 8);
        let bad = parse_optional_body::<ConsumerResetRequest>(b"{seq").unwrap_err();
        assert_eq!(bad.err_code, 10025);
        assert!(bad.description.starts_with("invalid JSON: "));
    }

    #[test]
    fn pause_request_zero_time_means_resume() {
        let req: ConsumerPauseRequest =
            parse_optional_body(br#"{"pause_until":"0001-01-01T00:00:00Z"}"#).unwrap();
        assert_eq!(req.pause_until, None);
        let req: ConsumerPauseRequest =
            parse_optional_body(br#"{"pause_until":"2030-01-01T00:00:00Z"}"#).unwrap();
        assert!(req.pause_until.is_some());
    }
}
