//! Acknowledgements: the internal subscriber on each led stream's `$JS.ACK.<stream>.>` (and
//! `$JS.FC.<stream>.>` flow-control replies), and one ack batcher per stream that turns
//! every ack waiting at that moment into one proposal — many `StreamCommand::Consumer`
//! commands in one Raft entry, one fsync (group commit) — with up to `MAX_IN_FLIGHT`
//! proposals on their way (the group's proposal batcher merges them with whatever else the
//! group is proposing).
//!
//! After the entry is applied: a double-ack (an ack published with a reply subject, nats.go
//! `AckSync`/`DoubleAck`) gets an empty message on that reply; `+NXT` becomes a pull request
//! whose reply subject is the ack's. Acks the stream cannot take (no leader, fsync failure)
//! are dropped: the messages stay pending and are redelivered, which is at-least-once.
//!
//! Each stream's ack queue is bounded (`MAX_QUEUED_ACKS`, counting acks from arrival until
//! their proposal is settled). nats-server's per-consumer ack queue has no bound; here an
//! ack arriving at a full queue is dropped like an ack the stream cannot take — the message
//! stays pending and is redelivered after `ack_wait` (a dropped `AckSync` gets no reply, a
//! dropped `+NXT` no messages) — counted in `/varz` (`jetstream.dropped.acks`) with a
//! rate-limited warning. Bounded memory, no lost message: at-least-once holds.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};

use super::ack_sample;
use super::outbox::{self, Outbox};
use super::DeliveryRegistry;
use crate::jetstream::advisories;
use crate::jetstream::now_nanos;
use crate::jetstream::queue::{Dropped, PushError, QueueReceiver, QueueSender, Taken};
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::advisory::{Advisory, DeliveryEvent};
use crate::jsapi::{AckKind, AckReply, ApiError};
use crate::jscore::consumer::{AckOutcome, ConsumerCommand, ConsumerOutcome};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::server::message::Message;
use crate::server::subscription::InternalSubscriber;

/// Most acks in one proposal.
const MAX_BATCH: usize = 4096;
/// Most ack proposals of one stream on their way at once.
const MAX_IN_FLIGHT: usize = 4;
/// Most acks of one stream queued or being proposed (as many as a stream's ingest queue
/// holds messages); see the module doc.
pub(super) const MAX_QUEUED_ACKS: usize = 100_000;

/// One ack on its way to the stream's batcher.
#[derive(Debug)]
pub(super) struct AckItem {
    pub(super) consumer: String,
    pub(super) stream_seq: u64,
    /// From the ack subject, for the nak and terminated advisories and ack samples.
    pub(super) consumer_seq: u64,
    pub(super) num_delivered: u64,
    pub(super) kind: AckKind,
    /// The ack message's own reply subject (double ack, or the `+NXT` target).
    reply: Option<Bytes>,
}

/// The internal subscriber on the ack and flow-control subjects of every stream this node
/// delivers for; parses and hands off, never blocks (it runs on the publishing client's
/// task).
#[derive(Debug)]
pub(super) struct AckInbox {
    registry: Weak<DeliveryRegistry>,
}

impl AckInbox {
    pub(super) fn new(registry: Weak<DeliveryRegistry>) -> Self {
        AckInbox { registry }
    }
}

impl InternalSubscriber for AckInbox {
    fn receive(&self, msg: &Message) -> bool {
        let Some(registry) = self.registry.upgrade() else {
            return false;
        };
        let Ok(subject) = std::str::from_utf8(&msg.subject) else {
            return true;
        };
        if let Some((stream, consumer)) = outbox::parse_flow_control_subject(subject) {
            let last_stream = msg.headers.as_deref().and_then(outbox::last_stream_seq);
            registry.route_flow_control(stream, consumer, subject.to_owned(), last_stream);
            return true;
        }
        // Malformed subjects and unknown payloads are ignored, as nats-server does.
        let Ok(ack) = AckReply::parse(subject) else {
            return true;
        };
        let Some(kind) = AckKind::parse(&msg.payload) else {
            return true;
        };
        let item = AckItem {
            consumer: ack.consumer,
            stream_seq: ack.stream_seq,
            consumer_seq: ack.consumer_seq,
            num_delivered: ack.num_delivered,
            kind,
            reply: msg.reply.clone(),
        };
        registry.route_ack(item, &ack.stream);
        true
    }
}

