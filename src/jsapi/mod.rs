//! The JetStream JSON API as clients speak it: request and response types (serde), the
//! `$JS.API.*` and `$JS.ACK.*` subject grammars, ack payloads, and `ApiError` with
//! nats-server's error codes. Pure data and parsing: no I/O, no tokio.
//!
//! Who uses it: the jetstream front (API handlers, publish, delivery) decodes requests and
//! encodes replies with these types; `jscore` (the pure stream/consumer state machines) stores
//! `StreamConfig`/`ConsumerConfig` and reports failures as `ApiError`.
//!
//! Map: `stream_config` (+`_check`: defaults, validation), `consumer_config` (+`_check`),
//! `error` (the error table), `time` (RFC 3339 timestamps, Go durations), `names` (name
//! rules, subject overlap).

pub mod consumer_config;
mod consumer_config_check;
#[cfg(test)]
mod consumer_config_check_tests;
pub mod error;
pub mod names;
mod serde_util;
pub mod stream_config;
mod stream_config_check;
pub mod time;

pub use consumer_config::{
    AckPolicy, ConsumerAction, ConsumerConfig, CreateConsumerRequest, DeliverPolicy,
    PriorityPolicy, ReplayPolicy,
};
pub use consumer_config_check::{
    DEFAULT_ACK_WAIT, DEFAULT_EPHEMERAL_INACTIVE_THRESHOLD, DEFAULT_MAX_ACK_PENDING,
    DEFAULT_MAX_WAITING, DEFAULT_PRIORITY_TIMEOUT,
};
pub use error::{ApiError, ErrorKind};
pub use names::{is_valid_name, validate_name, NameError};
pub use stream_config::{
    Compression, DiscardPolicy, ExternalStream, PersistMode, Placement, RePublish, RetentionPolicy,
    StorageType, StreamConfig, StreamConfigRequest, StreamConsumerLimits, StreamConsumerSource,
    StreamSource, SubjectTransform,
};
pub use stream_config_check::{DEFAULT_DUPLICATE_WINDOW, MAX_REPLICAS};
pub use time::{parse_go_duration, Timestamp};
