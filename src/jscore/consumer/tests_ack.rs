//! Acknowledgements: ack floor movement with out-of-order acks, ack all, nak (with delay),
//! term, in-progress, and ack policy `flow_control` (only `AckAll`, no redelivery timer).

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};

use super::tests_deliver::{explicit, seqs, stream_with, SEC};
use super::*;

#[test]
fn ack_floor_moves_over_the_contiguous_prefix_only() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 4, 0);
    assert_eq!(
        consumer.ack(3),
        AckOutcome::Acked {
            stream_seqs: vec![3]
        }
    );
    assert_eq!(
        consumer.ack(2),
        AckOutcome::Acked {
            stream_seqs: vec![2]
        }
    );
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 0
        }
    );
    consumer.ack(1);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 3,
            stream_seq: 3
        }
    );
    assert_eq!(consumer.ack(1), AckOutcome::NotPending);
    consumer.ack(4);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 4,
            stream_seq: 4
        }
    );
    assert_eq!(consumer.num_ack_pending(), 0);
}

#[test]
fn ack_beyond_delivered_is_ignored() {
    let stream = stream_with(&["s.a", "s.b"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 1, 0);
    assert_eq!(consumer.ack(2), AckOutcome::BeyondDelivered);
    assert_eq!(consumer.num_ack_pending(), 1);
}

#[test]
fn ack_floor_uses_first_delivery_consumer_sequence() {
    let stream = stream_with(&["s.a", "s.b"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 2, 0);
    consumer.deliver_next(&stream, 1, SEC); // seq 1 again as consumer seq 3
    consumer.ack(2);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 0
        }
    );
    consumer.ack(1);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 3,
            stream_seq: 2
        }
    );
}

#[test]
fn ack_all_policy_acks_everything_below() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d"]);
    let config = ConsumerConfig {
        ack_policy: AckPolicy::All,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    consumer.deliver_next(&stream, 4, 0);
    assert_eq!(
        consumer.ack(3),
        AckOutcome::Acked {
            stream_seqs: vec![1, 2, 3]
        }
    );
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 3,
            stream_seq: 3
        }
    );
    assert_eq!(consumer.ack(2), AckOutcome::NotPending);
    assert_eq!(consumer.num_ack_pending(), 1);
    // AckAll is also available as a command for explicit consumers.
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 4, 0);
    let outcome = consumer.apply(&stream, ConsumerCommand::AckAll { stream_seq: 2 });
    assert_eq!(
        outcome,
        ConsumerOutcome::Ack(AckOutcome::Acked {
            stream_seqs: vec![1, 2]
        })
    );
}

#[test]
fn nak_redelivers_now_or_after_delay() {
    let stream = stream_with(&["s.a", "s.b", "s.c"]);
    let mut consumer = ConsumerState::new(explicit(30 * SEC), &stream);
    consumer.deliver_next(&stream, 2, 0);
    assert_eq!(
        consumer.nak(2, None, SEC),
        AckOutcome::Rescheduled {
            redeliver_at_nanos: SEC
        }
    );
    assert_eq!(
        consumer.nak(1, Some(5 * SEC), SEC),
        AckOutcome::Rescheduled {
            redeliver_at_nanos: 6 * SEC
        }
    );
    // seq 2 now, then the new seq 3; seq 1 waits for its delay.
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, SEC)), vec![2, 3]);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 6 * SEC)), vec![1]);
    assert_eq!(
        consumer.nak(1, None, 7 * SEC),
        AckOutcome::Rescheduled {
            redeliver_at_nanos: 7 * SEC
        }
    );
    assert_eq!(consumer.pending_entry(1).unwrap().deliveries, 2);
}

#[test]
fn term_stops_redelivery_and_counts_as_acked() {
    let stream = stream_with(&["s.a", "s.b"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 2, 0);
    assert_eq!(
        consumer.term(1),
        AckOutcome::Acked {
            stream_seqs: vec![1]
        }
    );
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 5 * SEC)), vec![2]);
    assert_eq!(consumer.ack_floor().stream_seq, 1);
}

