//! Golden bytes of the stream group's formats: a sample of every command kind and every
//! response kind, encoded and compared with bytes committed here. A failure means a format
//! changed — old logs and responses from older replicas would no longer decode the same. Do
//! not update a constant to make a test pass: add a new kind or version instead.
//!
//! One exception: configs travel as JSON text (`UpdateStream`, `UpsertConsumer`), so a field
//! added to `StreamConfig` or `ConsumerConfig` changes their encoded bytes without breaking
//! old logs. Then `golden_commands_decode_from_their_bytes_alone` must still pass with the
//! old bytes before the new ones are written down.

use bytes::Bytes;

use super::entry::{
    decode_command, encode_command, STREAM_APPEND_BATCH_V1, STREAM_APPEND_V1, STREAM_COMMAND_V1,
};
use super::response::{decode_response, encode_response};
use crate::consensus::Command;
use crate::jetstream::payload::META_COMMAND_V1;
use crate::jsapi::consumer_config::ConsumerConfig;
use crate::jsapi::stream_config::StreamConfig;
use crate::jsapi::{ApiError, ErrorKind};
use crate::jscore::consumer::{AckOutcome, ConsumerCommand, ConsumerOutcome, Delivery};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::jscore::sourcing::{SourceKind, SourcedMessage};
use crate::jscore::stream::{AppendOutcome, AppendRequest, Produced, PurgeRequest};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn consumer(command: ConsumerCommand) -> StreamCommand {
    StreamCommand::Consumer {
        name: "d".into(),
        command,
    }
}

