//! Delivery: start positions, filters, num_pending, redelivery after ack_wait with a fake
//! clock, backoff, max_deliver, max_ack_pending.

use bytes::Bytes;

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy};
use crate::jsapi::stream_config::{StorageType, StreamConfig};
use crate::jsapi::time::Timestamp;
use crate::jscore::stream::{AppendRequest, StreamState};

use super::*;

pub(super) const SEC: i64 = 1_000_000_000;

pub(super) fn stream_with(subjects: &[&str]) -> StreamState {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.storage = StorageType::Memory;
    let mut stream = StreamState::new(config);
    for (index, subject) in subjects.iter().enumerate() {
        publish(&mut stream, subject, index as i64 + 1);
    }
    stream
}

pub(super) fn publish(stream: &mut StreamState, subject: &str, now: i64) -> u64 {
    let request = AppendRequest {
        subject: subject.to_string(),
        headers: None,
        payload: Bytes::from_static(b"x"),
        now_nanos: now,
    };
    stream.append(request, &|_| true).unwrap().seq()
}

pub(super) fn explicit(ack_wait: i64) -> ConsumerConfig {
    ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        ack_wait,
        ..Default::default()
    }
}

pub(super) fn seqs(deliveries: &[Delivery]) -> Vec<u64> {
    deliveries.iter().map(|d| d.stream_seq).collect()
}

#[test]
fn delivers_in_order_with_consumer_sequences_and_pending_counts() {
    let stream = stream_with(&["s.a", "s.b", "s.c"]);
    let mut consumer = ConsumerState::new(explicit(30 * SEC), &stream);
    assert_eq!(
        consumer.delivered(),
        SequencePair {
            consumer_seq: 0,
            stream_seq: 0
        }
    );
    assert_eq!(consumer.num_pending(&stream), 3);
    let preview = consumer.next_to_deliver(&stream, 0).unwrap();
    let delivered = consumer.deliver_next(&stream, 2, 0);
    assert_eq!(delivered[0], preview);
    assert_eq!(
        delivered,
        vec![
            Delivery {
                stream_seq: 1,
                consumer_seq: 1,
                deliveries: 1,
                pending_count: 2
            },
            Delivery {
                stream_seq: 2,
                consumer_seq: 2,
                deliveries: 1,
                pending_count: 1
            },
        ]
    );
    let progress = consumer.progress(&stream);
    assert_eq!(
        progress.delivered,
        SequencePair {
            consumer_seq: 2,
            stream_seq: 2
        }
    );
    assert_eq!(
        progress.ack_floor,
        SequencePair {
            consumer_seq: 0,
            stream_seq: 0
        }
    );
    assert_eq!((progress.num_ack_pending, progress.num_pending), (2, 1));
}

#[test]
fn filtered_consumer_skips_other_subjects_and_counts_only_matches() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a", "s.c"]);
    let config = ConsumerConfig {
        filter_subject: "s.a".into(),
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    assert_eq!(consumer.num_pending(&stream), 2);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 0)), vec![1, 3]);
    assert_eq!(consumer.num_pending(&stream), 0);
    // Nothing more to deliver: the position moves to the stream's end.
    assert_eq!(consumer.delivered().stream_seq, 4);
    publish(&mut stream, "s.b", 5);
    publish(&mut stream, "s.a", 6);
    assert_eq!(consumer.num_pending(&stream), 1);

    let multi = ConsumerConfig {
        filter_subjects: vec!["s.b".into(), "s.c".into()],
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(multi, &stream);
    assert_eq!(consumer.num_pending(&stream), 3);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 0)), vec![2, 4, 5]);
}

#[test]
fn deliver_policies_pick_the_start() {
    let stream = stream_with(&["s.a", "s.b", "s.a", "s.c", "s.b"]);
    let start = |policy: DeliverPolicy, tweak: &dyn Fn(&mut ConsumerConfig)| {
        let mut config = ConsumerConfig {
            deliver_policy: policy,
            ..explicit(SEC)
        };
        tweak(&mut config);
        let mut consumer = ConsumerState::new(config, &stream);
        let first_delivered = consumer.delivered().stream_seq;
        (
            first_delivered,
            seqs(&consumer.deliver_next(&stream, 10, 0)),
        )
    };
    assert_eq!(start(DeliverPolicy::All, &|_| {}), (0, vec![1, 2, 3, 4, 5]));
    assert_eq!(start(DeliverPolicy::Last, &|_| {}), (4, vec![5]));
    assert_eq!(
        start(DeliverPolicy::Last, &|c| c.filter_subject = "s.a".into()),
        (2, vec![3])
    );
    assert_eq!(start(DeliverPolicy::New, &|_| {}), (5, vec![]));
    assert_eq!(
        start(DeliverPolicy::ByStartSequence, &|c| c.opt_start_seq = 4),
        (3, vec![4, 5])
    );
    assert_eq!(
        start(DeliverPolicy::ByStartTime, &|c| c.opt_start_time =
            Some(Timestamp::from_unix_nanos(3))),
        (2, vec![3, 4, 5])
    );
    assert_eq!(
        start(DeliverPolicy::LastPerSubject, &|_| {}),
        (2, vec![3, 4, 5])
    );
    assert_eq!(
        start(DeliverPolicy::LastPerSubject, &|c| c.filter_subject =
            "s.b".into()),
        (4, vec![5])
    );
}

