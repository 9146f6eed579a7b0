//! Consumers delivered by their leader alone (ADR 0034): an `ack_policy: none`,
//! `mem_storage` consumer on a limits stream — what every client's ordered consumer asks
//! for — is delivered from the leader's own copy of its state, with no Raft entry per pull.
//! What the copy must still do: number deliveries and report them in ConsumerInfo, follow a
//! purge and a reset, and hand over to replicated delivery when the stream leaves limits
//! retention (whose deliveries to an ack-none consumer remove messages on every replica).
//! Every scenario runs on R1 and R3 (`common::fixture`); the last test, R3 only, reads with
//! an async-nats ordered consumer across a change of the stream's leader.

mod common;

use async_nats::jetstream::{self, consumer, stream};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::jetstream::{api, publish_acked, step_down_stream};
use common::{wait_until, within};
use futures::StreamExt;
use serde_json::{json, Value};

on_r1_and_r3!(
    an_ordered_consumer_is_delivered_without_raft_entries,
    a_local_consumer_follows_a_purge_and_a_reset,
    leaving_limits_retention_replicates_deliveries,
);

const STREAM: &str = "ORDERS";

/// The consumer every client's ordered consumer creates (here a named pull consumer).
fn ordered_config(name: &str) -> consumer::pull::Config {
    consumer::pull::Config {
        name: Some(name.into()),
        ack_policy: consumer::AckPolicy::None,
        memory_storage: true,
        num_replicas: 1,
        ..Default::default()
    }
}

async fn ordered(js: &jetstream::Context, name: &str) -> consumer::PullConsumer {
    let stream = within("stream lookup", js.get_stream(STREAM))
        .await
        .expect("stream exists");
    within(
        "consumer create",
        stream.create_consumer(ordered_config(name)),
    )
    .await
    .expect("consumer created")
}

/// Up to `batch` messages of one pull: (stream sequence, consumer sequence) each.
async fn fetch(consumer: &consumer::PullConsumer, batch: usize) -> Vec<(u64, u64)> {
    let messages = within(
        "fetch",
        consumer
            .fetch()
            .max_messages(batch)
            .expires(std::time::Duration::from_secs(1))
            .messages(),
    )
    .await
    .expect("pull accepted");
    within("fetched messages", messages.collect::<Vec<_>>())
        .await
        .into_iter()
        .map(|message| {
            let message = message.expect("a message");
            let info = message.info().expect("a JetStream message");
            (info.stream_sequence, info.consumer_sequence)
        })
        .collect()
}

async fn consumer_info(client: &async_nats::Client, name: &str) -> Value {
    let info = api(client, format!("$JS.API.CONSUMER.INFO.{STREAM}.{name}"), "").await;
    assert!(info.get("error").is_none(), "{info}");
    info
}

async fn an_ordered_consumer_is_delivered_without_raft_entries(fx: JsFixture) {
    let js = fx.js().await;
    fx.stream_of(&js, STREAM, "order", 40).await;
    fx.wait_until_replicas_hold(STREAM, 40).await;
    let consumer = ordered(&js, "reader").await;
    let before = fx.leader_applied_index(STREAM);

    let mut got = Vec::new();
    for _ in 0..4 {
        got.extend(fetch(&consumer, 10).await);
    }
    let expected: Vec<(u64, u64)> = (1..=40).map(|seq| (seq, seq)).collect();
    assert_eq!(got, expected);
    assert_eq!(
        fx.leader_applied_index(STREAM),
        before,
        "four pulls of an ordered consumer wrote Raft entries"
    );

    let client = fx.client().await;
    let info = consumer_info(&client, "reader").await;
    assert_eq!(info["delivered"]["consumer_seq"], 40, "{info}");
    assert_eq!(info["delivered"]["stream_seq"], 40, "{info}");
    assert_eq!(info["ack_floor"]["stream_seq"], 40, "{info}");
    assert_eq!(info["num_pending"], 0, "{info}");
    assert_eq!(info["num_ack_pending"], 0, "{info}");

    for i in 41..=45 {
        publish_acked(&js, "orders.new", format!("order {i}")).await;
    }
    let info = consumer_info(&client, "reader").await;
    assert_eq!(info["num_pending"], 5, "{info}");
    let expected: Vec<(u64, u64)> = (41..=45).map(|seq| (seq, seq)).collect();
    assert_eq!(fetch(&consumer, 10).await, expected);
}

