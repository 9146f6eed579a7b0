//! Atomic batch publish (NATS ADR-50, `allow_atomic`): a publisher sends messages with
//! `Nats-Batch-Id`, `Nats-Batch-Sequence` (1, 2, …) and, on the last, `Nats-Batch-Commit`;
//! the stream stores all of them with consecutive sequences, or none.
//!
//! Pure pieces, no I/O: `headers.rs` reads a member's batch headers, `stager.rs` is the
//! leader's staging state machine (gaps, limits, abandonment), `error.rs` the refusals with
//! nats-server's err_codes. The all-or-nothing check of a committed batch against the stream
//! is `jscore::stream::batch_check`; the async glue on the leader is
//! `jetstream::atomic_publish`; the Raft entry is `STREAM_APPEND_BATCH_V1`
//! (`jetstream::stream_machine::entry`). ADR 0021 says why it is shaped this way.

mod error;
mod headers;
mod stager;

#[cfg(test)]
mod tests_stager;

pub use error::BatchError;
pub use headers::{
    batch_id, parse_member, BatchMember, Commit, BATCH_COMMIT, BATCH_ID, BATCH_SEQUENCE,
    MAX_BATCH_ID_LEN,
};
pub use stager::{BatchLimits, BatchStager, CommittedBatch, StageOutcome};
