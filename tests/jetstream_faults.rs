//! Storage faults under a running node: a stream whose log is corrupt in the middle stays
//! offline (API calls say so, it is not "not found") until deleted; a failed WAL write (disk
//! full) stops the stream's group, publishes get an error reply meanwhile, and the node
//! restarts the group by itself — nothing acknowledged is lost and waiting pull requests
//! are told `409 Leadership Change`. The meta group is supervised the same way: after a
//! failed meta write, stream create and delete work again without a restart.
//!
//! R1 only: the faults are injected through the in-process node's `LogOptions` and by
//! editing its WAL between runs; the cluster's storage faults are `cluster_*.rs`'s.

mod common;

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use common::jetstream::{api, pull_until_waiting};
use common::{within, RunningNode};
use futures::StreamExt;
use jetraft::config::Config;
use jetraft::store::log::{FaultInjector, LogOptions};
use serde_json::Value;

fn config(dir: &std::path::Path) -> Config {
    let mut config = Config::loopback();
    config.jetstream = true;
    config.store_dir = dir.to_path_buf();
    config
}

async fn start(dir: &std::path::Path, options: LogOptions) -> RunningNode {
    common::start_with_log_options(config(dir), options).await
}

/// Nothing of a stopped node holds its store: its sled database opens at once, without
/// yielding to the runtime (a new node on the directory would otherwise find sled's lock taken).
fn assert_store_free(dir: &std::path::Path) {
    jetraft::consensus::StateDb::open(dir.join("state")).expect("the stopped node let go of sled");
}

/// A server whose WAL writes go through a fault injector the test controls.
async fn start_with_faults(dir: &std::path::Path) -> (RunningNode, Arc<FaultInjector>) {
    let fault = Arc::new(FaultInjector::new());
    let options = LogOptions {
        fault: Some(fault.clone()),
        ..LogOptions::default()
    };
    (start(dir, options).await, fault)
}

async fn create(js: &jetstream::Context, name: &str, subjects: &str) -> stream::Stream {
    js.create_stream(stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        ..Default::default()
    })
    .await
    .unwrap()
}

/// Flips one byte inside the first occurrence of `needle` in the WAL's segments.
fn damage_log(store: &std::path::Path, needle: &[u8]) {
    let mut segments: Vec<_> = std::fs::read_dir(store.join("log"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "wal"))
        .collect();
    segments.sort();
    for segment in segments {
        let mut bytes = std::fs::read(&segment).unwrap();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            bytes[at + 2] ^= 0xff;
            std::fs::write(&segment, bytes).unwrap();
            return;
        }
    }
    panic!("{needle:?} not found in the log");
}

