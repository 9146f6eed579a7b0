//! `kill -9` of a real jetraft process: every acknowledged message, the stream's sequence, the
//! consumer's ack floor and both creation times survive the restart, and the node goes on from
//! where it was.

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::process::JetraftProcess;
use common::within;
use futures::StreamExt;

/// Publishes `payload` to `subject` and waits for its PubAck; returns the stream sequence.
async fn publish_acked(
    js: &jetstream::Context,
    subject: &'static str,
    payload: &'static str,
) -> u64 {
    js.publish(subject, payload.into())
        .await
        .unwrap()
        .await
        .unwrap()
        .sequence
}

fn start(store: &std::path::Path) -> (JetraftProcess, String) {
    let mut node = JetraftProcess::spawn(&[
        "-a",
        "127.0.0.1",
        "-p",
        "0",
        "-js",
        "-sd",
        store.to_str().unwrap(),
    ]);
    let url = format!("nats://{}", node.client_addr());
    (node, url)
}

#[tokio::test]
async fn kill_9_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let (node, url) = start(dir.path());
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let stream = js
        .create_stream(stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.*".into()],
            ..Default::default()
        })
        .await
        .unwrap();
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
    drop(node); // SIGKILL: no shutdown, no flush

    let (_node, url) = start(dir.path());
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
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
    assert_eq!(publish_acked(&js, "orders.new", "after").await, 501);
}

/// `storage: memory` as a clustered nats-server: PubAcks do not wait for an fsync (the node's WAL is not
/// touched), and after a restart the stream is there (its definition is kept) but empty,
/// without its consumers; a file stream next to it keeps everything.
#[tokio::test]
async fn memory_streams_skip_fsync_and_restart_empty() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = jetraft::config::Config::loopback();
    config.jetstream = true;
    config.store_dir = dir.path().to_path_buf();
    let server = common::start(config.clone()).await;
    let js = jetstream::new(common::connect(&server).await);
    let memory = js
        .create_stream(stream::Config {
            name: "FAST".into(),
            subjects: vec!["fast.>".into()],
            storage: stream::StorageType::Memory,
            ..Default::default()
        })
        .await
        .unwrap();
    memory
        .create_consumer(pull::Config {
            durable_name: Some("reader".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    js.create_stream(stream::Config {
        name: "KEPT".into(),
        subjects: vec!["kept.>".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    // A PubAck of the file stream means its entry is fsynced, and the WAL syncs in order, so
    // the writes behind the creates (the new groups' votes and first entries) are durable too:
    // nothing of theirs is left to be counted during the memory publishes.
    publish_acked(&js, "kept.x", "k").await;
    let fsyncs = || server.jetstream().unwrap().log_stats().fsyncs;
    let before = fsyncs();
    for i in 1..=50u64 {
        assert_eq!(publish_acked(&js, "fast.x", "m").await, i);
    }
    assert_eq!(fsyncs(), before, "memory publishes fsync nothing");
    publish_acked(&js, "kept.x", "k").await;
    assert!(fsyncs() > before, "a file publish is fsynced");
    let mut memory = js.get_stream("FAST").await.unwrap();
    assert_eq!(memory.info().await.unwrap().state.messages, 50);
    server.shutdown().await;

    let server = common::start(config).await;
    let js = jetstream::new(common::connect(&server).await);
    let mut memory = js.get_stream("FAST").await.unwrap();
    let info = memory.info().await.unwrap();
    assert_eq!(info.config.storage, stream::StorageType::Memory);
    assert_eq!((info.state.messages, info.state.last_sequence), (0, 0));
    assert_eq!(info.state.consumer_count, 0);
    let mut kept = js.get_stream("KEPT").await.unwrap();
    assert_eq!(kept.info().await.unwrap().state.messages, 2);
    assert_eq!(publish_acked(&js, "fast.x", "again").await, 1);
    server.shutdown().await;
}