async fn a_local_consumer_follows_a_purge_and_a_reset(fx: JsFixture) {
    let js = fx.js().await;
    fx.stream_of(&js, STREAM, "order", 10).await;
    let consumer = ordered(&js, "reader").await;
    assert_eq!(fetch(&consumer, 3).await, vec![(1, 1), (2, 2), (3, 3)]);

    let stream = js.get_stream(STREAM).await.expect("stream exists");
    stream.purge().await.expect("purged");
    for i in 11..=12 {
        publish_acked(&js, "orders.new", format!("order {i}")).await;
    }
    let client = fx.client().await;
    let info = consumer_info(&client, "reader").await;
    assert_eq!(info["delivered"]["stream_seq"], 10, "{info}");
    assert_eq!(info["num_pending"], 2, "{info}");
    assert_eq!(fetch(&consumer, 10).await, vec![(11, 4), (12, 5)]);

    let reset = api(
        &client,
        format!("$JS.API.CONSUMER.RESET.{STREAM}.reader"),
        json!({"seq": 12}),
    )
    .await;
    assert!(reset.get("error").is_none(), "{reset}");
    assert_eq!(reset["reset_seq"], 12, "{reset}");
    assert_eq!(reset["delivered"]["consumer_seq"], 0, "{reset}");
    assert_eq!(reset["num_pending"], 1, "{reset}");
    assert_eq!(fetch(&consumer, 10).await, vec![(12, 1)]);
}

async fn leaving_limits_retention_replicates_deliveries(fx: JsFixture) {
    let js = fx.js().await;
    fx.stream_of(&js, STREAM, "order", 10).await;
    let consumer = ordered(&js, "reader").await;
    assert_eq!(
        fetch(&consumer, 4).await,
        vec![(1, 1), (2, 2), (3, 3), (4, 4)]
    );

    let mut config = fx.stream_info(STREAM).await.config;
    config.retention = stream::RetentionPolicy::Interest;
    within("stream update", js.update_stream(config))
        .await
        .expect("retention changed to interest");
    let before = fx.leader_applied_index(STREAM);
    // From the switch on, the consumer is what every replica holds: its info says so before
    // the next delivery.
    let client = fx.client().await;
    let info = consumer_info(&client, "reader").await;
    assert_eq!(info["delivered"]["consumer_seq"], 0, "{info}");
    assert_eq!(info["num_pending"], 10, "{info}");

    // Delivery goes on from the replicated position, and under interest retention each
    // delivery to this, the only, consumer is its acknowledgement: the stream drains on every
    // replica.
    let mut got = Vec::new();
    while got.last().map(|(seq, _)| *seq) != Some(10) {
        let batch = fetch(&consumer, 20).await;
        assert!(!batch.is_empty(), "nothing delivered after {got:?}");
        got.extend(batch);
    }
    let seqs: Vec<u64> = got.iter().map(|(seq, _)| *seq).collect();
    assert!(seqs.ends_with(&[5, 6, 7, 8, 9, 10]), "{seqs:?}");
    assert!(fx.leader_applied_index(STREAM) > before);
    fx.wait_until_replicas_count(STREAM, 0).await;
}

/// An async-nats ordered consumer reading on across a change of the stream's leader: the new
/// leader delivers from the replicated position (consumer sequence 1 again), the client sees
/// the sequence go back and recreates its consumer after the last message it got. The
/// application sees every message once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordered_consumer_reads_on_across_a_leader_change() {
    let fx = JsFixture::start(Topology::R3).await;
    let js = fx.js().await;
    fx.stream_of(&js, STREAM, "order", 60).await;
    let stream = within("stream lookup", js.get_stream(STREAM))
        .await
        .expect("stream exists");
    let consumer = within(
        "ordered consumer",
        stream.create_consumer(consumer::pull::OrderedConfig::default()),
    )
    .await
    .expect("ordered consumer created");
    let mut messages = within("messages", consumer.messages())
        .await
        .expect("messages");
    let mut seqs = Vec::new();
    let mut read_until = async |last: u64, seqs: &mut Vec<u64>| {
        let mut errors = 0;
        while seqs.last().copied().unwrap_or(0) < last {
            match within("the next message", messages.next()).await {
                Some(Ok(message)) => seqs.push(message.info().expect("info").stream_sequence),
                Some(Err(error)) => {
                    errors += 1;
                    assert!(errors < 10, "ordered consumer errors, last: {error}");
                }
                None => panic!("ordered consumer ended"),
            }
        }
    };
    read_until(60, &mut seqs).await;

    let leader = fx.leader_index(STREAM).expect("a leader");
    let client = fx.client().await;
    assert!(step_down_stream(&client, STREAM).await, "no step-down");
    wait_until("another leader", || {
        fx.leader_index(STREAM).is_some_and(|i| i != leader)
    })
    .await;
    fx.wait_until_served(STREAM).await;
    for i in 61..=100 {
        publish_acked(&js, "orders.new", format!("order {i}")).await;
    }
    read_until(100, &mut seqs).await;
    assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
}