#[tokio::test]
async fn corrupt_stream_is_offline_not_missing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let server = start(dir.path(), LogOptions::default()).await;
        let js = jetstream::new(common::connect(&server).await);
        create(&js, "ORDERS", "orders.*").await;
        create(&js, "HEALTHY", "healthy.*").await;
        for i in 0..5 {
            let payload = format!("order-payload-{i:04}");
            js.publish("orders.new", payload.into())
                .await
                .unwrap()
                .await
                .unwrap();
        }
        js.publish("healthy.one", "fine".into())
            .await
            .unwrap()
            .await
            .unwrap();
        server.shutdown().await;
    }
    // Damage an entry in the middle of ORDERS's log (later entries follow it).
    damage_log(dir.path(), b"order-payload-0001");

    let server = start(dir.path(), LogOptions::default()).await;
    let client = common::connect(&server).await;
    let info = api(&client, "$JS.API.STREAM.INFO.ORDERS", "").await;
    assert_eq!(info["error"]["err_code"], 10194, "{info}");
    assert_eq!(info["error"]["code"], 500, "{info}");
    let description = info["error"]["description"].as_str().unwrap();
    assert!(
        description.starts_with("stream is offline: ") && description.contains("corrupt"),
        "{description}"
    );
    // Every call on it says so; other streams are served.
    let consumers = api(&client, "$JS.API.CONSUMER.NAMES.ORDERS", "").await;
    assert_eq!(consumers["error"]["err_code"], 10194, "{consumers}");
    let get = api(&client, "$JS.API.STREAM.MSG.GET.ORDERS", r#"{"seq":1}"#).await;
    assert_eq!(get["error"]["err_code"], 10194, "{get}");
    let healthy = api(&client, "$JS.API.STREAM.INFO.HEALTHY", "").await;
    assert_eq!(healthy["state"]["messages"], 1, "{healthy}");
    let list = api(&client, "$JS.API.STREAM.LIST", "").await;
    assert_eq!(list["total"], 2, "{list}");
    assert_eq!(list["streams"].as_array().unwrap().len(), 1, "{list}");
    assert!(list["offline"]["ORDERS"]
        .as_str()
        .unwrap()
        .contains("corrupt"));
    // A publish on its subjects is not stored and says why.
    let ack = within(
        "publish to offline",
        client.request("orders.new", "lost".into()),
    )
    .await
    .unwrap();
    let ack: Value = serde_json::from_slice(&ack.payload).unwrap();
    assert_eq!(ack["error"]["err_code"], 10194, "{ack}");
    assert_eq!(ack["stream"], "ORDERS", "{ack}");
    let missing = api(&client, "$JS.API.STREAM.INFO.NOPE", "").await;
    assert_eq!(missing["error"]["err_code"], 10059, "{missing}");

    // Deleting it drops its data; the name can be used again.
    let deleted = api(&client, "$JS.API.STREAM.DELETE.ORDERS", "").await;
    assert_eq!(deleted["success"], true, "{deleted}");
    let js = jetstream::new(client.clone());
    let mut again = create(&js, "ORDERS", "orders.*").await;
    assert_eq!(again.info().await.unwrap().state.messages, 0);
    let ack = js.publish("orders.new", "new".into()).await.unwrap();
    assert_eq!(
        ack.await.unwrap().sequence,
        1,
        "one answer, from the new stream"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn failed_log_write_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server, fault) = start_with_faults(dir.path()).await;
    let client = common::connect(&server).await;
    let js = jetstream::new(client.clone());
    let stream = create(&js, "ORDERS", "orders.*").await;
    for i in 1..=10u64 {
        let ack = js
            .publish("orders.new", format!("order {i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(ack.sequence, i);
    }
    stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("proc".into()),
            deliver_policy: consumer::DeliverPolicy::New,
            ..Default::default()
        })
        .await
        .unwrap();
    let inbox = client.new_inbox();
    let mut pulls = client.subscribe(inbox.clone()).await.unwrap();
    let body = r#"{"batch":1,"expires":30000000000}"#;
    pull_until_waiting(&client, &stream, "proc", inbox, body, 1).await;

    // The disk is full for the next write: that publish gets an error, not a PubAck.
    fault.fail_next_write_after(0);
    let failed = js.publish("orders.new", "lost".into()).await.unwrap().await;
    let error = failed.expect_err("a failed write is not acknowledged");
    assert!(
        error.to_string().contains("10008") || error.to_string().contains("unavailable"),
        "{error}"
    );
    assert_eq!(fault.fired(), 1);
    // Still full for the next write (the supervisor's first restart, or whatever writes
    // next): the node keeps trying.
    fault.fail_next_write_after(0);

    // The waiting pull request learns its stream lost its leader.
    let status = within("leadership change", pulls.next()).await.unwrap();
    assert_eq!(status.status.map(|s| s.as_u16()), Some(409));
    assert_eq!(status.description.as_deref(), Some("Leadership Change"));

    // Space is back: the node restarts the group by itself and publishing goes on.
    let seq = within("publishing again", async {
        loop {
            let attempt = js
                .publish("orders.new", "after".into())
                .await
                .unwrap()
                .await;
            match attempt {
                Ok(ack) => break ack.sequence,
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await;
    assert_eq!(seq, 11, "the failed publish took no sequence");
    assert_eq!(fault.fired(), 2);
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 11);
    for (seq, payload) in [(1, "order 1"), (10, "order 10"), (11, "after")] {
        let msg = stream.get_raw_message(seq).await.unwrap();
        assert_eq!(&msg.payload[..], payload.as_bytes());
    }
    // Delivery works on the restarted group.
    let consumer: consumer::PullConsumer = stream.get_consumer("proc").await.unwrap();
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let msg = within("delivery", batch.next()).await.unwrap().unwrap();
    assert_eq!(&msg.payload[..], b"after");
    msg.double_ack().await.unwrap();
    server.shutdown().await;

    // And all of it survives a restart.
    let server = start(dir.path(), LogOptions::default()).await;
    let js = jetstream::new(common::connect(&server).await);
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 11);
    server.shutdown().await;
}

#[tokio::test]
async fn failed_meta_write_recovers_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server, fault) = start_with_faults(dir.path()).await;
    let client = common::connect(&server).await;
    let js = jetstream::new(client.clone());
    create(&js, "KEPT", "kept.*").await;

    // The disk is full for the next write, the meta entry of this create: an error reply.
    fault.fail_next_write_after(0);
    let failed = api(
        &client,
        "$JS.API.STREAM.CREATE.ORDERS",
        r#"{"name":"ORDERS","subjects":["orders.*"]}"#,
    )
    .await;
    assert_eq!(failed["error"]["err_code"], 10008, "{failed}");
    assert_eq!(fault.fired(), 1);
    // Still full for the next write (the supervisor's first restart, or whatever writes
    // next): the node keeps trying.
    fault.fail_next_write_after(0);

    // Space is back: the node restarts the meta group by itself and creates work again.
    let created = within("creating again", async {
        loop {
            let reply = api(
                &client,
                "$JS.API.STREAM.CREATE.ORDERS",
                r#"{"name":"ORDERS","subjects":["orders.*"]}"#,
            )
            .await;
            if reply.get("error").is_none() {
                break reply;
            }
            assert_eq!(reply["error"]["err_code"], 10008, "{reply}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(created["config"]["name"], "ORDERS");
    assert_eq!(fault.fired(), 2);
    let ack = js.publish("orders.new", "first".into()).await.unwrap();
    assert_eq!(ack.await.unwrap().sequence, 1);
    // Deletes go through the restarted meta group too, and the node serves what it states.
    let deleted = api(&client, "$JS.API.STREAM.DELETE.KEPT", "").await;
    assert_eq!(deleted["success"], true, "{deleted}");
    let names = api(&client, "$JS.API.STREAM.NAMES", "").await;
    assert_eq!(names["streams"], serde_json::json!(["ORDERS"]), "{names}");
    // The delete has sled reclaim space in the background, and the first meta group's
    // instances are gone: once shutdown returns nothing of the node holds the store.
    server.shutdown().await;
    assert_store_free(dir.path());

    // And the meta state survives a restart.
    let server = start(dir.path(), LogOptions::default()).await;
    let client = common::connect(&server).await;
    let names = api(&client, "$JS.API.STREAM.NAMES", "").await;
    assert_eq!(names["streams"], serde_json::json!(["ORDERS"]), "{names}");
    let js = jetstream::new(client);
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 1);
    server.shutdown().await;
}
