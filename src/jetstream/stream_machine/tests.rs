//! `StreamMachine` under a real single-voter `RaftGroup` (write-ahead log + sled in a temp
//! dir): commands proposed through `StreamHandle` come back with their outcomes, and a
//! restarted group (storage reopened, fresh machine) holds exactly the same state.

use std::sync::Arc;

use bytes::Bytes;

use crate::consensus::group::{Bootstrap, GroupStart};
use crate::consensus::pacer::Pacer;
use crate::consensus::{GroupOptions, NoPeers, NodeStorage, RaftGroup};
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::consumer::{AckOutcome, ConsumerCommand, ConsumerOutcome, SequencePair};
use crate::jscore::group::{StreamCommand, StreamGroup, StreamOutcome};
use crate::jscore::stream::{AppendOutcome, AppendRequest, PurgeRequest};
use crate::store::log::LogOptions;

use super::StreamMachine;

const GROUP: u64 = 42;

fn config() -> StreamConfig {
    StreamConfig::new("ORDERS", &["orders.>"])
}

async fn start(storage: &NodeStorage) -> StreamHandle {
    let (machine, view) = StreamMachine::new(config(), Default::default());
    let group = RaftGroup::start(GroupStart {
        group: GROUP,
        node: 1,
        voters: RaftGroup::single_voter(1, "127.0.0.1:0"),
        storage: storage.clone(),
        transport: Arc::new(NoPeers),
        machine: Box::new(machine),
        bootstrap: Bootstrap::EveryVoter,
        options: GroupOptions::default(),
        pacer: Pacer::start(1),
    })
    .await
    .expect("start stream group");
    StreamHandle::new("ORDERS".into(), Arc::new(group), view)
}

fn open_storage(dir: &std::path::Path) -> NodeStorage {
    NodeStorage::open(dir, LogOptions::default())
        .expect("open storage")
        .0
}

fn append(subject: &str, payload: &str, now_nanos: i64) -> StreamCommand {
    StreamCommand::Append(AppendRequest {
        subject: subject.into(),
        headers: None,
        payload: Bytes::from(payload.to_string()),
        now_nanos,
    })
}

fn consumer(command: ConsumerCommand) -> StreamCommand {
    StreamCommand::Consumer {
        name: "worker".into(),
        command,
    }
}

fn acked(outcome: StreamOutcome) -> AckOutcome {
    match outcome {
        StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Ack(ack),
            ..
        } => ack,
        other => panic!("expected an ack outcome, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_come_back_and_a_restart_restores_the_state() {
    let dir = tempfile::tempdir().unwrap();
    let before: StreamGroup;
    {
        let storage = open_storage(dir.path());
        let stream = start(&storage).await;

        // Five publishes in one entry get consecutive sequences.
        let publishes = (1..=5)
            .map(|i| {
                append(
                    ["orders.new", "orders.old"][i % 2],
                    &format!("order {i}"),
                    i as i64,
                )
            })
            .collect();
        let outcomes = stream.propose(publishes).await.unwrap();
        let seqs: Vec<u64> = outcomes
            .into_iter()
            .map(|outcome| match outcome.unwrap() {
                StreamOutcome::Appended(AppendOutcome::Stored { seq, .. }) => seq,
                other => panic!("expected a stored message, got {other:?}"),
            })
            .collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);

        let config = ConsumerConfig {
            durable_name: "worker".into(),
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        };
        let created = stream
            .propose_one(StreamCommand::UpsertConsumer {
                name: "worker".into(),
                config,
                created_nanos: 1,
            })
            .await
            .unwrap();
        assert_eq!(created, StreamOutcome::ConsumerUpserted { created: true });

        let delivered = stream
            .propose_one(consumer(ConsumerCommand::DeliverNext {
                max_messages: 3,
                now_nanos: 10,
            }))
            .await
            .unwrap();
        let StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Delivered(deliveries),
            ..
        } = delivered
        else {
            panic!("expected deliveries, got {delivered:?}");
        };
        let delivered: Vec<u64> = deliveries.iter().map(|d| d.stream_seq).collect();
        assert_eq!(delivered, vec![1, 2, 3]);

        let outcomes = stream
            .propose(vec![
                consumer(ConsumerCommand::Ack { stream_seq: 1 }),
                consumer(ConsumerCommand::Ack { stream_seq: 3 }),
            ])
            .await
            .unwrap();
        for (outcome, seq) in outcomes.into_iter().zip([1, 3]) {
            assert_eq!(
                acked(outcome.unwrap()),
                AckOutcome::Acked {
                    stream_seqs: vec![seq]
                }
            );
        }

        // A purge of one subject keeps the rest; a refused command answers its API error.
        let purged = stream
            .propose_one(StreamCommand::Purge(PurgeRequest {
                filter: Some("orders.old".into()),
                seq: 0,
                keep: 1,
            }))
            .await
            .unwrap();
        assert_eq!(purged, StreamOutcome::Purged { count: 2 });
        let missing = stream
            .propose_one(StreamCommand::DeleteConsumer {
                name: "nobody".into(),
            })
            .await;
        assert!(missing.is_err(), "deleting an unknown consumer is refused");

        before = stream.view().read(StreamGroup::clone);
        let consumer_state = before.consumer("worker").unwrap();
        assert_eq!(
            consumer_state.ack_floor(),
            SequencePair {
                consumer_seq: 1,
                stream_seq: 1
            }
        );
        assert!(consumer_state.pending_entry(2).is_some());
        assert_eq!(before.stream().message_count(), 3);
        assert!(
            *stream.view().applied().borrow() > 0,
            "applies are signalled"
        );
        stream.group().shutdown().await.unwrap();
    }

    // Reopen the log and sled from the same directory, with a fresh machine.
    let storage = open_storage(dir.path());
    let stream = start(&storage).await;
    let after = stream.view().read(StreamGroup::clone);
    assert_eq!(after, before, "the restarted group holds the same state");
    let msg = stream.view().message(2).unwrap();
    assert_eq!(
        (msg.subject.as_str(), &msg.payload[..]),
        ("orders.new", &b"order 2"[..])
    );

    // It carries on from there: the ack floor moves over 2 and 3, sequences continue.
    let outcome = stream
        .propose_one(consumer(ConsumerCommand::Ack { stream_seq: 2 }))
        .await
        .unwrap();
    assert_eq!(
        acked(outcome),
        AckOutcome::Acked {
            stream_seqs: vec![2]
        }
    );
    let floor = stream
        .view()
        .read(|group| group.consumer("worker").unwrap().ack_floor());
    assert_eq!(
        floor,
        SequencePair {
            consumer_seq: 3,
            stream_seq: 3
        }
    );
    let appended = stream
        .propose_one(append("orders.new", "late", 20))
        .await
        .unwrap();
    assert_eq!(
        appended,
        StreamOutcome::Appended(AppendOutcome::Stored {
            seq: 6,
            removed: vec![]
        })
    );
    stream.group().shutdown().await.unwrap();
}
