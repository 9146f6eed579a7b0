//! Choosing and recording deliveries: due redeliveries first (earliest due first), then new
//! messages in stream order (the `last_per_subject` plan before ordinary delivery), with
//! `max_ack_pending` stopping new messages but never redeliveries, and `max_deliver`
//! retiring messages that ran out of attempts.
//!
//! Replicated: a delivery changes durable state (consumer sequence, pending entry, delivery
//! count, due time), so the leader proposes `DeliverNext { max_messages, now }` and sends
//! the messages this returns after it is applied; followers compute the same deliveries.

use crate::jscore::stream::StreamState;

use super::pending::PendingEntry;
use super::state::{ConsumerState, SequencePair};

/// One message to send to a client (the fields of the `$JS.ACK…` reply subject).
/// Serde (postcard) encodes the fields in order: a wire format, append only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivery {
    pub stream_seq: u64,
    pub consumer_seq: u64,
    /// 1 on first delivery.
    pub deliveries: u64,
    /// Messages still waiting for a first delivery after this one.
    pub pending_count: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NextMessage {
    Redeliver(u64),
    New(u64),
}

impl ConsumerState {
    /// What the next delivery would be at `now`, without recording it.
    pub fn next_to_deliver(&self, stream: &StreamState, now_nanos: i64) -> Option<Delivery> {
        let next = self.choose_next(stream, now_nanos)?;
        Some(match next {
            NextMessage::Redeliver(stream_seq) => Delivery {
                stream_seq,
                consumer_seq: self.next_consumer_seq,
                deliveries: self.pending.get(stream_seq).map_or(1, |e| e.deliveries + 1),
                pending_count: self.num_pending(stream),
            },
            NextMessage::New(stream_seq) => Delivery {
                stream_seq,
                consumer_seq: self.next_consumer_seq,
                deliveries: 1,
                pending_count: self.num_pending(stream).saturating_sub(1),
            },
        })
    }

    /// The pending messages due at `now` that used their last delivery (`max_deliver`), with
    /// their delivery counts: the next `deliver_next` at `now` retires them, which is when
    /// nats-server publishes its max-deliveries advisory.
    pub fn due_exhausted(&self, now_nanos: i64) -> Vec<(u64, u64)> {
        if self.policy.max_deliver.is_none() {
            return Vec::new(); // the common case: no limit, nothing to look through
        }
        self.pending
            .due(now_nanos)
            .filter_map(|seq| {
                let entry = self.pending.get(seq)?;
                self.policy
                    .is_exhausted(entry.deliveries)
                    .then_some((seq, entry.deliveries))
            })
            .collect()
    }

    /// Whether `stream_seq` ran out of deliveries (and was not acknowledged since).
    pub fn is_exhausted(&self, stream_seq: u64) -> bool {
        self.exhausted.contains_key(&stream_seq)
    }

    /// Delivers up to `max_messages` at `now`, recording each delivery.
    pub fn deliver_next(
        &mut self,
        stream: &StreamState,
        max_messages: usize,
        now_nanos: i64,
    ) -> Vec<Delivery> {
        let mut deliveries = Vec::new();
        if self.is_paused_at(now_nanos) {
            // The leader holds requests while paused; a `DeliverNext` proposed just before
            // a pause was applied delivers nothing, on every replica alike.
            return deliveries;
        }
        while deliveries.len() < max_messages {
            self.retire_stale_due(stream, now_nanos);
            match self.choose_next(stream, now_nanos) {
                Some(NextMessage::Redeliver(seq)) => {
                    deliveries.push(self.record_redelivery(stream, seq, now_nanos));
                }
                Some(NextMessage::New(seq)) if self.last_per_subject.is_none() => {
                    // Nothing is due any more (a delivery at `now` is due after it), so the
                    // rest is new messages in stream order: one walk instead of a search each.
                    self.deliver_run(stream, seq, max_messages, now_nanos, &mut deliveries);
                }
                Some(NextMessage::New(seq)) => {
                    deliveries.push(self.record_first_delivery(stream, seq, now_nanos));
                }
                None => {
                    self.skip_to_stream_end(stream);
                    break;
                }
            }
        }
        self.refresh_ack_floor();
        deliveries
    }

    /// First deliveries of the matching messages from `first` on (the message `choose_next`
    /// picked), until `max_messages` or `max_ack_pending` is reached or the stream ends —
    /// what `choose_next` would pick one by one. The pending count is counted once and
    /// then goes down by one per delivery: each message delivered is the next matching one.
    fn deliver_run(
        &mut self,
        stream: &StreamState,
        first: u64,
        max_messages: usize,
        now_nanos: i64,
        deliveries: &mut Vec<Delivery>,
    ) {
        let mut pending_count = self.num_pending(stream);
        let filter = self.policy.filter.clone();
        for seq in stream.matching_from(&filter, first) {
            let full = self
                .policy
                .max_ack_pending
                .is_some_and(|max| self.pending.len() as u64 >= max);
            if deliveries.len() >= max_messages || full {
                return;
            }
            pending_count = pending_count.saturating_sub(1);
            deliveries.push(self.record_first_delivery_counted(seq, now_nanos, pending_count));
        }
    }

