//! A request sees the publishes that came before it (`jetstream/ingest_progress.rs`), as
//! nats-server's clients expect: publishes whose acks are not awaited, then on the same
//! connection a consumer create, a `no_wait` fetch or a `STREAM.INFO`, find every one of them;
//! a message republished into another stream is there when the origin's PubAck arrives.
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