/// One sample per command kind and variant, with the bytes the entry codec writes for it.
fn command_samples() -> Vec<(StreamCommand, u16, &'static str)> {
    let mut stream_config = StreamConfig::new("S", &["s.>"]);
    stream_config.max_msgs = 10;
    let consumer_config = ConsumerConfig {
        durable_name: "d".into(),
        ..Default::default()
    };
    vec![
        (
            StreamCommand::Append(AppendRequest {
                subject: "s.a".into(),
                headers: Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")),
                payload: Bytes::from_static(b"hi"),
                now_nanos: 5,
            }),
            STREAM_APPEND_V1,
            "050000000000000003000000732e610c0000004e4154532f312e300d0a0d0a6869",
        ),
        (
            StreamCommand::Append(AppendRequest {
                subject: "s.b".into(),
                headers: None,
                payload: Bytes::from_static(b""),
                now_nanos: -1,
            }),
            STREAM_APPEND_V1,
            "ffffffffffffffff03000000732e62ffffffff",
        ),
        (
            StreamCommand::Purge(PurgeRequest {
                filter: Some("s.a".into()),
                seq: 3,
                keep: 1,
            }),
            STREAM_COMMAND_V1,
            "010103732e610301",
        ),
        (StreamCommand::DeleteMsg { seq: 300 }, STREAM_COMMAND_V1, "02ac02"),
        (
            StreamCommand::Expire { now_nanos: -2 },
            STREAM_COMMAND_V1,
            "0303",
        ),
        (
            StreamCommand::UpdateStream {
                config: stream_config,
                now_nanos: 1,
            },
            STREAM_COMMAND_V1,
            "04f4027b226e616d65223a2253222c227375626a65637473223a5b22732e3e225d2c22726574656e74696f6e223a226c696d697473222c226d61785f636f6e73756d657273223a302c226d61785f6d736773223a31302c226d61785f6279746573223a302c226d61785f616765223a302c226d61785f6d7367735f7065725f7375626a656374223a302c2264697363617264223a226f6c64222c2273746f72616765223a2266696c65222c226e756d5f7265706c69636173223a302c22636f6d7072657373696f6e223a226e6f6e65222c22616c6c6f775f646972656374223a66616c73652c226d6972726f725f646972656374223a66616c73652c227365616c6564223a66616c73652c2264656e795f64656c657465223a66616c73652c2264656e795f7075726765223a66616c73652c22616c6c6f775f726f6c6c75705f68647273223a66616c73652c22636f6e73756d65725f6c696d697473223a7b7d2c22616c6c6f775f6d73675f74746c223a66616c73657d02",
        ),
        (
            StreamCommand::UpsertConsumer {
                name: "d".into(),
                config: consumer_config,
                created_nanos: 7,
            },
            STREAM_COMMAND_V1,
            "0501647e7b2264757261626c655f6e616d65223a2264222c2264656c697665725f706f6c696379223a22616c6c222c2261636b5f706f6c696379223a226e6f6e65222c227265706c61795f706f6c696379223a22696e7374616e74222c226e756d5f7265706c69636173223a302c226a6574726166745f63726561746564223a377d",
        ),
        (
            StreamCommand::DeleteConsumer { name: "d".into() },
            STREAM_COMMAND_V1,
            "060164",
        ),
        (
            consumer(ConsumerCommand::DeliverNext {
                max_messages: 200,
                now_nanos: 2,
            }),
            STREAM_COMMAND_V1,
            "07016400c80104",
        ),
        (
            consumer(ConsumerCommand::Ack { stream_seq: 1 }),
            STREAM_COMMAND_V1,
            "0701640101",
        ),
        (
            consumer(ConsumerCommand::AckAll { stream_seq: 2 }),
            STREAM_COMMAND_V1,
            "0701640202",
        ),
        (
            consumer(ConsumerCommand::Nak {
                stream_seq: 3,
                delay_nanos: Some(4),
                now_nanos: 5,
            }),
            STREAM_COMMAND_V1,
            "070164030301080a",
        ),
        (
            consumer(ConsumerCommand::Term { stream_seq: 6 }),
            STREAM_COMMAND_V1,
            "0701640406",
        ),
        (
            consumer(ConsumerCommand::InProgress {
                stream_seq: 7,
                now_nanos: 8,
            }),
            STREAM_COMMAND_V1,
            "070164050710",
        ),
        (
            consumer(ConsumerCommand::Reset { seq: 8 }),
            STREAM_COMMAND_V1,
            "0701640608",
        ),
        (
            StreamCommand::Sourced(SourcedMessage {
                source: "o".into(),
                kind: SourceKind::Source,
                origin_seq: 3,
                expected_position: 2,
                subject: "s".into(),
                headers: None,
                payload: Bytes::from_static(b"p"),
                ts_nanos: 4,
            }),
            STREAM_COMMAND_V1,
            "08016f010302017300017008",
        ),
        (
            StreamCommand::AppendBatch(vec![
                AppendRequest {
                    subject: "s.a".into(),
                    headers: Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")),
                    payload: Bytes::from_static(b"hi"),
                    now_nanos: 5,
                },
                AppendRequest {
                    subject: "s.b".into(),
                    headers: None,
                    payload: Bytes::from_static(b""),
                    now_nanos: 5,
                },
            ]),
            STREAM_APPEND_BATCH_V1,
            "0200000021000000050000000000000003000000732e610c0000004e4154532f312e300d0a0d0a686913000000050000000000000003000000732e62ffffffff",
        ),
    ]
}

