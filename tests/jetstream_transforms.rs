//! A stream's `subject_transform` (ADR-36) and `republish` (ADR-28) through async-nats: the
//! subject stored is the transformed one (consumers filter on it), bad transforms get
//! nats-server's errors, and after a restart the new leader transforms the same way; each
//! stored message is republished once, in order, with nats-server's `Nats-*` headers
//! (`Nats-Msg-Size` and no payload when `headers_only`), key-value buckets republish too.
//! Every scenario runs on R1 and R3.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, kv, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::{api, publish_acked};
use common::within;
use futures::StreamExt;
use serde_json::json;

on_r1_and_r3!(
    the_stored_subject_is_the_transformed_one,
    stored_messages_are_republished_in_order,
    headers_only_republish_sends_the_size,
    key_value_buckets_republish,
);

async fn stored_subject(js: &jetstream::Context, stream: &str, seq: u64) -> String {
    let stream = js.get_stream(stream).await.expect("stream info");
    let msg = within("message get", stream.get_raw_message(seq))
        .await
        .expect("message stored");
    msg.subject.to_string()
}

async fn the_stored_subject_is_the_transformed_one(mut fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    // nats-server's errors for transforms it does not accept.
    for (dest, code, text) in [
        (
            "o.{{nope(1)}}",
            10156,
            "stream transform: invalid mapping destination: unknown function in {{nope(1)}}",
        ),
        ("o.*", 10156, "stream transform: invalid subject"),
        (
            "o.$2",
            10156,
            "stream transform: invalid mapping destination: wildcard index out of range in $2: [2]",
        ),
    ] {
        let body = json!({"name":"TR","subjects":["orders.*"],"num_replicas":fx.stream_replicas(),
            "subject_transform":{"src":"orders.*","dest":dest}});
        let reply = api(&client, "$JS.API.STREAM.CREATE.TR", body).await;
        assert_eq!(reply["error"]["err_code"], code, "{dest}: {reply}");
        assert_eq!(reply["error"]["description"], text, "{dest}: {reply}");
    }
    let transform = stream::SubjectTransform {
        source: "orders.*".into(),
        destination: "o.{{wildcard(1)}}.x".into(),
    };
    let created = fx
        .create_stream(
            &js,
            stream::Config {
                name: "TR".into(),
                subjects: vec!["orders.*".into()],
                subject_transform: Some(transform.clone()),
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        created.cached_info().config.subject_transform,
        Some(transform),
        "echoed"
    );
    assert_eq!(publish_acked(&js, "orders.a", "one").await.sequence, 1);
    assert_eq!(stored_subject(&js, "TR", 1).await, "o.a.x");

    // Consumers filter on the stored subject.
    let consumer = created
        .create_consumer(pull::Config {
            durable_name: Some("C".into()),
            filter_subject: "o.*.x".into(),
            ..Default::default()
        })
        .await
        .expect("a filter on the transformed subjects is accepted");
    let mut batch = consumer.fetch().max_messages(1).messages().await.unwrap();
    let msg = within("the message", batch.next()).await.unwrap().unwrap();
    assert_eq!(msg.subject.as_str(), "o.a.x");

    fx.restart().await;
    let js = fx.js().await;
    assert_eq!(
        stored_subject(&js, "TR", 1).await,
        "o.a.x",
        "after a restart"
    );
    assert_eq!(publish_acked(&js, "orders.b", "two").await.sequence, 2);
    assert_eq!(
        stored_subject(&js, "TR", 2).await,
        "o.b.x",
        "the new leader transforms"
    );
    fx.shutdown().await;
}

/// A subscription on `subject` that every node knows.
async fn subscribe(
    fx: &JsFixture,
    client: &async_nats::Client,
    subject: &str,
) -> async_nats::Subscriber {
    let subscriber = client.subscribe(subject.to_owned()).await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere(subject).await;
    subscriber
}

fn header<'a>(msg: &'a async_nats::Message, name: &str) -> &'a str {
    // Parsed, so the client's standard names (`Nats-Stream`, …) are found too.
    let name: async_nats::HeaderName = name.parse().unwrap();
    msg.headers
        .as_ref()
        .and_then(|headers| headers.get(name.clone()))
        .map(|value| value.as_str())
        .unwrap_or_else(|| panic!("header {name} in {msg:?}"))
}

async fn next(subscriber: &mut async_nats::Subscriber) -> async_nats::Message {
    within("a republished message", subscriber.next())
        .await
        .expect("subscription open")
}

