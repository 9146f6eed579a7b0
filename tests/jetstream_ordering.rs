//! A request sees the publishes that came before it (`jetstream/ingest_progress.rs`), as
//! nats-server's clients expect: publishes whose acks are not awaited, then on the same
//! connection a consumer create, a `no_wait` fetch or a `STREAM.INFO`, find every one of them;
//! a message republished into another stream is there when the origin's PubAck arrives; a
//! `CONSUMER.INFO` reaches the client after the pushed messages it counts as delivered.
//! Each scenario repeats a few rounds: one round alone passed most of the time before.

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::publish_acked;
use common::within;
use futures::StreamExt;

on_r1_and_r3!(
    a_consumer_created_after_unawaited_publishes_sees_them,
    a_no_wait_fetch_sees_unawaited_publishes,
    stream_info_counts_unawaited_publishes,
    a_republished_message_is_stored_when_the_origin_acks,
    consumer_info_comes_after_the_messages_it_counts_delivered,
);

const ROUNDS: usize = 5;
const BURST: usize = 20;

/// `count` publishes to `subject` whose acks are not awaited before the caller's next
/// request; returns the ack futures (awaited at the end, so none is lost unnoticed).
async fn publish_unawaited(
    js: &jetstream::Context,
    subject: &str,
    count: usize,
) -> Vec<jetstream::context::PublishAckFuture> {
    let mut acks = Vec::with_capacity(count);
    for n in 0..count {
        let ack = js
            .publish(subject.to_owned(), format!("m{n}").into())
            .await
            .expect("publish sent");
        acks.push(ack);
    }
    acks
}

async fn all_acked(acks: Vec<jetstream::context::PublishAckFuture>) {
    for ack in acks {
        within("a PubAck", std::future::IntoFuture::into_future(ack))
            .await
            .expect("publish acknowledged");
    }
}

async fn fetch_count(consumer: &jetstream::consumer::Consumer<pull::Config>, max: usize) -> usize {
    let batch = consumer
        .fetch()
        .max_messages(max)
        .messages()
        .await
        .expect("fetch");
    within("the fetch", batch.count()).await
}

fn events(fx: &JsFixture, name: &str) -> stream::Config {
    fx.replicated(stream::Config {
        name: name.into(),
        subjects: vec![format!("{name}.>")],
        ..Default::default()
    })
}

async fn a_consumer_created_after_unawaited_publishes_sees_them(fx: JsFixture) {
    let js = fx.js().await;
    let stream = fx.create_stream(&js, events(&fx, "EV")).await;
    for round in 0..ROUNDS {
        let acks = publish_unawaited(&js, "EV.a", BURST).await;
        let consumer = stream
            .create_consumer(pull::Config {
                durable_name: Some(format!("c{round}")),
                filter_subject: "EV.a".into(),
                ..Default::default()
            })
            .await
            .expect("consumer created");
        let expected = (round + 1) * BURST;
        assert_eq!(
            fetch_count(&consumer, expected + 5).await,
            expected,
            "round {round}"
        );
        all_acked(acks).await;
    }
    fx.shutdown().await;
}

async fn a_no_wait_fetch_sees_unawaited_publishes(fx: JsFixture) {
    let js = fx.js().await;
    let stream = fx.create_stream(&js, events(&fx, "EV")).await;
    let consumer = stream
        .create_consumer(pull::Config {
            durable_name: Some("c".into()),
            ..Default::default()
        })
        .await
        .expect("consumer created");
    for round in 0..ROUNDS {
        let acks = publish_unawaited(&js, "EV.b", BURST).await;
        assert_eq!(
            fetch_count(&consumer, BURST * 2).await,
            BURST,
            "round {round}"
        );
        all_acked(acks).await;
    }
    fx.shutdown().await;
}

async fn stream_info_counts_unawaited_publishes(fx: JsFixture) {
    let js = fx.js().await;
    let mut stream = fx.create_stream(&js, events(&fx, "EV")).await;
    for round in 0..ROUNDS {
        let acks = publish_unawaited(&js, "EV.c", BURST).await;
        let info = stream.info().await.expect("stream info");
        assert_eq!(
            info.state.messages,
            ((round + 1) * BURST) as u64,
            "round {round}"
        );
        all_acked(acks).await;
    }
    fx.shutdown().await;
}

async fn a_republished_message_is_stored_when_the_origin_acks(fx: JsFixture) {
    let js = fx.js().await;
    fx.create_stream(
        &js,
        fx.replicated(stream::Config {
            name: "SRC".into(),
            subjects: vec!["src.>".into()],
            republish: Some(stream::Republish {
                source: "src.>".into(),
                destination: "dst.>".into(),
                headers_only: false,
            }),
            ..Default::default()
        }),
    )
    .await;
    let target = fx.create_stream(&js, events(&fx, "dst")).await;
    fx.wait_until_known_everywhere("dst.k0").await;
    for round in 0..ROUNDS * 4 {
        let key = format!("k{round}");
        publish_acked(&js, &format!("src.{key}"), "v").await;
        let found = target
            .get_last_raw_message_by_subject(&format!("dst.{key}"))
            .await;
        assert!(found.is_ok(), "round {round}: {found:?}");
    }
    fx.shutdown().await;
}

/// nats-py's key-value watcher creates a push consumer and asks for its info: an info that
/// counts messages as delivered (`num_pending` 0) before the client got them reads as an
/// empty bucket. Deliveries and the info reply go to one subscription, so their order on the
/// wire is what the subscriber sees.
async fn consumer_info_comes_after_the_messages_it_counts_delivered(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, events(&fx, "EV")).await;
    for n in 0..BURST {
        publish_acked(&js, "EV.d", format!("m{n}")).await;
    }
    let mut inbox = client.subscribe("_ORD.>").await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere("_ORD.x").await;
    for round in 0..ROUNDS * 2 {
        let name = format!("w{round}");
        let deliver = format!("_ORD.dlv.{round}");
        let body = serde_json::json!({"stream_name":"EV","config":{"name":name,
            "deliver_subject":deliver,"ack_policy":"none","deliver_policy":"all"}});
        let created = common::jetstream::api(&client, "$JS.API.CONSUMER.CREATE.EV", body).await;
        assert!(created.get("error").is_none(), "{created}");
        let reply = format!("_ORD.info.{round}");
        client
            .publish_with_reply(
                format!("$JS.API.CONSUMER.INFO.EV.{name}"),
                reply.clone(),
                "".into(),
            )
            .await
            .unwrap();
        let mut received = 0u64;
        let info = loop {
            let msg = within("a delivery or the info", inbox.next())
                .await
                .unwrap();
            if msg.subject.as_str() == reply {
                break serde_json::from_slice::<serde_json::Value>(&msg.payload).unwrap();
            }
            // A pushed message carries its stored subject, routed by the deliver subject.
            if msg.subject.as_str() == "EV.d" {
                received += 1;
            }
        };
        let delivered = info["delivered"]["consumer_seq"].as_u64().unwrap();
        assert!(
            received >= delivered,
            "round {round}: the info counts {delivered} delivered, {received} arrived before it"
        );
        // The rest of this round's deliveries, then the consumer goes.
        while received < BURST as u64 {
            let msg = within("the round's deliveries", inbox.next())
                .await
                .unwrap();
            if msg.subject.as_str() == deliver {
                received += 1;
            }
        }
        let subject = format!("$JS.API.CONSUMER.DELETE.EV.{name}");
        common::jetstream::api(&client, subject, serde_json::json!({})).await;
    }
    fx.shutdown().await;
}
