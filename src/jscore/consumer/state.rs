//! `ConsumerState`: one consumer's replicated bookkeeping (where delivery stands, the ack
//! floor, what is pending and when it is due, what ran out of deliveries) and the queries
//! ConsumerInfo and retention need. Delivery is in `deliver.rs`, acks in `ack.rs`, the
//! command enum in `command.rs`.
//!
//! One per consumer, inside its stream group on every replica.

use std::collections::BTreeMap;

use crate::jsapi::consumer_config::ConsumerConfig;
use crate::jscore::stream::StreamState;

use super::pending::PendingSet;
use super::policy::DeliveryPolicy;
use super::start::{LastPerSubjectPlan, StartPosition};

/// A (consumer sequence, stream sequence) pair, as ConsumerInfo's `delivered` and
/// `ack_floor` report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SequencePair {
    pub consumer_seq: u64,
    pub stream_seq: u64,
}

/// Everything ConsumerInfo reports about progress (the API layer adds names, config,
/// times, `num_waiting` and cluster info).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ConsumerProgress {
    pub delivered: SequencePair,
    pub ack_floor: SequencePair,
    pub num_ack_pending: u64,
    pub num_redelivered: u64,
    pub num_pending: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerState {
    pub(super) config: ConsumerConfig,
    pub(super) policy: DeliveryPolicy,
    /// Next consumer (delivery) sequence to hand out; every delivery takes one.
    pub(super) next_consumer_seq: u64,
    /// Next stream sequence to consider for a first delivery.
    pub(super) next_stream_seq: u64,
    pub(super) ack_floor: SequencePair,
    pub(super) pending: PendingSet,
    /// Messages that reached max_deliver without an ack: no longer pending (the ack floor
    /// may pass them) but not acknowledged either, so interest retention keeps them, and
    /// they count in `num_redelivered`. Value: delivery count.
    pub(super) exhausted: BTreeMap<u64, u64>,
    pub(super) last_per_subject: Option<LastPerSubjectPlan>,
    /// When the consumer was created (ConsumerInfo `created`); 0 if not known.
    pub(super) created_nanos: i64,
}

impl ConsumerState {
    /// A new consumer positioned by its deliver policy against the stream as it is now.
    pub fn new(config: ConsumerConfig, stream: &StreamState) -> Self {
        let policy = DeliveryPolicy::from_config(&config);
        let start = StartPosition::select(&config, &policy.filter, stream);
        let floor_stream_seq = start.next_stream_seq - 1;
        Self {
            config,
            policy,
            next_consumer_seq: 1,
            next_stream_seq: start.next_stream_seq,
            ack_floor: SequencePair {
                consumer_seq: 0,
                stream_seq: floor_stream_seq,
            },
            pending: PendingSet::default(),
            exhausted: BTreeMap::new(),
            last_per_subject: start.last_per_subject,
            created_nanos: 0,
        }
    }

    pub fn created_nanos(&self) -> i64 {
        self.created_nanos
    }

    pub fn set_created_nanos(&mut self, nanos: i64) {
        self.created_nanos = nanos;
    }

    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    pub fn policy(&self) -> &DeliveryPolicy {
        &self.policy
    }

    /// Installs an updated config (the API layer has refused changes to immutable fields).
    /// Pending messages keep their due times; new waits apply from their next delivery.
    pub fn update_config(&mut self, config: ConsumerConfig) {
        self.policy = DeliveryPolicy::from_config(&config);
        self.config = config;
    }

    /// Last delivered consumer sequence and the stream sequence delivery has reached.
    pub fn delivered(&self) -> SequencePair {
        SequencePair {
            consumer_seq: self.next_consumer_seq - 1,
            stream_seq: self.next_stream_seq - 1,
        }
    }

    pub fn ack_floor(&self) -> SequencePair {
        self.ack_floor
    }

    pub fn num_ack_pending(&self) -> u64 {
        self.pending.len() as u64
    }

