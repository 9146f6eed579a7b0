//! Acknowledgements: `+ACK` (explicit, or cumulative for ack policy `all`), ack-all up to a
//! sequence, `-NAK` (now or after a delay), `+TERM`, and `+WPI` (in progress: push the due
//! time out by another wait).
//!
//! A consumer with ack policy `flow_control` takes only `AckAll` (what the delivery layer
//! proposes for a flow-control answer's `Nats-Last-Stream`); the four client acks are
//! ignored with `NoAckPolicy`, as nats-server, which does not subscribe such a consumer's
//! ack subject, never sees them.
//!
//! Replicated: each ack is a command; the ack floor and pending set move identically on
//! every replica. The returned outcome tells the front whether to send the double-ack reply
//! and which sequences retention may now reconsider.

use super::state::ConsumerState;

/// What an ack did.
/// Serde (postcard) encodes the variant index: the variant order is a wire format, append only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AckOutcome {
    /// These stream sequences stopped being pending (retention should reconsider them).
    Acked { stream_seqs: Vec<u64> },
    /// The message was not pending (already acked, or never needed an ack). nats-server
    /// still answers a double-ack request for these.
    NotPending,
    /// The sequence is beyond what this consumer has delivered: ignored, and no reply.
    BeyondDelivered,
    /// NAK or +WPI moved the message's redelivery time.
    Rescheduled { redeliver_at_nanos: i64 },
    /// The consumer takes no acks (ack policy none), or not this kind (a client ack of an
    /// ack policy `flow_control` consumer).
    NoAckPolicy,
}

impl ConsumerState {
    /// `+ACK` for one stream sequence. Under ack policy `all` this acknowledges everything
    /// delivered up to it.
    pub fn ack(&mut self, stream_seq: u64) -> AckOutcome {
        if let Some(outcome) = self.refuse_client_ack() {
            return outcome;
        }
        if self.policy.acks_cumulatively() {
            return self.ack_all(stream_seq);
        }
        if let Some(outcome) = self.refuse_ack(stream_seq) {
            return outcome;
        }
        self.acknowledge_one(stream_seq)
    }

    /// Acknowledges every pending message up to and including `stream_seq` (also the ack of
    /// an ack policy `flow_control` consumer).
    pub fn ack_all(&mut self, stream_seq: u64) -> AckOutcome {
        if let Some(outcome) = self.refuse_ack(stream_seq) {
            return outcome;
        }
        if stream_seq <= self.ack_floor.stream_seq && self.exhausted.is_empty() {
            return AckOutcome::NotPending;
        }
        self.exhausted.retain(|seq, _| *seq > stream_seq);
        let stream_seqs = self.pending.remove_up_to(stream_seq);
        self.refresh_ack_floor();
        if stream_seqs.is_empty() {
            AckOutcome::NotPending
        } else {
            AckOutcome::Acked { stream_seqs }
        }
    }

    /// `+TERM`: stop redelivering this message; it counts as acknowledged.
    pub fn term(&mut self, stream_seq: u64) -> AckOutcome {
        if let Some(outcome) = self.refuse_client_ack() {
            return outcome;
        }
        if let Some(outcome) = self.refuse_ack(stream_seq) {
            return outcome;
        }
        self.acknowledge_one(stream_seq)
    }

    /// Removes one message from pending (or from the exhausted set: a late ack of a message
    /// that ran out of deliveries still releases it for retention).
    fn acknowledge_one(&mut self, stream_seq: u64) -> AckOutcome {
        let was_exhausted = self.exhausted.remove(&stream_seq).is_some();
        let was_pending = self.pending.remove(stream_seq).is_some();
        if !(was_pending || was_exhausted) {
            return AckOutcome::NotPending;
        }
        self.refresh_ack_floor();
        AckOutcome::Acked {
            stream_seqs: vec![stream_seq],
        }
    }

    /// `-NAK`: redeliver now, or no earlier than `delay` from now.
    pub fn nak(&mut self, stream_seq: u64, delay_nanos: Option<i64>, now_nanos: i64) -> AckOutcome {
        if let Some(outcome) = self.refuse_client_ack() {
            return outcome;
        }
        if let Some(outcome) = self.refuse_ack(stream_seq) {
            return outcome;
        }
        let redeliver_at_nanos = now_nanos.saturating_add(delay_nanos.unwrap_or(0).max(0));
        self.reschedule(stream_seq, redeliver_at_nanos)
    }

    /// `+WPI`: the client is still working; restart the wait for this message.
    pub fn in_progress(&mut self, stream_seq: u64, now_nanos: i64) -> AckOutcome {
        if let Some(outcome) = self.refuse_client_ack() {
            return outcome;
        }
        if let Some(outcome) = self.refuse_ack(stream_seq) {
            return outcome;
        }
        let Some(entry) = self.pending.get(stream_seq) else {
            return AckOutcome::NotPending;
        };
        let wait = self.policy.wait_after_delivery(entry.deliveries);
        self.reschedule(stream_seq, now_nanos.saturating_add(wait))
    }

    fn reschedule(&mut self, stream_seq: u64, redeliver_at_nanos: i64) -> AckOutcome {
        if self.pending.reschedule(stream_seq, redeliver_at_nanos) {
            AckOutcome::Rescheduled { redeliver_at_nanos }
        } else {
            AckOutcome::NotPending
        }
    }

    /// A client ack (`+ACK`, `-NAK`, `+TERM`, `+WPI`) on a consumer that takes none.
    fn refuse_client_ack(&self) -> Option<AckOutcome> {
        (!self.policy.takes_client_acks()).then_some(AckOutcome::NoAckPolicy)
    }

    fn refuse_ack(&self, stream_seq: u64) -> Option<AckOutcome> {
        if !self.policy.takes_acks() {
            return Some(AckOutcome::NoAckPolicy);
        }
        if stream_seq >= self.next_stream_seq && !self.pending.contains(stream_seq) {
            return Some(AckOutcome::BeyondDelivered);
        }
        None
    }
}
