//! Reply envelopes of the JetStream JSON API: every reply is one JSON object carrying
//! `"type":"io.nats.jetstream.api.v1.<name>"` (natscli validates it against jsm.go's
//! schemas, so the string must be exact) plus either the success fields or `"error":{…}`.
//!
//! Use `encode_success(ResponseType::X, &body)` / `encode_error(ResponseType::X, &err)`;
//! the body structs here cover the replies that are not a plain info object.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::consumer_info::ConsumerInfo;
use super::error::ApiError;
use super::msg_get::StoredMsg;
use super::serde_util::{is_false, is_zero_i64, nullable};
use super::stream_info::StreamInfo;
use super::time::Timestamp;

macro_rules! response_types {
    ( $( $(#[$doc:meta])* $variant:ident = $name:literal; )+ ) => {
        /// The `type` of a JetStream API reply.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum ResponseType {
            $( $(#[$doc])* $variant, )+
        }

        impl ResponseType {
            /// Every response type, for table checks.
            pub const ALL: &'static [ResponseType] = &[ $( ResponseType::$variant, )+ ];

            /// The full type string, e.g. `io.nats.jetstream.api.v1.stream_info_response`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( ResponseType::$variant => concat!("io.nats.jetstream.api.v1.", $name), )+
                }
            }
        }
    };
}

response_types! {
    AccountInfo = "account_info_response";
    StreamCreate = "stream_create_response";
    StreamUpdate = "stream_update_response";
    StreamInfo = "stream_info_response";
    StreamDelete = "stream_delete_response";
    StreamPurge = "stream_purge_response";
    StreamNames = "stream_names_response";
    StreamList = "stream_list_response";
    StreamMsgGet = "stream_msg_get_response";
    StreamMsgDelete = "stream_msg_delete_response";
    StreamLeaderStepdown = "stream_leader_stepdown_response";
    StreamRemovePeer = "stream_remove_peer_response";
    StreamSnapshot = "stream_snapshot_response";
    StreamRestore = "stream_restore_response";
    ConsumerCreate = "consumer_create_response";
    ConsumerInfo = "consumer_info_response";
    ConsumerDelete = "consumer_delete_response";
    ConsumerNames = "consumer_names_response";
    ConsumerList = "consumer_list_response";
    ConsumerLeaderStepdown = "consumer_leader_stepdown_response";
    ConsumerPause = "consumer_pause_response";
    ConsumerUnpin = "consumer_unpin_response";
    ConsumerReset = "consumer_reset_response";
    MetaLeaderStepdown = "meta_leader_stepdown_response";
    MetaServerRemove = "meta_server_remove_response";
    AccountPurge = "account_purge_response";
    /// Reply to an unknown `$JS.API` subject (with 10003 bad request).
    System = "system_response";
    SystemOverloaded = "system_overloaded";
}

/// A decoded (or to-be-encoded) reply: type, optional error, and the flattened body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiResponse<T> {
    #[serde(rename = "type")]
    pub response_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    #[serde(flatten)]
    pub body: T,
}

#[derive(Serialize)]
struct SuccessEnvelope<'a, T> {
    #[serde(rename = "type")]
    response_type: &'static str,
    #[serde(flatten)]
    body: &'a T,
}

#[derive(Serialize)]
struct ErrorEnvelope<'a> {
    #[serde(rename = "type")]
    response_type: &'static str,
    error: &'a ApiError,
}

/// JSON bytes of a success reply: `{"type":…, <body fields>}`. The body must serialize
/// as a JSON object.
pub fn encode_success<T: Serialize>(response_type: ResponseType, body: &T) -> Vec<u8> {
    serde_json::to_vec(&SuccessEnvelope {
        response_type: response_type.as_str(),
        body,
    })
    .expect("JetStream reply bodies serialize")
}

/// JSON bytes of an error reply: `{"type":…,"error":{…}}`.
pub fn encode_error(response_type: ResponseType, error: &ApiError) -> Vec<u8> {
    serde_json::to_vec(&ErrorEnvelope {
        response_type: response_type.as_str(),
        error,
    })
    .expect("JetStream errors serialize")
}

/// `success: true` replies (delete, msg delete, stepdowns, peer remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SuccessResponse {
    #[serde(skip_serializing_if = "is_false")]
    pub success: bool,
}

impl SuccessResponse {
    pub const OK: SuccessResponse = SuccessResponse { success: true };
}

/// Paging fields of names/list replies (always present).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Paged {
    pub total: i64,
    pub offset: i64,
    pub limit: i64,
}

/// `stream_create_response` body: the info plus whether this call created it (2.11).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamCreateResponse {
    #[serde(flatten)]
    pub info: StreamInfo,
    #[serde(skip_serializing_if = "is_false")]
    pub did_create: bool,
}

/// `stream_info_response` body: the info plus paging of `state.subjects` (0s unless a
/// `subjects_filter` was used).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamInfoResponse {
    #[serde(flatten)]
    pub info: StreamInfo,
    #[serde(flatten)]
    pub paged: Paged,
}

/// `stream_purge_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PurgeResponse {
    #[serde(skip_serializing_if = "is_false")]
    pub success: bool,
    pub purged: u64,
}

/// `stream_names_response` body. Empty lists are sent as `[]` (nats-server sends `null`,
/// which some clients choke on).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamNamesResponse {
    #[serde(flatten)]
    pub paged: Paged,
    #[serde(deserialize_with = "nullable")]
    pub streams: Vec<String>,
}

/// `stream_list_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamListResponse {
    #[serde(flatten)]
    pub paged: Paged,
    #[serde(deserialize_with = "nullable")]
    pub streams: Vec<StreamInfo>,
    /// Streams that did not answer in time.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// Streams that cannot run, with the reason.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub offline: BTreeMap<String, String>,
}

