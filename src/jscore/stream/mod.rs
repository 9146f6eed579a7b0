//! The stream state machine: the messages of one stream and the rules for adding and
//! removing them. `StreamState` (state.rs) holds the data and answers queries; each command
//! has its own file: `append.rs` (publish with its checks), `remove.rs` (purge, delete,
//! limits, retention removal), `expire.rs` (max_age and per-message TTL expiry, delete
//! markers), `fire.rs` (firing due schedules in that same expiry, ADR-51), `update.rs`
//! (config changes), `batch_check.rs` (an atomic batch's
//! all-or-nothing check). Helpers:
//! `message.rs` (a message's in-memory metadata, the whole message, its byte size),
//! `meta_map.rs` with `meta_chunk.rs` (the messages' metadata by sequence, packed in chunks
//! of `chunk_key.rs`),
//! `subject_index.rs` with `seq_set.rs` (each subject's sequences), `counter.rs` (counter
//! streams' values, ADR-49) with `decimal.rs`,
//! `dedup.rs` (duplicate window),
//! `publish_headers.rs` (`Nats-*` headers), `schedule.rs` (schedule headers and checks) with
//! `schedule_index.rs` (schedules by due time), `unsupported_headers.rs` (the
//! headers of features jetraft refuses), `ttl.rs` (`Nats-TTL` and markers), `ttl_index.rs`
//! (messages by TTL deadline), `limits.rs`, `error.rs`,
//! `persist.rs` (export and restore, for the state machine that keeps a stream in sled).
//!
//! All of it is replicated state: a stream group applies the same commands in the same
//! order on every replica and gets the same messages, sequences, byte counts and refusals.
//! Nothing here reads a clock (times arrive in commands) or does I/O.

mod append;
mod batch_check;
mod chunk_key;
mod counter;
mod cron;
mod cron_zoned;
mod decimal;
mod dedup;
mod error;
mod expire;
mod fire;
mod limits;
mod message;
mod meta_chunk;
mod meta_map;
mod meta_spill;
mod persist;
mod publish_headers;
mod remove;
mod schedule;
mod schedule_index;
mod seq_chunk;
mod seq_set;
mod sourced;
mod state;
mod subject_index;
mod ttl;
mod ttl_index;
mod unsupported_headers;
mod update;
mod zone;

#[cfg(test)]
mod tests_append;
#[cfg(test)]
mod tests_batch_check;
#[cfg(test)]
mod tests_expire;
#[cfg(test)]
mod tests_fire;
#[cfg(test)]
mod tests_meta_map;
#[cfg(test)]
mod tests_remove;
#[cfg(test)]
mod tests_schedule;
#[cfg(test)]
mod tests_seq_set;

pub use append::{AppendOutcome, AppendRequest};
pub use counter::{value_body, CounterBase, MsgCounters, COUNTER_SOURCES};
pub use error::{AppendError, RemoveError};
pub use expire::Expired;
pub use fire::{Fired, Produced, ScheduleBody};
pub use limits::{StreamLimits, DEFAULT_DUPLICATE_WINDOW_NANOS, MAX_HEADERS_LEN};
pub use message::{stored_size, MsgInfo, StoredMsg};
pub use meta_spill::MetaSpill;
pub use persist::{DedupRecord, Restoring, StreamScalars};
pub use publish_headers::{PublishHeaders, Rollup};
pub use remove::{PurgeRequest, Purged};
pub use schedule::{stored_schedule_headers, ScheduleRules};
pub use state::{StreamState, StreamSummary};
pub use subject_index::SubjectId;
pub use ttl::{msg_ttl, parse_ttl, InvalidTtl, MsgTtl};
pub use unsupported_headers::{
    header_rules, refuse_unsupported_headers, refuse_unsupported_member_headers, HeaderRules,
    MsgTtls,
};
