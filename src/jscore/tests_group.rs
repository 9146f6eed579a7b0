//! Stream group: work-queue and interest retention, consumer admission, removal fan-out.

use bytes::Bytes;

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::{RetentionPolicy, StorageType, StreamConfig};
use crate::jscore::consumer::{ConsumerCommand, ConsumerOutcome};
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};
use crate::jscore::stream::{AppendOutcome, AppendRequest};

fn group(retention: RetentionPolicy) -> StreamGroup {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.storage = StorageType::Memory;
    config.retention = retention;
    StreamGroup::new(config)
}

fn publish(group: &mut StreamGroup, subject: &str) -> AppendOutcome {
    let request = AppendRequest {
        subject: subject.into(),
        headers: None,
        payload: Bytes::from_static(b"x"),
        now_nanos: 1,
    };
    match group.apply(StreamCommand::Append(request)).unwrap() {
        StreamOutcome::Appended(outcome) => outcome,
        other => panic!("unexpected {other:?}"),
    }
}

fn add_consumer(group: &mut StreamGroup, name: &str, filter: &str) -> Result<StreamOutcome, u16> {
    let config = ConsumerConfig {
        ack_policy: AckPolicy::Explicit,
        filter_subject: filter.into(),
        ..Default::default()
    };
    group
        .apply(StreamCommand::UpsertConsumer {
            name: name.into(),
            config,
            created_nanos: 1,
        })
        .map_err(|error| error.err_code)
}

fn consumer(group: &mut StreamGroup, name: &str, command: ConsumerCommand) -> Vec<u64> {
    match group
        .apply(StreamCommand::Consumer {
            name: name.into(),
            command,
        })
        .unwrap()
    {
        StreamOutcome::Consumer { removed, .. } => removed,
        other => panic!("unexpected {other:?}"),
    }
}