/// Queues an ack for its stream's batcher; a full queue drops it (see the module doc).
pub(super) fn enqueue(
    queue: &QueueSender<AckItem>,
    item: AckItem,
    stream: &str,
    dropped: &Dropped,
) {
    match queue.push(item) {
        Ok(_) => {}
        Err(PushError::Full(_)) => {
            if dropped.record(1) {
                tracing::warn!(
                    stream,
                    total = dropped.total(),
                    "ack queue full ({MAX_QUEUED_ACKS}): ack dropped, the message will be redelivered"
                );
            }
        }
        Err(PushError::Closed(_)) => {
            tracing::debug!(stream, "ack for a stream whose batcher stopped");
        }
    }
}

/// The replicated command an ack becomes.
fn command(item: &AckItem, now_nanos: i64) -> StreamCommand {
    let stream_seq = item.stream_seq;
    let command = match &item.kind {
        AckKind::Ack | AckKind::Next(_) => ConsumerCommand::Ack { stream_seq },
        AckKind::Nak { delay } => ConsumerCommand::Nak {
            stream_seq,
            delay_nanos: *delay,
            now_nanos,
        },
        AckKind::InProgress => ConsumerCommand::InProgress {
            stream_seq,
            now_nanos,
        },
        AckKind::Term { .. } => ConsumerCommand::Term { stream_seq },
    };
    StreamCommand::Consumer {
        name: item.consumer.clone(),
        command,
    }
}

/// Whether an applied ack earns the empty double-ack reply: every ack the consumer took,
/// including one for a message no longer pending; not one beyond what was delivered, nor
/// any on an ack-none consumer.
fn earns_reply(outcome: &StreamOutcome) -> bool {
    match outcome {
        StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Ack(ack),
            ..
        } => !matches!(ack, AckOutcome::BeyondDelivered | AckOutcome::NoAckPolicy),
        _ => false,
    }
}

/// The advisory nats-server publishes for an applied ack: a `-NAK` or `+TERM` of a message
/// that was pending (one already acknowledged, or beyond the delivered ones, gets none).
/// Plain acks (the hot path) return before anything is built.
fn advisory(stream: &str, item: &AckItem, outcome: &StreamOutcome) -> Option<Advisory> {
    let StreamOutcome::Consumer {
        outcome: ConsumerOutcome::Ack(ack),
        ..
    } = outcome
    else {
        return None;
    };
    let event = |reason: Option<&String>| DeliveryEvent {
        stream: stream.to_owned(),
        consumer: item.consumer.clone(),
        consumer_seq: item.consumer_seq,
        stream_seq: item.stream_seq,
        deliveries: item.num_delivered,
        reason: reason.filter(|reason| !reason.is_empty()).cloned(),
    };
    match (&item.kind, ack) {
        (AckKind::Nak { .. }, AckOutcome::Rescheduled { .. }) => Some(Advisory::Nak(event(None))),
        (AckKind::Term { reason }, AckOutcome::Acked { .. }) => {
            Some(Advisory::Terminated(event(reason.as_ref())))
        }
        _ => None,
    }
}

