//! The consumer state machine: one consumer's delivery and acknowledgement bookkeeping.
//! `state.rs` (`ConsumerState`, queries, reaction to stream removals), `deliver.rs`
//! (choosing and recording deliveries), `ack.rs` (ack, ack-all, nak, term, in-progress),
//! `command.rs` (the replicated command enum and `apply`), `pending.rs` (pending set and
//! redelivery queue), `start.rs` (deliver policies), `policy.rs` (ack wait, backoff,
//! max_deliver, max_ack_pending from the config), `pause.rs` (`pause_until`), `reset.rs`
//! (`CONSUMER.RESET`: start over from a sequence or the ack floor), `local.rs` (which
//! consumers their leader delivers from an unreplicated copy, ADR 0034), `persist.rs` (export and
//! import, for the state machine that keeps consumers in sled).
//!
//! # What the stream's Raft group replicates, and what a leader keeps to itself
//!
//! Replicated (changed only by applied commands, identical on every replica):
//! the config; the delivered position (next consumer and stream sequence); the ack floor;
//! the pending set — for each unacknowledged message its first consumer sequence, delivery
//! count, last delivery time and redelivery due time; the messages that ran out of
//! max_deliver; the `last_per_subject` start plan. Deliveries are replicated as well as
//! acks (`DeliverNext` is a command), because they change durable state: the ack floor and
//! `num_ack_pending` follow them, the delivery count enforces max_deliver, and consumer
//! sequences must not repeat after a failover. Exempt: an ack-none, memory-storage consumer
//! on a limits stream (every client's ordered consumer), whose deliveries change nothing but
//! its own position; its leader delivers from a copy (`local.rs`, ADR 0034).
//!
//! Leader-only (never replicated, rebuilt by a new leader): the timers. The leader arms one
//! timer at `next_redelivery_at()` and, when a pull request is waiting, proposes
//! `DeliverNext` with its clock's `now`; the waiting pull requests themselves live in the
//! front and are dropped on leader change (clients re-pull). A new leader re-arms the timer
//! from the replicated due times, so every message that was delivered and not acknowledged
//! is redelivered once due: delivery is at-least-once across failover, never at-most-once.
//! (Due times written by the old leader's clock are compared with the new leader's clock;
//! skew only makes a redelivery earlier or later.)

mod ack;
mod command;
mod deliver;
mod local;
mod pause;
mod pending;
mod persist;
mod policy;
mod reset;
mod start;
mod state;

#[cfg(test)]
mod tests_ack;
#[cfg(test)]
mod tests_deliver;
#[cfg(test)]
mod tests_local;
#[cfg(test)]
mod tests_reset;

pub use ack::AckOutcome;
pub use command::{ConsumerCommand, ConsumerOutcome};
pub use deliver::Delivery;
pub use pause::pause_until_nanos;
pub use pending::{PendingEntry, PendingSet};
pub use persist::ConsumerExport;
pub use policy::{DeliveryPolicy, DEFAULT_ACK_WAIT_NANOS, DEFAULT_MAX_ACK_PENDING, NEVER_DUE};
pub use start::{LastPerSubjectPlan, StartPosition};
pub use state::{ConsumerProgress, ConsumerState, SequencePair};