fn deliver(group: &mut StreamGroup, name: &str) -> Vec<u64> {
    let command = ConsumerCommand::DeliverNext {
        max_messages: 100,
        now_nanos: 0,
    };
    match group
        .apply(StreamCommand::Consumer {
            name: name.into(),
            command,
        })
        .unwrap()
    {
        StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Delivered(d),
            ..
        } => d.iter().map(|d| d.stream_seq).collect(),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn work_queue_removes_on_ack() {
    let mut group = group(RetentionPolicy::WorkQueue);
    add_consumer(&mut group, "w", "").unwrap();
    publish(&mut group, "s.a");
    publish(&mut group, "s.b");
    assert_eq!(deliver(&mut group, "w"), vec![1, 2]);
    assert_eq!(
        consumer(&mut group, "w", ConsumerCommand::Ack { stream_seq: 2 }),
        vec![2]
    );
    assert_eq!(group.stream().message_count(), 1);
    assert_eq!(
        consumer(&mut group, "w", ConsumerCommand::Term { stream_seq: 1 }),
        vec![1]
    );
    assert!(group.stream().is_empty());
    assert_eq!(group.consumer("w").unwrap().ack_floor().stream_seq, 2);
}

#[test]
fn work_queue_refuses_overlapping_consumers() {
    let mut group = group(RetentionPolicy::WorkQueue);
    add_consumer(&mut group, "a", "s.a").unwrap();
    assert_eq!(add_consumer(&mut group, "all", ""), Err(10099));
    assert_eq!(add_consumer(&mut group, "star", "s.*"), Err(10100));
    assert!(add_consumer(&mut group, "b", "s.b").is_ok());
    // Updating a consumer does not collide with itself.
    assert!(add_consumer(&mut group, "a", "s.a").is_ok());
    let ack_none = ConsumerConfig {
        filter_subject: "s.c".into(),
        ..Default::default()
    };
    let refused = group.apply(StreamCommand::UpsertConsumer {
        name: "c".into(),
        config: ack_none,
        created_nanos: 1,
    });
    assert_eq!(refused.unwrap_err().err_code, 10098);
}

#[test]
fn interest_keeps_messages_until_every_interested_consumer_acked() {
    let mut group = group(RetentionPolicy::Interest);
    // No consumers: nothing retained.
    assert_eq!(
        publish(&mut group, "s.a"),
        AppendOutcome::SkippedNoInterest { seq: 1 }
    );
    add_consumer(&mut group, "one", "").unwrap();
    add_consumer(&mut group, "two", "s.a").unwrap();
    publish(&mut group, "s.a"); // 2: both interested
    publish(&mut group, "s.b"); // 3: only "one"
    deliver(&mut group, "one");
    deliver(&mut group, "two");
    assert_eq!(
        consumer(&mut group, "one", ConsumerCommand::Ack { stream_seq: 2 }),
        Vec::<u64>::new()
    );
    assert_eq!(
        consumer(&mut group, "one", ConsumerCommand::Ack { stream_seq: 3 }),
        vec![3]
    );
    assert_eq!(
        consumer(&mut group, "two", ConsumerCommand::Ack { stream_seq: 2 }),
        vec![2]
    );
    assert!(group.stream().is_empty());
}

#[test]
fn interest_deleting_a_consumer_releases_its_messages() {
    let mut group = group(RetentionPolicy::Interest);
    add_consumer(&mut group, "one", "").unwrap();
    add_consumer(&mut group, "two", "").unwrap();
    publish(&mut group, "s.a");
    publish(&mut group, "s.b");
    deliver(&mut group, "one");
    consumer(&mut group, "one", ConsumerCommand::Ack { stream_seq: 1 });
    assert_eq!(group.stream().message_count(), 2);
    group
        .apply(StreamCommand::DeleteConsumer { name: "two".into() })
        .unwrap();
    assert_eq!(
        group.stream().message_count(),
        1,
        "seq 2 still needed by one"
    );
    group
        .apply(StreamCommand::DeleteConsumer { name: "one".into() })
        .unwrap();
    assert!(group.stream().is_empty());
    let missing = group.apply(StreamCommand::DeleteConsumer { name: "one".into() });
    assert_eq!(missing.unwrap_err().err_code, 10014);
}

#[test]
fn limits_retention_ignores_acks_and_removals_reach_consumers() {
    let mut group = group(RetentionPolicy::Limits);
    add_consumer(&mut group, "c", "").unwrap();
    publish(&mut group, "s.a");
    publish(&mut group, "s.b");
    deliver(&mut group, "c");
    assert!(consumer(&mut group, "c", ConsumerCommand::Ack { stream_seq: 1 }).is_empty());
    assert_eq!(group.stream().message_count(), 2);
    group.apply(StreamCommand::DeleteMsg { seq: 2 }).unwrap();
    assert_eq!(group.consumer("c").unwrap().num_ack_pending(), 0);
}

fn reset(group: &mut StreamGroup, name: &str, seq: u64) -> (u64, Vec<u64>) {
    let command = ConsumerCommand::Reset { seq };
    match group
        .apply(StreamCommand::Consumer {
            name: name.into(),
            command,
        })
        .unwrap()
    {
        StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Reset { reset_seq },
            removed,
        } => (reset_seq, removed),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn work_queue_reset_forward_removes_the_skipped_messages() {
    let mut group = group(RetentionPolicy::WorkQueue);
    add_consumer(&mut group, "a", "s.a").unwrap();
    for subject in ["s.a", "s.b", "s.a", "s.a", "s.a", "s.a"] {
        publish(&mut group, subject);
    }
    assert_eq!(deliver(&mut group, "a"), vec![1, 3, 4, 5, 6]);
    consumer(&mut group, "a", ConsumerCommand::Ack { stream_seq: 1 });
    assert_eq!(group.stream().message_count(), 5);
    // Forward to 5: the pending 3 and 4 are skipped and go; 2 is not this consumer's.
    assert_eq!(reset(&mut group, "a", 5), (5, vec![3, 4]));
    assert_eq!(group.stream().message_count(), 3);
    assert!(group.stream().contains(2));
    assert_eq!(deliver(&mut group, "a"), vec![5, 6]);
    // Backwards: nothing removed comes back, and nothing else goes.
    assert_eq!(reset(&mut group, "a", 1), (1, vec![]));
    assert_eq!(group.stream().message_count(), 3);
    assert_eq!(deliver(&mut group, "a"), vec![5, 6]);
    // Back to the floor (4: below the pending 5): nothing to release either, and 5 and 6
    // come again.
    assert_eq!(reset(&mut group, "a", 0), (5, vec![]));
    assert_eq!(group.stream().message_count(), 3);
    assert_eq!(deliver(&mut group, "a"), vec![5, 6]);
}

#[test]
fn interest_reset_forward_keeps_what_another_consumer_still_needs() {
    let mut group = group(RetentionPolicy::Interest);
    add_consumer(&mut group, "one", "").unwrap();
    add_consumer(&mut group, "two", "s.a").unwrap();
    publish(&mut group, "s.a"); // 1: both
    publish(&mut group, "s.b"); // 2: only "one"
    publish(&mut group, "s.a"); // 3: both
    deliver(&mut group, "two");
    consumer(&mut group, "two", ConsumerCommand::Ack { stream_seq: 3 });
    // "one" skips everything: 2 was only its own; 1 still waits for "two".
    let (start, removed) = reset(&mut group, "one", 4);
    assert_eq!((start, removed), (4, vec![2, 3]));
    assert_eq!(group.stream().message_count(), 1);
    assert!(group.stream().contains(1));
    consumer(&mut group, "two", ConsumerCommand::Ack { stream_seq: 1 });
    assert!(group.stream().is_empty());
}

fn member(subject: &str, headers: Option<&'static str>) -> AppendRequest {
    AppendRequest {
        subject: subject.into(),
        headers: headers.map(|block| Bytes::from_static(block.as_bytes())),
        payload: Bytes::from_static(b"x"),
        now_nanos: 1,
    }
}

#[test]
fn an_atomic_batch_is_stored_whole_or_not_at_all() {
    let mut group = group(RetentionPolicy::Limits);
    publish(&mut group, "s.x");
    let batch = vec![
        member("s.a", None),
        member("s.b", None),
        member("s.c", None),
    ];
    match group.apply(StreamCommand::AppendBatch(batch)).unwrap() {
        StreamOutcome::BatchAppended(outcomes) => {
            let seqs: Vec<u64> = outcomes.iter().map(AppendOutcome::seq).collect();
            assert_eq!(seqs, vec![2, 3, 4]);
        }
        other => panic!("unexpected {other:?}"),
    }
    // The last member expects a sequence it will not see: nothing of the batch is stored.
    let before = group.clone();
    let refused = vec![
        member("s.a", None),
        member(
            "s.b",
            Some("NATS/1.0\r\nNats-Expected-Last-Sequence: 4\r\n\r\n"),
        ),
    ];
    let error = group
        .apply(StreamCommand::AppendBatch(refused))
        .unwrap_err();
    assert_eq!(error.err_code, 10071);
    assert_eq!(group, before);
}
