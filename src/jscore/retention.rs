//! Retention policies beyond limits: which messages a stream may drop because consumers are
//! done with them, and which consumers a work-queue stream admits.
//!
//! * `limits`: acks never remove anything.
//! * `workqueue`: a message is removed once its (single) consumer acknowledges it; filters
//!   of a work queue's consumers may not overlap, so each message has one consumer.
//! * `interest`: a message is removed once no consumer whose filter selects it still needs
//!   it; with no consumers at all nothing is retained (appends are skipped, see
//!   `StreamState::append`, and deleting the last consumer purges).
//!
//! The stream group applies this step after every ack and delivery (see `group.rs`), so it
//! is replicated like everything else: same acks in, same removals out.

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy};
use crate::jsapi::error::{ApiError, ErrorKind};
use crate::jsapi::stream_config::RetentionPolicy;
use crate::jscore::consumer::ConsumerState;
use crate::jscore::stream::StreamState;
use crate::jscore::subject_filter::SubjectFilter;

/// The sequences among `candidates` (just acknowledged, or just delivered to an ack-none
/// consumer) that retention now allows the stream to remove.
pub fn removable<'a>(
    retention: RetentionPolicy,
    stream: &StreamState,
    consumers: impl Iterator<Item = &'a ConsumerState> + Clone,
    candidates: &[u64],
) -> Vec<u64> {
    match retention {
        RetentionPolicy::Limits => Vec::new(),
        // One consumer per message: its acknowledgement is the only one there will be.
        RetentionPolicy::WorkQueue => candidates
            .iter()
            .copied()
            .filter(|seq| {
                stream.get(*seq).is_some_and(|msg| {
                    !consumers
                        .clone()
                        .any(|consumer| consumer.still_needs(*seq, msg.subject))
                })
            })
            .collect(),
        RetentionPolicy::Interest => candidates
            .iter()
            .copied()
            .filter(|seq| no_consumer_needs(stream, consumers.clone(), *seq))
            .collect(),
    }
}

/// Every stored message no consumer needs any more (interest streams, after a consumer is
/// deleted). With no consumers this is every message.
pub fn unneeded_messages<'a>(
    stream: &StreamState,
    consumers: impl Iterator<Item = &'a ConsumerState> + Clone,
) -> Vec<u64> {
    let mut unneeded = Vec::new();
    let mut seq = stream.first_seq();
    while let Some((found, _)) = stream.next_matching(&SubjectFilter::all(), seq) {
        if no_consumer_needs(stream, consumers.clone(), found) {
            unneeded.push(found);
        }
        seq = found + 1;
    }
    unneeded
}

fn no_consumer_needs<'a>(
    stream: &StreamState,
    mut consumers: impl Iterator<Item = &'a ConsumerState>,
    seq: u64,
) -> bool {
    match stream.get(seq) {
        Some(msg) => !consumers.any(|consumer| consumer.still_needs(seq, msg.subject)),
        None => false,
    }
}

/// Work-queue admission (nats-server's checks on consumer create): explicit ack, deliver
/// all, and no two consumers that could receive the same message. `others` are the
/// stream's existing consumers except the one being created or updated.
pub fn check_work_queue_consumer<'a>(
    others: impl Iterator<Item = &'a ConsumerConfig>,
    candidate: &ConsumerConfig,
) -> Result<(), ApiError> {
    // A consumer a stream sources through (2.14's `sourcing`) is exempt, as on nats-server:
    // it stands for another stream, not for one more worker.
    if candidate.sourcing {
        return Ok(());
    }
    // `flow_control` acks are explicit acks of each stored message, batched (ADR-60).
    if !matches!(
        candidate.ack_policy,
        AckPolicy::Explicit | AckPolicy::FlowControl
    ) {
        return Err(ApiError::new(ErrorKind::ConsumerWqRequiresExplicitAck));
    }
    if candidate.deliver_policy != DeliverPolicy::All {
        return Err(ApiError::new(ErrorKind::ConsumerWqConsumerNotDeliverAll));
    }
    let candidate_filter = SubjectFilter::new(candidate.filters());
    for other in others {
        let other_filter = SubjectFilter::new(other.filters());
        if candidate_filter.is_all() {
            return Err(ApiError::new(ErrorKind::ConsumerWqMultipleUnfiltered));
        }
        if candidate_filter.overlaps(&other_filter) {
            return Err(ApiError::new(ErrorKind::ConsumerWqConsumerNotUnique));
        }
    }
    Ok(())
}
