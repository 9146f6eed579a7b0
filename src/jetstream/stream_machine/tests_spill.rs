//! A file stream's metadata out of memory (ADR 0033) through the whole machine: applied,
//! reloaded, and compared with a group that keeps everything in memory.

use bytes::Bytes;

use super::tests_load::{encode, Harness};
use crate::consensus::Command;
use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig, DeliverPolicy};
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::{StreamCommand, StreamGroup};
use crate::jscore::stream::{AppendRequest, PurgeRequest};
use crate::jscore::xorshift::XorShift;

/// A file stream of a dozen metadata chunks keeps most of them in its spill (ADR 0033):
/// appends, limits at the head, interior deletes, a filtered purge and a consumer's
/// deliveries and acks answer as a group that keeps everything in memory, and a reload
/// restores the same state. Nothing of the spill is left among the stream's files.
#[test]
fn a_file_stream_answers_the_same_with_its_metadata_out_of_memory() {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.max_msgs = 9_000;
    let mut harness = Harness::new(config.clone());
    let mut model = StreamGroup::new(config);
    let mut random = XorShift(4242);
    let mut now = 1_000_000_000i64;
    let consumer = |command| StreamCommand::Consumer {
        name: "c".into(),
        command,
    };
    let mut steps = vec![StreamCommand::UpsertConsumer {
        config: ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            deliver_policy: DeliverPolicy::All,
            filter_subject: "s.3".into(),
            ack_wait: 1_000_000_000_000,
            ..Default::default()
        },
        created_nanos: 1,
        name: "c".into(),
    }];
    for step in 0..70u64 {
        for _ in 0..200 {
            now += 1 + random.below(70_000_000) as i64;
            let subject = format!("s.{}", random.below(10));
            steps.push(StreamCommand::Append(AppendRequest {
                subject,
                headers: None,
                payload: Bytes::from(vec![b'p'; random.below(300) as usize]),
                now_nanos: now,
            }));
        }
        let last = model.stream().last_seq().max(1);
        match step % 7 {
            // Interior deletes anywhere: chunks away come back to be changed.
            1 | 4 => {
                for _ in 0..20 {
                    let seq = 1 + random.below(last);
                    steps.push(StreamCommand::DeleteMsg { seq });
                }
            }
            2 => steps.push(StreamCommand::Purge(PurgeRequest {
                filter: Some(format!("s.{}", random.below(10))),
                seq: 1 + random.below(last),
                keep: 0,
            })),
            _ => {}
        }
        steps.push(consumer(ConsumerCommand::DeliverNext {
            max_messages: 30,
            now_nanos: now,
        }));
        for _ in 0..10 {
            let seq = 1 + random.below(last);
            steps.push(consumer(ConsumerCommand::Ack { stream_seq: seq }));
        }
        let commands: Vec<Command> = steps.iter().cloned().map(encode).collect();
        let expected: Vec<_> = steps
            .drain(..)
            .map(|command| model.apply(command))
            .collect();
        assert_eq!(harness.apply(&commands), expected, "step {step}");
        if step % 10 == 9 {
            let state = harness.state();
            assert_eq!(state, model, "step {step}: follows the model");
            assert_eq!(harness.reloaded(), state, "step {step}: load restores it");
        }
    }
    assert!(model.stream().message_count() > 8_000);
    harness.check_reload("the end");
    let names: Vec<String> = std::fs::read_dir(harness.view.files_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .all(|name| name.ends_with(".seg") || name.ends_with(".sum")),
        "{names:?}"
    );
}
