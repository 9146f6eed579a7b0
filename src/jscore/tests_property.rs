//! Property-style test: random interleavings of publishes, deliveries, acks, naks, terms,
//! deletes and expiry (seeded xorshift, no extra crates) keep the invariants that ConsumerInfo
//! and retention rely on.

use bytes::Bytes;

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::{RetentionPolicy, StorageType, StreamConfig};
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::{StreamCommand, StreamGroup};
use crate::jscore::stream::AppendRequest;
use crate::jscore::xorshift::XorShift;

fn check_invariants(group: &StreamGroup, context: &str) {
    let stream = group.stream();
    let summary = stream.summary();
    assert!(
        summary.messages <= summary.last_seq.saturating_sub(summary.first_seq) + 1
            || summary.messages == 0,
        "{context}"
    );
    let counted: u64 = stream.subject_counts(&Default::default()).values().sum();
    assert_eq!(
        counted, summary.messages,
        "subject index agrees with messages: {context}"
    );
    let bytes: u64 = (summary.first_seq..=summary.last_seq)
        .filter_map(|seq| stream.get(seq))
        .map(|msg| msg.stored_size)
        .sum();
    assert_eq!(bytes, summary.bytes, "byte accounting: {context}");
    if let Some(max) = stream.limits().max_msgs {
        assert!(summary.messages <= max, "{context}");
    }
    for name in group.consumer_names() {
        let consumer = group.consumer(name).unwrap();
        let progress = consumer.progress(stream);
        assert!(
            progress.ack_floor.stream_seq <= progress.delivered.stream_seq,
            "{name}: {context}"
        );
        assert!(
            progress.ack_floor.consumer_seq <= progress.delivered.consumer_seq,
            "{name}: {context}"
        );
        if let Some(max) = consumer.policy().max_ack_pending {
            assert!(
                progress.num_ack_pending <= max,
                "{name}: max_ack_pending: {context}"
            );
        }
        if let Some((lowest, _)) = consumer_pending_lowest(consumer) {
            assert!(
                lowest > progress.ack_floor.stream_seq,
                "{name}: floor below pending: {context}"
            );
            assert!(
                stream.contains(lowest),
                "{name}: pending message exists: {context}"
            );
        }
    }
}

fn consumer_pending_lowest(consumer: &crate::jscore::consumer::ConsumerState) -> Option<(u64, ())> {
    (consumer.ack_floor().stream_seq + 1..=consumer.delivered().stream_seq)
        .find(|seq| consumer.pending_entry(*seq).is_some())
        .map(|seq| (seq, ()))
}

fn run(seed: u64, retention: RetentionPolicy) {
    let mut random = XorShift(seed);
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.storage = StorageType::Memory;
    config.retention = retention;
    config.max_msgs = 40;
    let mut group = StreamGroup::new(config);
    let consumers = [("a", "s.a"), ("b", "s.b"), ("all", "")];
    for (name, filter) in consumers {
        if retention == RetentionPolicy::WorkQueue && filter.is_empty() {
            continue;
        }
        let config = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ack_wait: 5,
            max_deliver: 4,
            max_ack_pending: 8,
            filter_subject: filter.into(),
            ..Default::default()
        };
        group
            .apply(StreamCommand::UpsertConsumer {
                name: name.into(),
                config,
                created_nanos: 1,
            })
            .unwrap();
    }
    let names: Vec<String> = group.consumer_names().map(str::to_string).collect();
    let mut now = 0i64;
    let mut previous_floors = vec![0u64; names.len()];
    for step in 0..2000 {
        now += random.below(3) as i64;
        let name = names[random.below(names.len() as u64) as usize].clone();
        let delivered = group.consumer(&name).unwrap().delivered().stream_seq.max(1);
        let seq = 1 + random.below(delivered + 1);
        let command = match random.below(10) {
            0..=2 => {
                let subject = ["s.a", "s.b", "s.c"][random.below(3) as usize];
                StreamCommand::Append(AppendRequest {
                    subject: subject.into(),
                    headers: None,
                    payload: Bytes::from_static(b"payload"),
                    now_nanos: now,
                })
            }
            3 | 4 => StreamCommand::Consumer {
                name: name.clone(),
                command: ConsumerCommand::DeliverNext {
                    max_messages: 1 + random.below(4) as usize,
                    now_nanos: now,
                },
            },
            5 | 6 => StreamCommand::Consumer {
                name: name.clone(),
                command: ConsumerCommand::Ack { stream_seq: seq },
            },
            7 => StreamCommand::Consumer {
                name: name.clone(),
                command: ConsumerCommand::Nak {
                    stream_seq: seq,
                    delay_nanos: Some(random.below(4) as i64),
                    now_nanos: now,
                },
            },
            8 => StreamCommand::Consumer {
                name: name.clone(),
                command: ConsumerCommand::Term { stream_seq: seq },
            },
            _ => StreamCommand::DeleteMsg { seq },
        };
        let context = format!("seed {seed} step {step} {command:?}");
        let _ = group.apply(command);
        check_invariants(&group, &context);
        for (index, name) in names.iter().enumerate() {
            let floor = group.consumer(name).unwrap().ack_floor().stream_seq;
            assert!(
                floor >= previous_floors[index],
                "ack floor went backwards: {context}"
            );
            previous_floors[index] = floor;
        }
    }
}

#[test]
fn random_operations_keep_invariants() {
    for seed in 1..=8u64 {
        for retention in [
            RetentionPolicy::Limits,
            RetentionPolicy::WorkQueue,
            RetentionPolicy::Interest,
        ] {
            run(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), retention);
        }
    }
}

#[test]
fn replicas_applying_the_same_commands_agree() {
    // Determinism: two replicas fed the same random log end in the same observable state.
    let build = || {
        let mut config = StreamConfig::new("S", &["s.>"]);
        config.storage = StorageType::Memory;
        config.retention = RetentionPolicy::Interest;
        let mut group = StreamGroup::new(config);
        let consumer = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ack_wait: 3,
            ..Default::default()
        };
        group
            .apply(StreamCommand::UpsertConsumer {
                name: "c".into(),
                config: consumer,
                created_nanos: 1,
            })
            .unwrap();
        group
    };
    let (mut first, mut second) = (build(), build());
    let mut random = XorShift(42);
    for step in 0..500i64 {
        let command = match random.below(3) {
            0 => StreamCommand::Append(AppendRequest {
                subject: "s.x".into(),
                headers: None,
                payload: Bytes::from_static(b"p"),
                now_nanos: step,
            }),
            1 => StreamCommand::Consumer {
                name: "c".into(),
                command: ConsumerCommand::DeliverNext {
                    max_messages: 2,
                    now_nanos: step,
                },
            },
            _ => StreamCommand::Consumer {
                name: "c".into(),
                command: ConsumerCommand::Ack {
                    stream_seq: 1 + random.below(step as u64 + 1),
                },
            },
        };
        assert_eq!(first.apply(command.clone()), second.apply(command));
    }
    assert_eq!(first.stream().summary(), second.stream().summary());
    assert_eq!(
        first.consumer("c").unwrap().progress(first.stream()),
        second.consumer("c").unwrap().progress(second.stream())
    );
}