    /// Distinct messages delivered more than once that are still tracked (pending or out of
    /// deliveries). Reported as 0 when max_deliver is 1, as nats-server does.
    pub fn num_redelivered(&self) -> u64 {
        if self.policy.max_deliver == Some(1) {
            return 0;
        }
        let pending = self
            .pending
            .iter()
            .filter(|(_, entry)| entry.deliveries > 1)
            .count();
        let exhausted = self.exhausted.values().filter(|d| **d > 1).count();
        (pending + exhausted) as u64
    }

    /// Messages the filter selects that have not been delivered yet (never counting
    /// redeliveries), as ConsumerInfo `num_pending` and the ack subject report it.
    pub fn num_pending(&self, stream: &StreamState) -> u64 {
        match &self.last_per_subject {
            Some(plan) => {
                let planned = plan
                    .seqs
                    .iter()
                    .filter(|seq| stream.contains(**seq))
                    .count() as u64;
                planned + stream.count_matching_after(&self.policy.filter, plan.resume_after)
            }
            None => stream.count_matching_after(&self.policy.filter, self.next_stream_seq - 1),
        }
    }

    pub fn progress(&self, stream: &StreamState) -> ConsumerProgress {
        ConsumerProgress {
            delivered: self.delivered(),
            ack_floor: self.ack_floor,
            num_ack_pending: self.num_ack_pending(),
            num_redelivered: self.num_redelivered(),
            num_pending: self.num_pending(stream),
        }
    }

    /// Pending entry for a stream sequence (deliveries, due time…).
    pub fn pending_entry(&self, stream_seq: u64) -> Option<&super::pending::PendingEntry> {
        self.pending.get(stream_seq)
    }

    /// When the next pending message falls due: the leader arms its redelivery timer with
    /// this (and re-arms it from here after a leader change). `None` for a consumer that
    /// never redelivers on timeout (ack policy `flow_control`).
    pub fn next_redelivery_at(&self) -> Option<i64> {
        if !self.policy.redelivers_on_timeout() {
            return None;
        }
        self.pending.next_due_at()
    }

    /// True while this consumer may still need the message for retention purposes: it is
    /// selected by the filter and not yet acknowledged (pending, out of deliveries, or not
    /// delivered yet).
    pub fn still_needs(&self, stream_seq: u64, subject: &str) -> bool {
        if !self.policy.filter.matches(subject) {
            return false;
        }
        if self.pending.contains(stream_seq) || self.exhausted.contains_key(&stream_seq) {
            return true;
        }
        if stream_seq <= self.ack_floor.stream_seq {
            return false;
        }
        if let Some(plan) = &self.last_per_subject {
            // Below the plan's end only the planned sequences will ever be delivered.
            if stream_seq <= plan.resume_after {
                return plan.seqs.contains(&stream_seq);
            }
            return true;
        }
        stream_seq >= self.next_stream_seq
    }

    /// Forgets pending and exhausted messages the stream no longer holds (limits, delete,
    /// retention by another consumer), as nats-server terminates them.
    pub fn on_messages_removed(&mut self, stream: &StreamState) {
        self.pending.retain(|seq| stream.contains(seq));
        self.exhausted.retain(|seq, _| stream.contains(*seq));
        if let Some(plan) = &mut self.last_per_subject {
            plan.seqs.retain(|seq| stream.contains(*seq));
        }
        self.refresh_ack_floor();
    }

    /// After a purge: like `on_messages_removed`, and delivery skips to the new first
    /// sequence (nats-server moves a consumer's position up on purge).
    pub fn on_stream_purged(&mut self, stream: &StreamState) {
        if self.next_stream_seq < stream.first_seq() {
            self.next_stream_seq = stream.first_seq();
        }
        self.on_messages_removed(stream);
    }

    /// The ack floor sits just below the lowest pending message, or at the delivered
    /// position when nothing is pending. Pending entries are created in stream order with
    /// increasing consumer sequences, so this only ever moves forward.
    pub(super) fn refresh_ack_floor(&mut self) {
        let floor = match self.pending.lowest() {
            Some((stream_seq, entry)) => SequencePair {
                consumer_seq: entry.consumer_seq - 1,
                stream_seq: stream_seq - 1,
            },
            None => self.delivered(),
        };
        if floor.stream_seq >= self.ack_floor.stream_seq {
            self.ack_floor = floor;
        }
    }
}