#[test]
fn last_per_subject_then_new_messages() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a", "s.b"]);
    let config = ConsumerConfig {
        deliver_policy: DeliverPolicy::LastPerSubject,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    assert_eq!(consumer.num_pending(&stream), 2);
    publish(&mut stream, "s.a", 9);
    assert_eq!(consumer.num_pending(&stream), 3);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 0)), vec![3, 4, 5]);
    assert_eq!(consumer.num_pending(&stream), 0);
}

#[test]
fn fresh_stream_consumer_starts_at_one() {
    let mut stream = stream_with(&[]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    assert_eq!(consumer.delivered(), SequencePair::default());
    assert!(consumer.next_to_deliver(&stream, 0).is_none());
    publish(&mut stream, "s.a", 1);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 1, 0)), vec![1]);
}

#[test]
fn redelivers_after_ack_wait_before_new_messages() {
    let stream = stream_with(&["s.a", "s.b", "s.c"]);
    let mut consumer = ConsumerState::new(explicit(10 * SEC), &stream);
    consumer.deliver_next(&stream, 1, 0);
    assert_eq!(consumer.next_redelivery_at(), Some(10 * SEC));
    // Not yet due: the next new message goes out.
    assert_eq!(seqs(&consumer.deliver_next(&stream, 1, 9 * SEC)), vec![2]);
    // Due now: seq 1 comes back first with a new consumer sequence and count 2.
    let redelivered = consumer.deliver_next(&stream, 2, 10 * SEC);
    assert_eq!(
        redelivered[0],
        Delivery {
            stream_seq: 1,
            consumer_seq: 3,
            deliveries: 2,
            pending_count: 1
        }
    );
    assert_eq!(redelivered[1].stream_seq, 3);
    assert_eq!(consumer.num_redelivered(), 1);
    assert_eq!(consumer.pending_entry(1).unwrap().consumer_seq, 1);
    assert_eq!(
        consumer.pending_entry(1).unwrap().redeliver_at_nanos,
        20 * SEC
    );
}

#[test]
fn backoff_sets_the_wait_before_each_redelivery() {
    let stream = stream_with(&["s.a"]);
    let config = ConsumerConfig {
        backoff: vec![SEC, 5 * SEC, 20 * SEC],
        ..explicit(0)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    let mut now = 0;
    let mut due_times = Vec::new();
    for _ in 0..4 {
        let delivered = consumer.deliver_next(&stream, 1, now);
        assert_eq!(delivered.len(), 1);
        now = consumer.next_redelivery_at().unwrap();
        due_times.push(now);
        // One nanosecond early is too early.
        assert!(consumer.next_to_deliver(&stream, now - 1).is_none());
    }
    assert_eq!(due_times, vec![SEC, 6 * SEC, 26 * SEC, 46 * SEC]);
}

#[test]
fn max_deliver_stops_redelivery_and_frees_the_floor() {
    let stream = stream_with(&["s.a", "s.b"]);
    let config = ConsumerConfig {
        max_deliver: 2,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    consumer.deliver_next(&stream, 1, 0);
    assert_eq!(consumer.deliver_next(&stream, 1, SEC)[0].deliveries, 2);
    // Second wait passes: no third delivery; the next message goes out instead.
    assert_eq!(seqs(&consumer.deliver_next(&stream, 5, 2 * SEC)), vec![2]);
    assert!(consumer.pending_entry(1).is_none());
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 2,
            stream_seq: 1
        }
    );
    assert_eq!(consumer.num_redelivered(), 1);
    assert!(
        consumer.still_needs(1, "s.a"),
        "unacked, kept for interest retention"
    );
    assert!(consumer.deliver_next(&stream, 5, 3 * SEC).len() == 1); // seq 2 redelivered
    assert!(consumer.deliver_next(&stream, 5, 10 * SEC).is_empty());
}

#[test]
fn max_ack_pending_stops_new_messages_but_not_redeliveries() {
    let stream = stream_with(&["s.a", "s.b", "s.c"]);
    let config = ConsumerConfig {
        max_ack_pending: 2,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, 0)), vec![1, 2]);
    assert!(consumer.deliver_next(&stream, 10, 0).is_empty());
    assert_eq!(
        consumer.num_pending(&stream),
        1,
        "the position did not skip seq 3"
    );
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, SEC)), vec![1, 2]);
    consumer.ack(1);
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, SEC)), vec![3]);
}