/// `consumer_names_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerNamesResponse {
    #[serde(flatten)]
    pub paged: Paged,
    #[serde(deserialize_with = "nullable")]
    pub consumers: Vec<String>,
}

/// `consumer_list_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerListResponse {
    #[serde(flatten)]
    pub paged: Paged,
    #[serde(deserialize_with = "nullable")]
    pub consumers: Vec<ConsumerInfo>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub offline: BTreeMap<String, String>,
}

/// `stream_msg_get_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MsgGetResponse {
    pub message: StoredMsg,
}

/// `consumer_pause_response` body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerPauseResponse {
    pub paused: bool,
    pub pause_until: Timestamp,
    /// Nanoseconds.
    #[serde(skip_serializing_if = "is_zero_i64")]
    pub pause_remaining: i64,
}

/// `consumer_reset_response` body (nats-server 2.14): the consumer's info after the reset,
/// as `CONSUMER.INFO` reports it, and the stream sequence it starts from again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerResetResponse {
    #[serde(flatten)]
    pub info: ConsumerInfo,
    #[serde(default)]
    pub reset_seq: u64,
}

/// Marker for replies whose success body has no fields besides `type`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::error::ErrorKind;
    use serde_json::{json, Value};

    #[test]
    fn type_strings_are_exact() {
        assert_eq!(
            ResponseType::StreamInfo.as_str(),
            "io.nats.jetstream.api.v1.stream_info_response"
        );
        assert_eq!(
            ResponseType::AccountInfo.as_str(),
            "io.nats.jetstream.api.v1.account_info_response"
        );
        assert_eq!(
            ResponseType::StreamRemovePeer.as_str(),
            "io.nats.jetstream.api.v1.stream_remove_peer_response"
        );
        assert_eq!(
            ResponseType::System.as_str(),
            "io.nats.jetstream.api.v1.system_response"
        );
        let unique: std::collections::HashSet<_> =
            ResponseType::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(unique.len(), ResponseType::ALL.len());
    }

    #[test]
    fn error_envelope() {
        let bytes = encode_error(ResponseType::System, &ErrorKind::BadRequest.into());
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            r#"{"type":"io.nats.jetstream.api.v1.system_response","error":{"code":400,"err_code":10003,"description":"bad request"}}"#
        );
        let decoded: ApiResponse<Value> = serde_json::from_slice(&encode_error(
            ResponseType::StreamInfo,
            &ErrorKind::StreamNotFound.into(),
        ))
        .unwrap();
        assert_eq!(decoded.error.unwrap().err_code, 10059);
    }

    #[test]
    fn success_envelopes() {
        let bytes = encode_success(ResponseType::StreamDelete, &SuccessResponse::OK);
        assert_eq!(
            serde_json::from_slice::<Value>(&bytes).unwrap(),
            json!({"type":"io.nats.jetstream.api.v1.stream_delete_response","success":true})
        );
        let names = StreamNamesResponse {
            paged: Paged {
                total: 0,
                offset: 0,
                limit: 1024,
            },
            streams: vec![],
        };
        assert_eq!(
            serde_json::from_slice::<Value>(&encode_success(ResponseType::StreamNames, &names))
                .unwrap(),
            json!({"type":"io.nats.jetstream.api.v1.stream_names_response",
                   "total":0,"offset":0,"limit":1024,"streams":[]})
        );
        let purge = PurgeResponse {
            success: true,
            purged: 3,
        };
        let value: Value =
            serde_json::from_slice(&encode_success(ResponseType::StreamPurge, &purge)).unwrap();
        assert_eq!(value["purged"], json!(3));
        let empty: Value =
            serde_json::from_slice(&encode_success(ResponseType::ConsumerUnpin, &Empty {}))
                .unwrap();
        assert_eq!(
            empty,
            json!({"type":"io.nats.jetstream.api.v1.consumer_unpin_response"})
        );
    }

    #[test]
    fn reset_response_is_the_consumer_info_with_reset_seq() {
        let reset = ConsumerResetResponse {
            info: ConsumerInfo {
                stream_name: "S".into(),
                name: "C".into(),
                ..ConsumerInfo::default()
            },
            reset_seq: 8,
        };
        let value: Value =
            serde_json::from_slice(&encode_success(ResponseType::ConsumerReset, &reset)).unwrap();
        assert_eq!(
            value["type"],
            json!("io.nats.jetstream.api.v1.consumer_reset_response")
        );
        assert_eq!(
            (&value["stream_name"], &value["name"], &value["reset_seq"]),
            (&json!("S"), &json!("C"), &json!(8))
        );
        assert_eq!(value["delivered"]["stream_seq"], json!(0));
        let back: ApiResponse<ConsumerResetResponse> = serde_json::from_value(value).unwrap();
        assert_eq!(back.body, reset);
    }

    #[test]
    fn stream_info_response_has_paging_and_did_create() {
        let info = StreamInfoResponse::default();
        let value: Value =
            serde_json::from_slice(&encode_success(ResponseType::StreamInfo, &info)).unwrap();
        assert_eq!(
            (value["total"].clone(), value["limit"].clone()),
            (json!(0), json!(0))
        );
        assert!(value.get("config").is_some() && value.get("state").is_some());
        let created = StreamCreateResponse {
            did_create: true,
            ..StreamCreateResponse::default()
        };
        let value: Value =
            serde_json::from_slice(&encode_success(ResponseType::StreamCreate, &created)).unwrap();
        assert_eq!(value["did_create"], json!(true));
        let decoded: ApiResponse<StreamCreateResponse> = serde_json::from_value(value).unwrap();
        assert!(decoded.body.did_create && decoded.error.is_none());
    }
}