/// One sample per response kind, with the bytes the response codec writes for it.
fn response_samples() -> Vec<(Result<StreamOutcome, ApiError>, &'static str)> {
    vec![
        (
            Ok(StreamOutcome::Appended(AppendOutcome::Stored {
                seq: 1,
                removed: vec![],
            })),
            "0000000100",
        ),
        (
            Ok(StreamOutcome::Appended(AppendOutcome::Duplicate { seq: 2 })),
            "00000102",
        ),
        (
            Ok(StreamOutcome::Appended(AppendOutcome::SkippedNoInterest {
                seq: 3,
            })),
            "00000203",
        ),
        (Ok(StreamOutcome::Purged { count: 4 }), "000104"),
        (
            Ok(StreamOutcome::Removed { seqs: vec![5, 6] }),
            "0002020506",
        ),
        (
            Ok(StreamOutcome::ConsumerUpserted { created: true }),
            "000301",
        ),
        (Ok(StreamOutcome::ConsumerDeleted), "0004"),
        (
            Ok(StreamOutcome::Appended(AppendOutcome::StoredRepublished {
                seq: 7,
                removed: vec![1],
                last_subject_seq: 5,
            })),
            "00000307010105",
        ),
        (Ok(StreamOutcome::SourceSkipped { position: 9 }), "000609"),
        (
            Ok(StreamOutcome::Appended(AppendOutcome::Counted {
                stored: Box::new(AppendOutcome::Stored {
                    seq: 4,
                    removed: vec![],
                }),
                val: "-1".into(),
                headers: bytes::Bytes::from_static(b"H"),
            })),
            "000004000400022d310148",
        ),
        (
            Ok(StreamOutcome::BatchAppended(vec![
                AppendOutcome::Stored {
                    seq: 7,
                    removed: vec![],
                },
                AppendOutcome::SkippedNoInterest { seq: 8 },
            ])),
            "0008020007000208",
        ),
        (
            Ok(StreamOutcome::Expired {
                removed: vec![1, 2],
                markers: vec![3],
            }),
            "00070201020103",
        ),
        (
            Ok(StreamOutcome::Scheduled {
                removed: vec![1],
                markers: vec![],
                produced: vec![Produced {
                    seq: 2,
                    headers: b"H".to_vec(),
                    payload: b"p".to_vec(),
                }],
            }),
            "0009010100010201480170",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Delivered(vec![Delivery {
                    stream_seq: 7,
                    consumer_seq: 1,
                    deliveries: 1,
                    pending_count: 0,
                }]),
                removed: vec![],
            }),
            "000500010701010000",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(AckOutcome::Acked {
                    stream_seqs: vec![7],
                }),
                removed: vec![7],
            }),
            "0005010001070107",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(AckOutcome::NotPending),
                removed: vec![],
            }),
            "0005010100",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(AckOutcome::BeyondDelivered),
                removed: vec![],
            }),
            "0005010200",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(AckOutcome::Rescheduled {
                    redeliver_at_nanos: 9,
                }),
                removed: vec![],
            }),
            "000501031200",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Ack(AckOutcome::NoAckPolicy),
                removed: vec![],
            }),
            "0005010400",
        ),
        (
            Ok(StreamOutcome::Consumer {
                outcome: ConsumerOutcome::Reset { reset_seq: 8 },
                removed: vec![1],
            }),
            "000502080101",
        ),
        (
            Err(ApiError::new(ErrorKind::StreamNotFound)),
            "019403cb4e1073747265616d206e6f7420666f756e64",
        ),
    ]
}

#[test]
fn command_kinds_keep_their_numbers() {
    // Kinds are one namespace with the meta group's (see `jetstream::payload`).
    assert_eq!(STREAM_COMMAND_V1, 1);
    assert_eq!(META_COMMAND_V1, 2);
    assert_eq!(STREAM_APPEND_V1, 3);
    assert_eq!(STREAM_APPEND_BATCH_V1, 4);
}

#[test]
fn every_command_kind_encodes_to_its_golden_bytes_and_back() {
    let mut mismatches = Vec::new();
    for (command, kind, golden) in command_samples() {
        let encoded = encode_command(command.clone());
        assert_eq!(encoded.kind, kind, "{command:?}");
        if hex(&encoded.payload) != golden {
            mismatches.push(format!("{command:?}\n  {}", hex(&encoded.payload)));
        }
        assert_eq!(decode_command(&encoded).unwrap(), command);
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn every_response_kind_encodes_to_its_golden_bytes_and_back() {
    let mut mismatches = Vec::new();
    for (outcome, golden) in response_samples() {
        let encoded = encode_response(&outcome);
        if hex(&encoded.payload) != golden {
            mismatches.push(format!("{outcome:?}\n  {}", hex(&encoded.payload)));
        }
        let decoded = decode_response(&encoded).unwrap();
        assert_eq!(decoded, outcome);
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

#[test]
fn golden_commands_decode_from_their_bytes_alone() {
    // The other direction: what an old log holds decodes to the same command.
    for (command, kind, golden) in command_samples() {
        let bytes: Vec<u8> = (0..golden.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(&golden[at..at + 2], 16).unwrap())
            .collect();
        let stored = Command::new(kind, bytes);
        assert_eq!(decode_command(&stored).unwrap(), command);
    }
}