#[test]
fn ack_none_acknowledges_on_delivery() {
    let stream = stream_with(&["s.a", "s.b"]);
    let mut consumer = ConsumerState::new(ConsumerConfig::default(), &stream);
    consumer.deliver_next(&stream, 10, 0);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 2,
            stream_seq: 2
        }
    );
    assert_eq!(consumer.num_ack_pending(), 0);
    assert_eq!(consumer.ack(1), AckOutcome::NoAckPolicy);
    assert!(consumer.deliver_next(&stream, 10, 100 * SEC).is_empty());
}

#[test]
fn pending_message_removed_from_stream_is_dropped() {
    let mut stream = stream_with(&["s.a", "s.b", "s.c"]);
    let mut consumer = ConsumerState::new(explicit(SEC), &stream);
    consumer.deliver_next(&stream, 2, 0);
    stream.delete_msg(1).unwrap();
    consumer.on_messages_removed(&stream);
    assert_eq!(consumer.num_ack_pending(), 1);
    assert_eq!(
        consumer.ack_floor(),
        SequencePair {
            consumer_seq: 1,
            stream_seq: 1
        }
    );
    stream.purge(&Default::default()).unwrap();
    consumer.on_stream_purged(&stream);
    assert_eq!(consumer.num_ack_pending(), 0);
    assert_eq!(consumer.delivered().stream_seq, 3);
    assert_eq!(consumer.ack_floor().stream_seq, 3);
}

#[test]
fn a_batch_delivers_what_single_deliveries_would() {
    // Gaps (deleted messages), several subjects, redeliveries due, and every filter shape:
    // one batch must give the same deliveries, pending counts and state as one at a time.
    let dense = stream_with(&[
        "s.a", "s.b", "s.a", "s.c", "s.b", "s.a", "s.a", "s.c", "s.b", "s.a", "s.c", "s.a",
    ]);
    let mut gappy = dense.clone();
    for seq in [3, 8, 9] {
        gappy.delete_msg(seq).unwrap();
    }
    let configs = [
        explicit(SEC),
        ConsumerConfig {
            filter_subject: "s.a".into(),
            ..explicit(SEC)
        },
        ConsumerConfig {
            filter_subjects: vec!["s.b".into(), "s.c".into()],
            ..explicit(SEC)
        },
        ConsumerConfig {
            max_ack_pending: 4,
            ..explicit(SEC)
        },
        ConsumerConfig::default(),
    ];
    for (stream, config) in [&dense, &gappy]
        .into_iter()
        .flat_map(|stream| configs.iter().map(move |config| (stream, config.clone())))
    {
        let mut batched = ConsumerState::new(config.clone(), stream);
        // Two delivered before, due again at 2 s: the batch redelivers them first.
        batched.deliver_next(stream, 2, 0);
        let mut single = batched.clone();
        for (now, max) in [(2 * SEC, 5), (2 * SEC, 3), (2 * SEC, 20)] {
            let together = batched.deliver_next(stream, max, now);
            let mut one_by_one = Vec::new();
            for _ in 0..max {
                let next = single.deliver_next(stream, 1, now);
                if next.is_empty() {
                    break;
                }
                one_by_one.extend(next);
            }
            assert_eq!(together, one_by_one, "{config:?}");
            assert_eq!(batched.progress(stream), single.progress(stream));
            assert_eq!(batched.delivered(), single.delivered());
        }
    }
}

#[test]
fn due_exhausted_names_what_the_next_delivery_retires() {
    let stream = stream_with(&["s.a", "s.b"]);
    let config = ConsumerConfig {
        max_deliver: 2,
        ..explicit(SEC)
    };
    let mut consumer = ConsumerState::new(config, &stream);
    consumer.deliver_next(&stream, 10, 0);
    assert!(
        consumer.due_exhausted(SEC).is_empty(),
        "one delivery left each"
    );
    assert_eq!(seqs(&consumer.deliver_next(&stream, 10, SEC)), vec![1, 2]);
    consumer.ack(2);
    assert!(consumer.due_exhausted(SEC).is_empty(), "not due yet");
    assert_eq!(consumer.due_exhausted(2 * SEC), vec![(1, 2)]);
    assert!(!consumer.is_exhausted(1));
    assert!(consumer.deliver_next(&stream, 10, 2 * SEC).is_empty());
    assert!(consumer.is_exhausted(1));
    assert!(!consumer.is_exhausted(2));
    assert!(consumer.due_exhausted(3 * SEC).is_empty(), "retired once");
}
