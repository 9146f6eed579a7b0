//! jetstream core: the pure, deterministic state machines a stream's Raft group applies.
//! No I/O, no clocks, no tokio/openraft/sled: every time arrives inside a command, so every
//! replica that applies the same log reaches the same state and the same outcomes.
//!
//! * `stream/` — `StreamState`: messages, limits, dedup window, expected-* checks, purge.
//! * `consumer/` — `ConsumerState`: delivered/ack-floor/pending bookkeeping, redelivery
//!   schedule, num_pending. Its module doc says which parts are replicated and which a new
//!   leader recomputes.
//! * `retention.rs` — work-queue and interest retention: which messages the stream may drop
//!   once consumers have acknowledged them.
//! * `group.rs` — `StreamGroup`: one stream with its consumers, the single `apply` entry
//!   point a stream's Raft state machine calls.
//! * `subject_filter.rs` — consumer filters and overlap checks.
//! * `atomic_batch/` — atomic batch publish (ADR-50): a member's batch headers and the
//!   leader's staging state machine; the batch's check is `stream/batch_check.rs`.
//! * `sourcing.rs` — mirrors and sources: the replicated origin positions and the command
//!   that copies one origin message.

pub mod atomic_batch;
pub mod consumer;
pub mod group;
pub mod retention;
pub mod sourcing;
pub mod stream;
pub mod subject_filter;

#[cfg(test)]
mod tests_group;
#[cfg(test)]
mod tests_property;
#[cfg(test)]
pub(crate) mod xorshift;
