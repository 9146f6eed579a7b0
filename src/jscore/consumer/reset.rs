//! Consumer reset (nats-server 2.14, `$JS.API.CONSUMER.RESET.<stream>.<consumer>`): the
//! consumer starts over from a stream sequence, or from just above its ack floor (`seq` 0),
//! as nats-server's `resetStartingSeqLocked` does: nothing is pending or out of deliveries
//! any more, the `last_per_subject` plan is dropped, the next delivery is the first matching
//! message at or after the start with consumer sequence 1, and the ack floor sits just below
//! the start (it may move backwards: a reset below the floor delivers acknowledged messages
//! again).
//!
//! The API layer checks a reset against the deliver policy first (`check_reset`); the
//! replicated `ConsumerCommand::Reset` applies unconditionally. Under interest or work-queue
//! retention the messages a forward reset skipped are no longer needed by this consumer: the
//! stream group hands [`ConsumerState::released_by_reset`] to retention (nats-server acks
//! them), while a reset backwards brings back nothing the stream no longer holds.
//!
//! Replicated: the reset is a command, applied alike on every replica.

use std::collections::BTreeSet;

use crate::jsapi::consumer_config::DeliverPolicy;
use crate::jsapi::error::{ApiError, ErrorKind};
use crate::jscore::stream::StreamState;

use super::pending::PendingSet;
use super::state::{ConsumerState, SequencePair};

impl ConsumerState {
    /// The stream sequence a reset to `seq` starts from: `seq`, or just above the ack floor
    /// for 0.
    pub fn reset_start(&self, seq: u64) -> u64 {
        match seq {
            0 => self.ack_floor.stream_seq + 1,
            seq => seq,
        }
    }

    /// Whether a reset to `seq` is allowed, with the sequence it starts from (nats-server's
    /// rules): 0 always (back to the ack floor); another sequence for deliver policy `all`,
    /// for `by_start_sequence` at or above `opt_start_seq`, and for `by_start_time` at or
    /// above the first message stored at or after `opt_start_time`; never for the others.
    /// Refusals are 10204 with the reason.
    pub fn check_reset(&self, stream: &StreamState, seq: u64) -> Result<u64, ApiError> {
        let refuse = |why: &str| Err(ApiError::with_detail(ErrorKind::ConsumerInvalidReset, why));
        if seq == 0 {
            return Ok(self.reset_start(0));
        }
        match self.config.deliver_policy {
            DeliverPolicy::All => {}
            DeliverPolicy::ByStartSequence => {
                if seq < self.config.opt_start_seq {
                    return refuse("below start seq");
                }
            }
            DeliverPolicy::ByStartTime => {
                // As the consumer's start position reckons it (`start.rs`).
                let first = match self.config.opt_start_time.and_then(|t| t.unix_nanos()) {
                    Some(nanos) => stream.first_seq_at_or_after(nanos),
                    None => stream.last_seq() + 1,
                };
                if seq < first {
                    return refuse("below start time");
                }
            }
            _ => return refuse("not allowed"),
        }
        Ok(self.reset_start(seq))
    }

    /// The stored messages this consumer stops needing when reset to `seq`, for retention
    /// to reconsider (a superset: retention asks every consumer again): what it selected
    /// between its ack floor and the new floor, and what ran out of deliveries below the new
    /// floor. Empty for a reset that does not move the floor up. Bounded by what the stream
    /// holds in that range.
    pub fn released_by_reset(&self, stream: &StreamState, seq: u64) -> Vec<u64> {
        let new_floor = self.reset_start(seq) - 1;
        let mut released: BTreeSet<u64> = self
            .exhausted
            .keys()
            .copied()
            .filter(|exhausted| *exhausted <= new_floor)
            .collect();
        if new_floor > self.ack_floor.stream_seq {
            released.extend(
                stream
                    .matching_from(&self.policy.filter, self.ack_floor.stream_seq + 1)
                    .take_while(|stored| *stored <= new_floor),
            );
        }
        released.into_iter().collect()
    }

    /// Applies a reset to `seq` (see the module docs); returns the start sequence.
    pub(super) fn reset(&mut self, seq: u64) -> u64 {
        let start = self.reset_start(seq);
        self.pending = PendingSet::default();
        self.exhausted.clear();
        self.last_per_subject = None;
        self.next_stream_seq = start;
        self.next_consumer_seq = 1;
        self.ack_floor = SequencePair {
            consumer_seq: 0,
            stream_seq: start - 1,
        };
        start
    }
}