async fn stored_messages_are_republished_in_order(mut fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(
        &js,
        stream::Config {
            name: "RP".into(),
            subjects: vec!["rp.*".into()],
            republish: Some(stream::Republish {
                source: "rp.*".into(),
                destination: "copy.{{wildcard(1)}}".into(),
                headers_only: false,
            }),
            ..Default::default()
        },
    )
    .await;
    let mut copies = subscribe(&fx, &client, "copy.>").await;
    // Async publishes: several share a batch, and still come out in order.
    let mut acks = Vec::new();
    for i in 1..=20u64 {
        let subject = if i % 2 == 1 { "rp.a" } else { "rp.b" };
        acks.push(js.publish(subject, format!("m{i}").into()).await.unwrap());
    }
    for ack in acks {
        within("PubAck", std::future::IntoFuture::into_future(ack))
            .await
            .unwrap();
    }
    for i in 1..=20u64 {
        let msg = next(&mut copies).await;
        let (subject, copy) = if i % 2 == 1 {
            ("rp.a", "copy.a")
        } else {
            ("rp.b", "copy.b")
        };
        assert_eq!(msg.subject.as_str(), copy);
        assert_eq!(&msg.payload[..], format!("m{i}").as_bytes());
        assert_eq!(header(&msg, "Nats-Stream"), "RP");
        assert_eq!(header(&msg, "Nats-Subject"), subject);
        assert_eq!(header(&msg, "Nats-Sequence"), i.to_string());
        assert_eq!(
            header(&msg, "Nats-Last-Sequence"),
            i.saturating_sub(2).to_string()
        );
        assert!(header(&msg, "Nats-Time-Stamp").ends_with('Z'));
    }
    // A duplicate is stored once, so republished once.
    for _ in 0..2 {
        let publish = jetstream::context::Publish::build()
            .message_id("same")
            .payload("dup".into());
        let ack = js.send_publish("rp.a", publish).await.unwrap();
        within("PubAck", std::future::IntoFuture::into_future(ack))
            .await
            .unwrap();
    }
    assert_eq!(header(&next(&mut copies).await, "Nats-Sequence"), "21");

    fx.restart().await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let mut copies = subscribe(&fx, &client, "copy.>").await;
    publish_acked(&js, "rp.a", "after").await;
    let msg = next(&mut copies).await;
    assert_eq!(
        header(&msg, "Nats-Sequence"),
        "22",
        "the new leader republishes"
    );
    assert_eq!(header(&msg, "Nats-Last-Sequence"), "21");
    // Nothing else: every message was republished exactly once.
    let extra = tokio::time::timeout(Duration::from_millis(200), copies.next()).await;
    assert!(extra.is_err(), "an extra copy: {extra:?}");
    fx.shutdown().await;
}

async fn headers_only_republish_sends_the_size(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let mut config = stream::Config {
        name: "HO".into(),
        subjects: vec!["ho.*".into()],
        ..Default::default()
    };
    fx.create_stream(&js, config.clone()).await;
    // Added by an update (nats-server 2.10 allows editing it).
    config.republish = Some(stream::Republish {
        source: String::new(),
        destination: "meta.>".into(),
        headers_only: true,
    });
    let updated = within("update", js.update_stream(fx.replicated(config)))
        .await
        .expect("republish added");
    assert_eq!(
        updated.config.republish.as_ref().unwrap().source,
        ">",
        "an empty source is echoed as >"
    );
    let mut copies = subscribe(&fx, &client, "meta.>").await;
    let mut headers = async_nats::HeaderMap::new();
    headers.insert("X-Mine", "kept");
    let ack = js
        .publish_with_headers("ho.a", headers, "12345".into())
        .await
        .unwrap();
    within("PubAck", std::future::IntoFuture::into_future(ack))
        .await
        .unwrap();
    let msg = next(&mut copies).await;
    assert_eq!(msg.subject.as_str(), "meta.ho.a");
    assert!(msg.payload.is_empty());
    assert_eq!(header(&msg, "Nats-Msg-Size"), "5");
    assert_eq!(header(&msg, "X-Mine"), "kept");
    assert_eq!(header(&msg, "Nats-Sequence"), "1");
    // A republish destination inside the stream's own subjects would loop.
    let body = json!({"name":"HO","subjects":["ho.*"],"num_replicas":fx.stream_replicas(),
        "republish":{"src":">","dest":"ho.x"}});
    let reply = api(&client, "$JS.API.STREAM.UPDATE.HO", body).await;
    assert_eq!(
        reply["error"]["description"],
        "stream configuration for republish destination forms a cycle",
        "{reply}"
    );
    fx.shutdown().await;
}

async fn key_value_buckets_republish(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let bucket = fx
        .create_key_value(
            &js,
            kv::Config {
                bucket: "CFG".into(),
                history: 1,
                republish: Some(stream::Republish {
                    source: "$KV.CFG.>".into(),
                    destination: "cfgwatch.>".into(),
                    headers_only: false,
                }),
                ..Default::default()
            },
        )
        .await;
    let mut copies = subscribe(&fx, &client, "cfgwatch.>").await;
    within("put", bucket.put("color", "red".into()))
        .await
        .unwrap();
    within("put", bucket.put("color", "blue".into()))
        .await
        .unwrap();
    let first = next(&mut copies).await;
    // The `>` of the source carries what it matched.
    assert_eq!(first.subject.as_str(), "cfgwatch.color");
    assert_eq!(header(&first, "Nats-Last-Sequence"), "0");
    let second = next(&mut copies).await;
    assert_eq!(&second.payload[..], b"blue");
    // Read before the bucket's history of one removed it.
    assert_eq!(header(&second, "Nats-Last-Sequence"), "1");
    assert_eq!(
        within("get", bucket.get("color")).await.unwrap().as_deref(),
        Some(&b"blue"[..])
    );
    fx.shutdown().await;
}