    fn choose_next(&self, stream: &StreamState, now_nanos: i64) -> Option<NextMessage> {
        let due = self.pending.due(now_nanos).find(|seq| {
            let entry = self.pending.get(*seq).expect("due entries are pending");
            stream.contains(*seq) && !self.policy.is_exhausted(entry.deliveries)
        });
        if let Some(seq) = due {
            return Some(NextMessage::Redeliver(seq));
        }
        if self
            .policy
            .max_ack_pending
            .is_some_and(|max| self.pending.len() as u64 >= max)
        {
            return None;
        }
        if let Some(plan) = &self.last_per_subject {
            if let Some(seq) = plan.seqs.iter().find(|seq| stream.contains(**seq)) {
                return Some(NextMessage::New(*seq));
            }
            return stream
                .next_matching(&self.policy.filter, plan.resume_after + 1)
                .map(|(seq, _)| NextMessage::New(seq));
        }
        stream
            .next_matching(&self.policy.filter, self.next_stream_seq)
            .map(|(seq, _)| NextMessage::New(seq))
    }

    /// Due entries whose message is gone are dropped (as if terminated); due entries that
    /// used their last delivery leave pending and are remembered as exhausted.
    fn retire_stale_due(&mut self, stream: &StreamState, now_nanos: i64) {
        let stale: Vec<(u64, u64, bool)> = self
            .pending
            .due(now_nanos)
            .filter_map(|seq| {
                let entry = self.pending.get(seq)?;
                let gone = !stream.contains(seq);
                let exhausted = self.policy.is_exhausted(entry.deliveries);
                (gone || exhausted).then_some((seq, entry.deliveries, gone))
            })
            .collect();
        for (seq, deliveries, gone) in stale {
            self.pending.remove(seq);
            if !gone {
                self.exhausted.insert(seq, deliveries);
            }
        }
    }

    fn record_redelivery(&mut self, stream: &StreamState, seq: u64, now_nanos: i64) -> Delivery {
        let entry = *self
            .pending
            .get(seq)
            .expect("redelivery of a pending message");
        let deliveries = entry.deliveries + 1;
        let consumer_seq = self.take_consumer_seq();
        self.pending.insert(
            seq,
            PendingEntry {
                deliveries,
                last_delivered_nanos: now_nanos,
                redeliver_at_nanos: now_nanos
                    .saturating_add(self.policy.wait_after_delivery(deliveries)),
                ..entry
            },
        );
        Delivery {
            stream_seq: seq,
            consumer_seq,
            deliveries,
            pending_count: self.num_pending(stream),
        }
    }

    fn record_first_delivery(
        &mut self,
        stream: &StreamState,
        seq: u64,
        now_nanos: i64,
    ) -> Delivery {
        let delivery = self.record_first_delivery_counted(seq, now_nanos, 0);
        Delivery {
            pending_count: self.num_pending(stream),
            ..delivery
        }
    }

    /// A first delivery of `seq`, reporting `pending_count` messages still waiting after it.
    fn record_first_delivery_counted(
        &mut self,
        seq: u64,
        now_nanos: i64,
        pending_count: u64,
    ) -> Delivery {
        let consumer_seq = self.take_consumer_seq();
        self.advance_past(seq);
        if self.policy.takes_acks() {
            self.pending.insert(
                seq,
                PendingEntry {
                    consumer_seq,
                    deliveries: 1,
                    last_delivered_nanos: now_nanos,
                    redeliver_at_nanos: now_nanos
                        .saturating_add(self.policy.wait_after_delivery(1)),
                },
            );
        } else {
            // Ack policy none: delivered means acknowledged.
            self.ack_floor = SequencePair {
                consumer_seq,
                stream_seq: self.next_stream_seq - 1,
            };
        }
        Delivery {
            stream_seq: seq,
            consumer_seq,
            deliveries: 1,
            pending_count,
        }
    }

    fn take_consumer_seq(&mut self) -> u64 {
        let seq = self.next_consumer_seq;
        self.next_consumer_seq += 1;
        seq
    }

    /// Moves the first-delivery position past `seq`, leaving the `last_per_subject` plan
    /// when its last planned message goes out.
    fn advance_past(&mut self, seq: u64) {
        if let Some(plan) = &mut self.last_per_subject {
            if plan.seqs.front() == Some(&seq) || plan.seqs.contains(&seq) {
                plan.seqs.retain(|planned| *planned > seq);
                if plan.seqs.is_empty() {
                    let resume = plan.resume_after + 1;
                    self.last_per_subject = None;
                    self.next_stream_seq = self.next_stream_seq.max(resume);
                    return;
                }
                self.next_stream_seq = self.next_stream_seq.max(seq + 1);
                return;
            }
            // A message after the plan's end: the plan is finished.
            self.last_per_subject = None;
        }
        self.next_stream_seq = self.next_stream_seq.max(seq + 1);
    }

    /// Nothing left to deliver: move the position to the stream's end so later searches
    /// start there (nats-server does the same for filtered consumers).
    fn skip_to_stream_end(&mut self, stream: &StreamState) {
        let nothing_new = stream
            .next_matching(&self.policy.filter, self.next_stream_seq)
            .is_none();
        if self.last_per_subject.is_none()
            && nothing_new
            && self.next_stream_seq <= stream.last_seq()
        {
            self.next_stream_seq = stream.last_seq() + 1;
        }
    }
}
