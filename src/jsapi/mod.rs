//! The JetStream JSON API as clients speak it: request and response types (serde), the
//! `$JS.API.*` and `$JS.ACK.*` subject grammars, ack payloads, and `ApiError` with
//! nats-server's error codes. Pure data and parsing: no I/O, no tokio.
//!
//! Who uses it: the jetstream front (API handlers, publish, delivery) decodes requests and
//! encodes replies with these types; `jscore` (the pure stream/consumer state machines) stores
//! `StreamConfig`/`ConsumerConfig` and reports failures as `ApiError`.
//!
//! Map: `stream_config` (+`_check`: defaults, validation), `consumer_config` (+`_check`),
//! `stream_info`, `consumer_info`, `account_info`, `pub_ack` (reply bodies), `requests` and
//! `msg_get` (request bodies and body conventions), `direct_get` (`DIRECT.GET` replies:
//! header blocks and statuses), `response` (`type` strings, envelopes),
//! `error` (the error table), `time` (RFC 3339 timestamps, Go durations), `names` (name
//! rules; subject overlap lives in `crate::subject::pattern`), `base64` (byte fields), `subject` (`$JS.API.*` grammar),
//! `consumer_create` (subject vs body of consumer creates), `ack` (`$JS.ACK.*` and ack
//! payloads), `unsupported` (the stream and consumer settings jetraft refuses).

pub mod account_info;
pub mod ack;
pub mod advisory;
mod base64;
pub mod batch_pub_ack;
pub mod consumer_config;
mod consumer_config_check;
#[cfg(test)]
mod consumer_config_check_tests;
mod consumer_create;
pub mod consumer_info;
pub mod direct_get;
pub mod error;
pub mod msg_get;
pub mod names;
pub mod pub_ack;
pub mod republish;
pub mod requests;
pub mod response;
mod serde_util;
pub mod stream_config;
mod stream_config_check;
#[cfg(test)]
mod stream_config_check_tests;
pub mod stream_info;
pub mod stream_source;
pub mod subject;
#[cfg(test)]
mod subject_tests;
pub mod time;
mod unsupported;
#[cfg(test)]
mod unsupported_tests;

pub use account_info::{AccountInfo, AccountLimits, AccountUsage, ApiStats};
pub use ack::{AckKind, AckReply, AckSubjectError, ACK_PREFIX};
pub use batch_pub_ack::batch_pub_ack_json;
pub use consumer_config::{
    AckPolicy, ConsumerAction, ConsumerConfig, CreateConsumerRequest, DeliverPolicy,
    PriorityPolicy, ReplayPolicy,
};
pub use consumer_config_check::{
    is_valid_group_name, DEFAULT_ACK_WAIT, DEFAULT_EPHEMERAL_INACTIVE_THRESHOLD,
    DEFAULT_MAX_ACK_PENDING, DEFAULT_MAX_WAITING, DEFAULT_PRIORITY_TIMEOUT,
};
pub use consumer_info::{ConsumerInfo, PriorityGroupState, SequenceInfo};
pub use error::{ApiError, ErrorKind};
pub use msg_get::{MsgGetRequest, MsgSelector, StoredMsg};
pub use names::{is_valid_name, validate_name, NameError};
pub use pub_ack::{PubAck, PubAckResponse};
pub use requests::{
    parse_body, parse_optional_body, require_empty_body, ConsumerPauseRequest,
    ConsumerResetRequest, ConsumerUnpinRequest, ConsumersRequest, LeaderStepdownRequest,
    MsgDeleteRequest, PeerRemoveRequest, PullRequest, PullRequestError, StreamInfoRequest,
    StreamNamesRequest, StreamPurgeRequest, LIST_PAGE_LIMIT, NAMES_PAGE_LIMIT,
};
pub use response::{encode_error, encode_success, ApiResponse, Paged, ResponseType};
pub use stream_config::{
    Compression, DiscardPolicy, ExternalStream, PersistMode, Placement, RePublish, RetentionPolicy,
    StorageType, StreamConfig, StreamConfigRequest, StreamConsumerLimits, StreamConsumerSource,
    StreamSource, SubjectTransform,
};
pub use stream_config_check::{DEFAULT_DUPLICATE_WINDOW, MAX_REPLICAS};
pub use stream_info::{ClusterInfo, PeerInfo, StreamInfo, StreamSourceInfo, StreamState};
pub use subject::{
    strip_api_prefix, ApiRequest, ConsumerCreateForm, NameOwner, SubjectError, API_PREFIX,
};
pub use time::{parse_go_duration, Timestamp};
