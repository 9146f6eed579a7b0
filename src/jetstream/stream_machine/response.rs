//! The stream group's responses: what applying one command answers, as it travels back to the
//! proposer (from this node's state machine, or from the leader over the cluster transport).
//! The format's other half, next to the entries (`entry.rs`); `tests_formats.rs` pins the
//! bytes of every response kind.
//!
//! A response is the shared envelope of `jetstream::payload` — postcard
//! `Result<StreamOutcome, WireError>` — with `jscore::group::StreamOutcome` deriving serde
//! itself (the mirror policy in `entry.rs`: all its fields are plain data). Variant indexes
//! (postcard writes the index first): `Result` 0 Ok, 1 Err; `StreamOutcome` 0 Appended,
//! 1 Purged, 2 Removed, 3 ConsumerUpserted, 4 ConsumerDeleted, 5 Consumer, 6 SourceSkipped, 7 Expired, 8 BatchAppended,
//! 9 Scheduled (ADR 0023); `AppendOutcome`
//! 0 Stored, 1 Duplicate, 2 SkippedNoInterest, 3 StoredRepublished, 4 Counted (ADR 0020); `ConsumerOutcome` 0 Delivered, 1 Ack;
//! `AckOutcome` 0 Acked, 1 NotPending, 2 BeyondDelivered, 3 Rescheduled, 4 NoAckPolicy.
//! **Append only**, like the entries.

use crate::consensus::Response;
use crate::jetstream::payload::{self, PayloadError};
use crate::jsapi::ApiError;
use crate::jscore::group::StreamOutcome;

/// The response to one applied stream command.
pub fn encode_response(outcome: &Result<StreamOutcome, ApiError>) -> Response {
    payload::response(outcome)
}

/// The outcome a stream group's response carries.
pub fn decode_response(
    response: &Response,
) -> Result<Result<StreamOutcome, ApiError>, PayloadError> {
    payload::decode_response(response)
}
