//! `kill -9` of a real jetraft process: every acknowledged message, the stream's sequence, the
//! consumer's ack floor and both creation times survive the restart, and the node goes on from
//! where it was.

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::process::JetraftProcess;
use common::within;
use futures::StreamExt;

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
    let ack = js
        .publish("orders.new", "after".into())
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(ack.sequence, 501);
}
