//! `kill -9` of real jetraft processes: every acknowledged message, the stream's sequence, the
//! consumer's ack floor and both creation times survive the restart, and the nodes go on from
//! where they were; memory streams restart empty. Each scenario runs on one node (R1) and on
//! a three-node cluster with three replicas, restarted whole (R3).

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::jetstream::publish_acked;
use common::process_fixture::ProcessFixture;
use common::within;
use futures::StreamExt;

on_r1_and_r3!(memory_streams_skip_fsync_and_restart_empty);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_acknowledged_r1() {
    kill_9_loses_nothing_acknowledged(ProcessFixture::start(Topology::R1)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_acknowledged_r3() {
    let fixture = tokio::task::block_in_place(|| ProcessFixture::start(Topology::R3));
    kill_9_loses_nothing_acknowledged(fixture).await;
}

async fn kill_9_loses_nothing_acknowledged(mut fx: ProcessFixture) {
    let js = fx.js().await;
    within(
        "stream create",
        js.create_stream(fx.replicated(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.*".into()],
            ..Default::default()
        })),
    )
    .await
    .unwrap();
    // Publishes, pulls and acks go through the leader's node: a process cannot be asked
    // whether the leader's interest reached the others yet.
    let js = fx.js_at_leader_of("ORDERS").await;
    let stream = js.get_stream("ORDERS").await.unwrap();
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("order-processor".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    let mut before = stream.clone();
    let stream_created = before.info().await.unwrap().created;
    let consumer_created = consumer.clone().info().await.unwrap().created;

    // Publish with many acks in flight; keep only what was acknowledged.
    let mut pending = Vec::new();
    for i in 0..500 {
        pending.push(
            js.publish("orders.new", format!("order {i}").into())
                .await
                .unwrap(),
        );
    }
    let mut acked = Vec::new();
    for ack in pending {
        acked.push(ack.await.unwrap().sequence);
    }
    assert_eq!(acked, (1..=500).collect::<Vec<_>>());

    // Consume and ack the first 200 (acks confirmed by the server: double ack).
    let mut messages = consumer.fetch().max_messages(200).messages().await.unwrap();
    let mut consumed = 0;
    while let Some(msg) = within("fetched message", messages.next()).await {
        msg.unwrap().double_ack().await.unwrap();
        consumed += 1;
    }
    assert_eq!(consumed, 200);
    fx.kill_all_and_restart();

    let js = fx.js_at_leader_of("ORDERS").await;
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.created, stream_created, "stream created survives");
    assert_eq!(info.state.messages, 500);
    assert_eq!(info.state.last_sequence, 500);
    let msg = stream.get_raw_message(500).await.unwrap();
    assert_eq!(&msg.payload[..], b"order 499");

    let mut consumer: jetstream::consumer::PullConsumer =
        stream.get_consumer("order-processor").await.unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!(info.created, consumer_created, "consumer created survives");
    assert_eq!(info.ack_floor.stream_sequence, 200);
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.num_pending, 300);

    // Delivery resumes right after the ack floor, and publishing continues the sequence.
    let mut next = consumer.fetch().max_messages(1).messages().await.unwrap();
    let first = within("first after restart", next.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&first.payload[..], b"order 200");
    first.double_ack().await.unwrap();
    assert_eq!(
        publish_acked(&js, "orders.new", "after").await.sequence,
        501
    );
}

/// `storage: memory` as a clustered nats-server: PubAcks do not wait for an fsync (the node's WAL is not
/// touched), and after a restart the stream is there (its definition is kept) but empty,
/// without its consumers; a file stream next to it keeps everything.
async fn memory_streams_skip_fsync_and_restart_empty(mut fx: JsFixture) {
    let js = fx.js().await;
    let memory = fx
        .create_stream(
            &js,
            stream::Config {
                name: "FAST".into(),
                subjects: vec!["fast.>".into()],
                storage: stream::StorageType::Memory,
                ..Default::default()
            },
        )
        .await;
    memory
        .create_consumer(pull::Config {
            durable_name: Some("reader".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    fx.create_stream(
        &js,
        stream::Config {
            name: "KEPT".into(),
            subjects: vec!["kept.>".into()],
            ..Default::default()
        },
    )
    .await;
    // A PubAck of the file stream means its entry is fsynced, and the WAL syncs in order, so
    // the writes behind the creates (the new groups' votes and first entries) are durable too:
    // nothing of theirs is left to be counted during the memory publishes. On R3 the PubAck
    // needs only a quorum: the last replica may still be writing until it holds the entry.
    publish_acked(&js, "kept.x", "k").await;
    fx.wait_until_replicas_hold("KEPT", 1).await;
    let before = fx.wal_fsyncs();
    for i in 1..=50u64 {
        assert_eq!(publish_acked(&js, "fast.x", "m").await.sequence, i);
    }
    assert_eq!(fx.wal_fsyncs(), before, "memory publishes fsync nothing");
    publish_acked(&js, "kept.x", "k").await;
    assert!(fx.wal_fsyncs() > before, "a file publish is fsynced");
    let mut memory = js.get_stream("FAST").await.unwrap();
    assert_eq!(memory.info().await.unwrap().state.messages, 50);
    fx.restart().await;

    let js = fx.js().await;
    let mut memory = js.get_stream("FAST").await.unwrap();
    let info = memory.info().await.unwrap();
    assert_eq!(info.config.storage, stream::StorageType::Memory);
    assert_eq!((info.state.messages, info.state.last_sequence), (0, 0));
    assert_eq!(info.state.consumer_count, 0);
    let mut kept = js.get_stream("KEPT").await.unwrap();
    assert_eq!(kept.info().await.unwrap().state.messages, 2);
    assert_eq!(publish_acked(&js, "fast.x", "again").await.sequence, 1);
    fx.shutdown().await;
}
