//! Consumer reset: back to the ack floor, forward, backwards over acknowledged messages, the
//! `last_per_subject` plan dropped, and the deliver-policy rules the API checks.

use crate::jsapi::consumer_config::{ConsumerConfig, DeliverPolicy};
use crate::jsapi::time::Timestamp;

use super::tests_deliver::{explicit, seqs, stream_with, SEC};
use super::*;

fn reset(
    consumer: &mut ConsumerState,
    stream: &crate::jscore::stream::StreamState,
    seq: u64,
) -> u64 {
    match consumer.apply(stream, ConsumerCommand::Reset { seq }) {
        ConsumerOutcome::Reset { reset_seq } => reset_seq,
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn reset_to_the_floor_redelivers_from_above_it_with_consumer_seq_1() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d", "s.e"]);
    let mut consumer = ConsumerState::new(explicit(30 * SEC), &stream);
    consumer.deliver_next(&stream, 4, 0);
    consumer.ack(1);
    consumer.ack(3); // out of order: the floor stays at 1
    assert_eq!(consumer.ack_floor().stream_seq, 1);
    assert_eq!(reset(&mut consumer, &stream, 0), 2);
    assert_eq!(consumer.num_ack_pending(), 0);
    assert_eq!(
        consumer.delivered(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 1
        }
    );
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 1
        }
    );
    assert_eq!(consumer.num_pending(&stream), 4);
    let delivered = consumer.deliver_next(&stream, 10, SEC);
    assert_eq!(seqs(&delivered), vec![2, 3, 4, 5]);
    assert_eq!(delivered[0].consumer_seq, 1);
    assert_eq!(delivered[0].deliveries, 1, "a first delivery again");
    assert_eq!(delivered[3].consumer_seq, 4);
}

#[test]
fn reset_forward_skips_and_moves_the_floor_up() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d", "s.e"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 2, 0);
    assert_eq!(reset(&mut consumer, &stream, 4), 4);
    assert_eq!(consumer.ack_floor().stream_seq, 3);
    assert_eq!(
        consumer.next_redelivery_at(),
        None,
        "nothing pending is due"
    );
    // The old pending messages are forgotten: no redelivery of 1 or 2 after their wait.
    let delivered = consumer.deliver_next(&stream, 10, 5 * SEC);
    assert_eq!(seqs(&delivered), vec![4, 5]);
    assert_eq!(delivered[0].consumer_seq, 1);
    for seq in 1..=3 {
        assert!(!consumer.still_needs(seq, "s.x"), "seq {seq}");
    }
    // An ack of a message from before the reset is not pending any more.
    assert_eq!(consumer.ack(2), AckOutcome::NotPending);
}

#[test]
fn reset_backwards_redelivers_acknowledged_messages() {
    let stream = stream_with(&["s.a", "s.b", "s.c"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 3, 0);
    for seq in 1..=3 {
        consumer.ack(seq);
    }
    assert_eq!(consumer.ack_floor().stream_seq, 3);
    assert!(consumer.deliver_next(&stream, 10, 0).is_empty());
    assert_eq!(reset(&mut consumer, &stream, 2), 2);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 1
        },
        "the floor moves backwards"
    );
    assert!(consumer.still_needs(2, "s.b"));
    let delivered = consumer.deliver_next(&stream, 10, SEC);
    assert_eq!(seqs(&delivered), vec![2, 3]);
    assert_eq!(delivered[0].consumer_seq, 1);
    assert_eq!(
        consumer.ack(3),
        AckOutcome::Acked {
            stream_seqs: vec![3]
        }
    );
}