/// One stream's ack batcher; ends when the stream is detached or the server stops.
pub(super) async fn run(
    registry: Weak<DeliveryRegistry>,
    handle: Arc<StreamHandle>,
    mut incoming: QueueReceiver<AckItem>,
    outbox: Outbox,
) {
    let shutdown = outbox.shared().shutdown.clone();
    // Proposals on their way, answered in order. Several at once, so acks reach the group's
    // proposal batcher as they arrive and share an entry (one fsync) with whatever else is
    // proposed meanwhile — typically the consumer's next `DeliverNext`.
    let mut in_flight: FuturesOrdered<BoxFuture<'static, ProposedAcks>> = FuturesOrdered::new();
    loop {
        tokio::select! {
            biased;
            Some(proposed) = in_flight.next(), if !in_flight.is_empty() => {
                if !settle(&registry, &handle, &outbox, proposed) {
                    return;
                }
            }
            batch = incoming.recv_many(MAX_BATCH), if in_flight.len() < MAX_IN_FLIGHT => {
                let Some(batch) = batch else { break };
                let now = now_nanos();
                let commands = batch.iter().map(|item| command(item, now)).collect();
                let sampled = ack_sample::delivery_times(&handle.view(), batch.iter());
                let handle = handle.clone();
                in_flight.push_back(Box::pin(async move {
                    let outcomes = handle.propose(commands).await;
                    (batch, sampled, now, outcomes)
                }));
            }
            _ = shutdown.cancelled() => return,
        }
    }
    while let Some(proposed) = in_flight.next().await {
        if !settle(&registry, &handle, &outbox, proposed) {
            return;
        }
    }
}

/// The acks of one proposal (still counting against the queue's bound), the delivery times
/// of the sampled ones (`ack_sample`), when, the outcome.
type ProposedAcks = (
    Taken<AckItem>,
    Vec<Option<i64>>,
    i64,
    Result<Vec<Result<StreamOutcome, ApiError>>, ApiError>,
);