#[test]
fn in_progress_pushes_the_deadline() {
    let stream = stream_with(&["s.a"]);
    let mut consumer = ConsumerState::new(explicit(10 * SEC), &stream);
    consumer.deliver_next(&stream, 1, 0);
    assert_eq!(
        consumer.in_progress(1, 8 * SEC),
        AckOutcome::Rescheduled {
            redeliver_at_nanos: 18 * SEC
        }
    );
    assert!(consumer.deliver_next(&stream, 1, 10 * SEC).is_empty());
    assert_eq!(consumer.deliver_next(&stream, 1, 18 * SEC)[0].deliveries, 2);
    assert_eq!(consumer.in_progress(9, 0), AckOutcome::BeyondDelivered);
}

#[test]
fn late_ack_of_exhausted_message_releases_it() {
    let stream = stream_with(&["s.a"]);
    let config = ConsumerConfig {
        max_deliver: 1,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    consumer.deliver_next(&stream, 1, 0);
    consumer.deliver_next(&stream, 1, 2 * SEC);
    assert!(consumer.still_needs(1, "s.a"));
    assert_eq!(
        consumer.num_redelivered(),
        0,
        "max_deliver 1 reports no redeliveries"
    );
    assert_eq!(
        consumer.ack(1),
        AckOutcome::Acked {
            stream_seqs: vec![1]
        }
    );
    assert!(!consumer.still_needs(1, "s.a"));
}

fn flow_control() -> ConsumerConfig {
    ConsumerConfig {
        ack_policy: AckPolicy::FlowControl,
        flow_control: true,
        max_ack_pending: 100,
        ..Default::default()
    }
}

#[test]
fn flow_control_ignores_client_acks_and_honours_ack_all() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d"]);
    let mut consumer = ConsumerState::new(flow_control(), &stream);
    assert_eq!(
        seqs(&consumer.deliver_next(&stream, 4, 0)),
        vec![1, 2, 3, 4]
    );
    assert_eq!(consumer.num_ack_pending(), 4);
    let client_acks = [
        ConsumerCommand::Ack { stream_seq: 2 },
        ConsumerCommand::Nak {
            stream_seq: 1,
            delay_nanos: None,
            now_nanos: SEC,
        },
        ConsumerCommand::Term { stream_seq: 1 },
        ConsumerCommand::InProgress {
            stream_seq: 1,
            now_nanos: SEC,
        },
    ];
    for command in client_acks {
        assert_eq!(
            consumer.apply(&stream, command.clone()),
            ConsumerOutcome::Ack(AckOutcome::NoAckPolicy),
            "{command:?}"
        );
    }
    assert_eq!(consumer.num_ack_pending(), 4);
    assert_eq!(consumer.ack_floor().stream_seq, 0);
    // A flow-control answer's `Nats-Last-Stream`, proposed as `AckAll`.
    assert_eq!(
        consumer.apply(&stream, ConsumerCommand::AckAll { stream_seq: 3 }),
        ConsumerOutcome::Ack(AckOutcome::Acked {
            stream_seqs: vec![1, 2, 3]
        })
    );
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 3,
            stream_seq: 3
        }
    );
    assert!(!consumer.still_needs(3, "s.c"));
    assert!(consumer.still_needs(4, "s.d"));
}

#[test]
fn flow_control_never_falls_due_for_redelivery() {
    let stream = stream_with(&["s.a", "s.b"]);
    let mut consumer = ConsumerState::new(flow_control(), &stream);
    consumer.deliver_next(&stream, 2, 0);
    assert_eq!(consumer.next_redelivery_at(), None);
    assert_eq!(
        consumer.pending_entry(1).unwrap().redeliver_at_nanos,
        NEVER_DUE
    );
    // Far past any ack wait: nothing is redelivered, nothing runs out of deliveries.
    let later = 1_000_000 * SEC;
    assert!(consumer.due_exhausted(later).is_empty());
    assert!(consumer.deliver_next(&stream, 10, later).is_empty());
    assert_eq!(consumer.pending_entry(2).unwrap().deliveries, 1);
    assert_eq!(consumer.num_ack_pending(), 2);
    // An explicit consumer with the same wait would have redelivered.
    let mut explicit = ConsumerState::new(explicit(SEC), &stream);
    explicit.deliver_next(&stream, 2, 0);
    assert_eq!(explicit.next_redelivery_at(), Some(SEC));
    assert_eq!(seqs(&explicit.deliver_next(&stream, 10, later)), vec![1, 2]);
}