#[test]
fn reset_drops_exhausted_messages_and_the_last_per_subject_plan() {
    let stream = stream_with(&["s.a", "s.b", "s.a", "s.b"]);
    let config = ConsumerConfig {
        deliver_policy: DeliverPolicy::LastPerSubject,
        max_deliver: 1,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    assert!(consumer.export().last_per_subject.is_some());
    assert_eq!(seqs(&consumer.deliver_next(&stream, 1, 0)), vec![3]);
    consumer.deliver_next(&stream, 1, 2 * SEC); // 3 runs out of deliveries
    assert!(consumer.is_exhausted(3));
    // 1 and 2 were never this consumer's (the plan skips them); 3 ran out of deliveries.
    assert_eq!(consumer.released_by_reset(&stream, 4), vec![3]);
    reset(&mut consumer, &stream, 1);
    assert!(!consumer.is_exhausted(3));
    assert_eq!(consumer.export().last_per_subject, None);
    assert_eq!(
        seqs(&consumer.deliver_next(&stream, 10, 3 * SEC)),
        vec![1, 2, 3, 4]
    );
}

#[test]
fn released_by_reset_is_what_a_forward_reset_skips() {
    let stream = stream_with(&["s.a", "s.b", "s.a", "s.a", "s.b"]);
    let config = ConsumerConfig {
        filter_subject: "s.a".into(),
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    consumer.deliver_next(&stream, 1, 0);
    consumer.ack(1);
    // Floor at 1: the filtered messages above it and below the new start.
    assert_eq!(consumer.released_by_reset(&stream, 5), vec![3, 4]);
    assert_eq!(consumer.released_by_reset(&stream, 4), vec![3]);
    // Backwards, or back to the floor: nothing.
    assert!(consumer.released_by_reset(&stream, 1).is_empty());
    assert!(consumer.released_by_reset(&stream, 0).is_empty());
    // Bounded by what the stream holds.
    assert_eq!(consumer.released_by_reset(&stream, 1_000_000), vec![3, 4]);
}

#[test]
fn reset_rules_follow_the_deliver_policy() {
    let stream = stream_with(&["s.a", "s.b", "s.c", "s.d"]); // stored at 1..=4 ns
    let code = |result: Result<u64, crate::jsapi::ApiError>| result.map_err(|e| e.description);
    let all = ConsumerState::new(explicit(SEC), &stream);
    assert_eq!(code(all.check_reset(&stream, 0)), Ok(1));
    assert_eq!(code(all.check_reset(&stream, 3)), Ok(3));

    let by_seq = ConsumerState::new(
        ConsumerConfig {
            deliver_policy: DeliverPolicy::ByStartSequence,
            opt_start_seq: 3,
            ..explicit(SEC)
        },
        &stream,
    );
    assert_eq!(code(by_seq.check_reset(&stream, 3)), Ok(3));
    assert_eq!(
        code(by_seq.check_reset(&stream, 2)),
        Err("invalid reset: below start seq".into())
    );
    assert_eq!(
        code(by_seq.check_reset(&stream, 0)),
        Ok(3),
        "the floor is 2"
    );

    let by_time = ConsumerState::new(
        ConsumerConfig {
            deliver_policy: DeliverPolicy::ByStartTime,
            opt_start_time: Some(Timestamp::from_unix_nanos(3)),
            ..explicit(SEC)
        },
        &stream,
    );
    assert_eq!(code(by_time.check_reset(&stream, 3)), Ok(3));
    assert_eq!(
        code(by_time.check_reset(&stream, 2)),
        Err("invalid reset: below start time".into())
    );

    for policy in [
        DeliverPolicy::Last,
        DeliverPolicy::New,
        DeliverPolicy::LastPerSubject,
    ] {
        let consumer = ConsumerState::new(
            ConsumerConfig {
                deliver_policy: policy,
                ..explicit(SEC)
            },
            &stream,
        );
        let refused = consumer.check_reset(&stream, 4).unwrap_err();
        assert_eq!(
            (refused.code, refused.err_code, refused.description.as_str()),
            (400, 10204, "invalid reset: not allowed"),
            "{policy:?}"
        );
        assert!(consumer.check_reset(&stream, 0).is_ok(), "{policy:?}");
    }
}