/// After a batch of acks was applied: activity times, double-ack replies, `+NXT` pull
/// requests. False once the registry is gone.
fn settle(
    registry: &Weak<DeliveryRegistry>,
    handle: &Arc<StreamHandle>,
    outbox: &Outbox,
    (batch, sampled, now, outcomes): ProposedAcks,
) -> bool {
    let outcomes = match outcomes {
        Ok(outcomes) => outcomes,
        Err(error) => {
            tracing::warn!(stream = %handle.name(), acks = batch.len(), "acks dropped: {error}");
            return true;
        }
    };
    let Some(registry) = registry.upgrade() else {
        return false;
    };
    let mut touched = HashSet::new();
    let items = batch.into_items().into_iter().zip(sampled);
    for ((item, delivered), outcome) in items.zip(outcomes) {
        let Ok(outcome) = outcome else {
            continue; // consumer gone
        };
        if let Some(advisory) = advisory(handle.name(), &item, &outcome) {
            advisories::publish(outbox.shared(), &advisory);
        }
        if let (
            Some(delivered),
            StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(ack),
                ..
            },
        ) = (delivered, &outcome)
        {
            if let Some(metric) = ack_sample::metric(handle.name(), &item, ack, delivered, now) {
                advisories::publish(outbox.shared(), &metric);
            }
        }
        if touched.insert(item.consumer.clone()) {
            if let Some(activity) = registry.activity(handle, &item.consumer) {
                activity.last_acked_nanos.store(now, Ordering::Relaxed);
                activity.touch(now);
            }
        }
        match (item.kind, item.reply) {
            (AckKind::Next(request), Some(reply)) => {
                registry.pull(handle, &item.consumer, reply, request);
            }
            (_, Some(reply)) if earns_reply(&outcome) => {
                outbox.publish(&Message::new(reply, Bytes::new()));
            }
            _ => {}
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(kind: AckKind) -> AckItem {
        AckItem {
            consumer: "proc".into(),
            stream_seq: 7,
            consumer_seq: 9,
            num_delivered: 2,
            kind,
            reply: None,
        }
    }

    #[test]
    fn acks_become_consumer_commands() {
        let consumer = |kind| match command(&item(kind), 99) {
            StreamCommand::Consumer { name, command } => {
                assert_eq!(name, "proc");
                command
            }
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(
            consumer(AckKind::Ack),
            ConsumerCommand::Ack { stream_seq: 7 }
        );
        assert_eq!(
            consumer(AckKind::Next(Ok(Default::default()))),
            ConsumerCommand::Ack { stream_seq: 7 }
        );
        assert_eq!(
            consumer(AckKind::Nak { delay: Some(5) }),
            ConsumerCommand::Nak {
                stream_seq: 7,
                delay_nanos: Some(5),
                now_nanos: 99
            }
        );
        assert_eq!(
            consumer(AckKind::InProgress),
            ConsumerCommand::InProgress {
                stream_seq: 7,
                now_nanos: 99
            }
        );
        assert_eq!(
            consumer(AckKind::Term { reason: None }),
            ConsumerCommand::Term { stream_seq: 7 }
        );
    }

    #[test]
    fn a_full_ack_queue_drops_and_counts() {
        let (queue, mut incoming) = crate::jetstream::queue::bounded(2);
        let dropped = Dropped::default();
        for _ in 0..3 {
            enqueue(&queue, item(AckKind::Ack), "S", &dropped);
        }
        assert_eq!(dropped.total(), 1);
        let queued = incoming.try_recv_many(10).expect("two acks queued");
        assert_eq!(queued.len(), 2);
        // Until their proposal is settled they still take the places.
        enqueue(&queue, item(AckKind::Ack), "S", &dropped);
        assert_eq!(dropped.total(), 2);
        drop(queued);
        enqueue(&queue, item(AckKind::Ack), "S", &dropped);
        assert_eq!(dropped.total(), 2);
    }

    #[test]
    fn nak_and_term_of_pending_messages_are_advised() {
        let ack = |outcome| StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Ack(outcome),
            removed: vec![],
        };
        let rescheduled = ack(AckOutcome::Rescheduled {
            redeliver_at_nanos: 1,
        });
        let acked = ack(AckOutcome::Acked {
            stream_seqs: vec![7],
        });
        let event = DeliveryEvent {
            stream: "S".into(),
            consumer: "proc".into(),
            consumer_seq: 9,
            stream_seq: 7,
            deliveries: 2,
            reason: None,
        };
        assert_eq!(
            advisory("S", &item(AckKind::Nak { delay: None }), &rescheduled),
            Some(Advisory::Nak(event.clone()))
        );
        let term = item(AckKind::Term {
            reason: Some("bad".into()),
        });
        assert_eq!(
            advisory("S", &term, &acked),
            Some(Advisory::Terminated(DeliveryEvent {
                reason: Some("bad".into()),
                ..event.clone()
            }))
        );
        // An empty reason is no reason.
        let blank = item(AckKind::Term {
            reason: Some(String::new()),
        });
        assert_eq!(
            advisory("S", &blank, &acked),
            Some(Advisory::Terminated(event))
        );
        // Not pending (already acknowledged), a plain ack, a +WPI: no advisory.
        let not_pending = ack(AckOutcome::NotPending);
        assert_eq!(advisory("S", &term, &not_pending), None);
        assert_eq!(
            advisory("S", &item(AckKind::Nak { delay: None }), &not_pending),
            None
        );
        assert_eq!(advisory("S", &item(AckKind::Ack), &acked), None);
        assert_eq!(
            advisory("S", &item(AckKind::InProgress), &rescheduled),
            None
        );
    }

    #[test]
    fn double_ack_replies() {
        let ack = |outcome| StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Ack(outcome),
            removed: vec![],
        };
        assert!(earns_reply(&ack(AckOutcome::Acked {
            stream_seqs: vec![7]
        })));
        assert!(earns_reply(&ack(AckOutcome::NotPending)));
        assert!(earns_reply(&ack(AckOutcome::Rescheduled {
            redeliver_at_nanos: 1
        })));
        assert!(!earns_reply(&ack(AckOutcome::BeyondDelivered)));
        assert!(!earns_reply(&ack(AckOutcome::NoAckPolicy)));
        assert!(!earns_reply(&StreamOutcome::ConsumerDeleted));
    }
}
