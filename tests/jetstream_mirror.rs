//! Mirrors and sources (ADR-59 style, as nats-server does them) through async-nats: a mirror
//! copies its origin with the origin's sequence numbers (its gaps too), from a start
//! sequence and filtered; a stream sources two streams with the `Nats-Stream-Source`
//! header; `STREAM.INFO` reports the `mirror` and `sources` blocks; and an origin published
//! to while the mirror's leader changes and every node restarts is copied exactly once.
//! Every scenario runs on R1 and R3.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::jetstream::{publish_acked, publish_deduplicated, step_down_stream};
use common::within;
use serde_json::Value;

on_r1_and_r3!(
    a_mirror_copies_everything_with_the_origins_sequences,
    a_mirror_from_a_start_sequence_filtered,
    a_mirror_loses_and_duplicates_nothing_across_leader_changes_and_restarts,
    a_stream_sources_two_streams,
);

fn origin(name: &str, subjects: &str) -> stream::Config {
    stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        ..Default::default()
    }
}

fn mirror_of(name: &str, source: stream::Source) -> stream::Config {
    stream::Config {
        name: name.into(),
        mirror: Some(source),
        ..Default::default()
    }
}

fn source(name: &str) -> stream::Source {
    stream::Source {
        name: name.into(),
        ..Default::default()
    }
}

/// The stream's info as raw JSON (from its leader).
async fn info_json(client: &async_nats::Client, name: &str) -> Value {
    let subject = format!("$JS.API.STREAM.INFO.{name}");
    let reply = within("stream info", client.request(subject, "".into()))
        .await
        .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

/// How long [`wait_for_state`] waits: a copy that catches up after every node of a cluster
/// restarted (an election per group first) takes longer than one request's [`common::WAIT`].
const CATCH_UP: Duration = Duration::from_secs(30);

/// Waits until stream `name` holds `messages` messages up to sequence `last_seq`, polling its
/// info (a request that gets no answer within a second, while the stream's group elects after
/// a restart, is asked again), for at most [`CATCH_UP`].
async fn wait_for_state(
    client: &async_nats::Client,
    name: &str,
    messages: u64,
    last_seq: u64,
) -> Value {
    let subject = format!("$JS.API.STREAM.INFO.{name}");
    let polling = async {
        loop {
            let request = client.request(subject.clone(), "".into());
            if let Ok(Ok(reply)) = tokio::time::timeout(Duration::from_secs(1), request).await {
                let info: Value = serde_json::from_slice(&reply.payload).unwrap();
                if info["state"]["messages"] == messages && info["state"]["last_seq"] == last_seq {
                    return info;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(CATCH_UP, polling)
        .await
        .unwrap_or_else(|_| panic!("{name} never held {messages} up to {last_seq}"))
}

async fn get(js: &jetstream::Context, stream: &str, seq: u64) -> Option<StreamMessage> {
    let stream = js.get_stream(stream).await.expect("stream");
    match stream.get_raw_message(seq).await {
        Ok(msg) => Some(msg),
        Err(err) => {
            eprintln!("{seq} not read: {err:?}");
            None
        }
    }
}

async fn a_mirror_copies_everything_with_the_origins_sequences(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let orders = fx.create_stream(&js, origin("ORDERS", "orders.*")).await;
    publish_ten_orders(&js).await;
    // A gap in the origin is a gap in the mirror.
    assert!(orders.delete_message(4).await.unwrap());
    let mirror = fx
        .create_stream(&js, mirror_of("MIR", source("ORDERS")))
        .await;
    wait_for_state(&client, "MIR", 9, 10).await;
    // The leader notes its progress just after the copies are applied.
    let info = within("the mirror block to report no lag", async {
        loop {
            let info = info_json(&client, "MIR").await;
            if info["mirror"]["lag"] == 0 && info["mirror"]["active"].as_i64() >= Some(0) {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    for seq in [1, 7, 10] {
        let copy = get(&js, "MIR", seq).await.expect("copied");
        let original = get(&js, "ORDERS", seq).await.unwrap();
        assert_eq!(copy.subject, original.subject);
        assert_eq!(copy.payload, original.payload);
        assert_eq!(copy.time, original.time, "a mirror keeps the origin's time");
    }
    assert!(get(&js, "MIR", 4).await.is_none(), "the origin's gap");
    assert_eq!(info["mirror"]["name"], "ORDERS", "{info}");
    assert_eq!(info["mirror"]["lag"], 0, "{info}");
    assert!(info["mirror"]["active"].as_i64().unwrap() >= 0, "{info}");
    assert!(info["mirror"].get("error").is_none(), "{info}");
    // The typed client reads the block too.
    let typed = mirror.clone().info().await.unwrap().clone();
    assert_eq!(typed.mirror.as_ref().unwrap().name, "ORDERS");

    // It follows what comes next.
    publish_acked(&js, "orders.c", "o11").await;
    wait_for_state(&client, "MIR", 10, 11).await;
    assert_eq!(
        get(&js, "MIR", 11).await.unwrap().subject.as_str(),
        "orders.c"
    );
    // A mirror cannot be changed into something else (nats-server's 10055).
    let mut changed = mirror_of("MIR", source("OTHER"));
    changed.num_replicas = fx.stream_replicas();
    let err = js.update_stream(changed).await.unwrap_err();
    assert!(err.to_string().contains("10055"), "{err}");

    // Removing the mirror promotes it to an ordinary stream (nats-server 2.12): it keeps
    // what it copied, takes publishes of its own and copies nothing more.
    let promoted = stream::Config {
        subjects: vec!["mir.*".into()],
        num_replicas: fx.stream_replicas(),
        ..origin("MIR", "mir.*")
    };
    let info = within("the promotion", js.update_stream(promoted))
        .await
        .expect("a mirror can be promoted");
    assert!(info.config.mirror.is_none());
    fx.wait_until_known_everywhere("mir.x").await;
    publish_acked(&js, "orders.d", "o12").await;
    let own = publish_acked(&js, "mir.x", "m12").await;
    assert_eq!(own.sequence, 12, "after the 11 copies, and no copy of o12");
    publish_acked(&js, "orders.e", "o13").await;
    assert_eq!(publish_acked(&js, "mir.y", "m13").await.sequence, 13);
    let info = wait_for_state(&client, "MIR", 12, 13).await;
    assert!(info.get("mirror").is_none(), "{info}");
    assert_eq!(get(&js, "MIR", 12).await.unwrap().subject.as_str(), "mir.x");
    fx.shutdown().await;
}

async fn a_mirror_from_a_start_sequence_filtered(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, origin("ORDERS", "orders.*")).await;
    publish_ten_orders(&js).await;
    let from_five_b = stream::Source {
        name: "ORDERS".into(),
        start_sequence: Some(5),
        filter_subject: Some("orders.b".into()),
        ..Default::default()
    };
    fx.create_stream(&js, mirror_of("MB", from_five_b)).await;
    // orders.b at 6, 8 and 10.
    let info = wait_for_state(&client, "MB", 3, 10).await;
    assert_eq!(info["state"]["first_seq"], 6, "{info}");
    assert_eq!(info["mirror"]["filter_subject"], "orders.b", "{info}");
    assert_eq!(&get(&js, "MB", 8).await.unwrap().payload[..], &b"o8"[..]);
    // With a transform: stored under the new subject.
    let transformed = stream::Source {
        name: "ORDERS".into(),
        subject_transforms: vec![stream::SubjectTransform {
            source: "orders.a".into(),
            destination: "copy.a".into(),
        }],
        ..Default::default()
    };
    fx.create_stream(&js, mirror_of("MT", transformed)).await;
    wait_for_state(&client, "MT", 5, 9).await;
    assert_eq!(get(&js, "MT", 9).await.unwrap().subject.as_str(), "copy.a");
    fx.shutdown().await;
}

/// Publishes message `id` to `orders.new` until acknowledged (dedup by id on retries).
async fn publish_order(js: &jetstream::Context, id: u64) {
    publish_deduplicated(js, "orders.new", format!("m{id}"), format!("order {id}")).await;
}

async fn a_mirror_loses_and_duplicates_nothing_across_leader_changes_and_restarts(
    mut fx: JsFixture,
) {
    let js = fx.js().await;
    fx.create_stream(&js, origin("ORDERS", "orders.*")).await;
    fx.create_stream(&js, mirror_of("MIR", source("ORDERS")))
        .await;
    for id in 1..=40 {
        publish_order(&js, id).await;
    }
    if fx.topology() == Topology::R3 {
        // The mirror's leader changes while it copies and the origin takes more.
        let client = fx.client().await;
        let publishing = async {
            for id in 41..=80 {
                publish_order(&js, id).await;
            }
        };
        let (stepped_down, ()) = tokio::join!(step_down_stream(&client, "MIR"), publishing);
        assert!(stepped_down, "the mirror's leader never stepped down");
    } else {
        for id in 41..=80 {
            publish_order(&js, id).await;
        }
    }
    // Every node restarts (the mirror's leader with them) and the origin takes more.
    fx.restart().await;
    let js = fx.js().await;
    for id in 81..=120 {
        publish_order(&js, id).await;
    }
    let client = fx.client().await;
    wait_for_state(&client, "MIR", 120, 120).await;
    let mut seen = BTreeSet::new();
    for seq in 1..=120 {
        let msg = get(&js, "MIR", seq).await.expect("copied");
        assert_eq!(&msg.payload[..], format!("order {seq}").as_bytes() as &[u8]);
        assert!(seen.insert(msg.payload.clone()), "a duplicate at {seq}");
    }
    fx.shutdown().await;
}

async fn a_stream_sources_two_streams(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, origin("A", "a.*")).await;
    fx.create_stream(&js, origin("B", "b.*")).await;
    for i in 1..=5 {
        publish_acked(&js, "a.x", format!("a{i}")).await;
    }
    for i in 1..=3 {
        publish_acked(&js, "b.x", format!("bx{i}")).await;
        publish_acked(&js, "b.y", format!("by{i}")).await;
    }
    let config = stream::Config {
        name: "ALL".into(),
        sources: Some(vec![
            source("A"),
            stream::Source {
                name: "B".into(),
                filter_subject: Some("b.x".into()),
                ..Default::default()
            },
        ]),
        ..Default::default()
    };
    fx.create_stream(&js, config).await;
    let info = wait_for_state(&client, "ALL", 8, 8).await;
    let mut from_a = Vec::new();
    let mut from_b = Vec::new();
    for seq in 1..=8 {
        let msg = get(&js, "ALL", seq).await.unwrap();
        let name: async_nats::HeaderName = "Nats-Stream-Source".parse().unwrap();
        let header = msg
            .headers
            .get(name)
            .map(|v| v.to_string())
            .expect("Nats-Stream-Source");
        let payload = String::from_utf8(msg.payload.to_vec()).unwrap();
        if msg.subject.as_str() == "a.x" {
            from_a.push((payload, header));
        } else {
            assert_eq!(msg.subject.as_str(), "b.x", "filtered");
            from_b.push((payload, header));
        }
    }
    // Each source in its own order, with nats-server's header.
    assert_eq!(
        from_a,
        (1..=5)
            .map(|i| (format!("a{i}"), format!("A {i} > >")))
            .collect::<Vec<_>>()
    );
    assert_eq!(
        from_b,
        (1..=3)
            .map(|i| (format!("bx{i}"), format!("B {} b.x >", 2 * i - 1)))
            .collect::<Vec<_>>()
    );
    let sources = info["sources"].as_array().expect("sources block");
    let names: Vec<&str> = sources
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["A", "B"], "{info}");
    assert_eq!(sources[1]["filter_subject"], "b.x", "{info}");
    let info = within("the sources blocks to report no lag", async {
        loop {
            let info = info_json(&client, "ALL").await;
            let caught_up = info["sources"].as_array().is_some_and(|all| {
                all.iter()
                    .all(|s| s["lag"] == 0 && s["active"].as_i64() >= Some(0))
            });
            if caught_up {
                return info;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(info["sources"].as_array().unwrap().len(), 2, "{info}");
    // More on A arrives too.
    publish_acked(&js, "a.x", "a6").await;
    wait_for_state(&client, "ALL", 9, 9).await;
    fx.shutdown().await;
}

/// Publishes `o1`..`o10` to ORDERS, odd ones on `orders.a`, even ones on `orders.b`.
async fn publish_ten_orders(js: &jetstream::Context) {
    for i in 1..=10 {
        let subject = if i % 2 == 0 { "orders.b" } else { "orders.a" };
        publish_acked(js, subject, format!("o{i}")).await;
    }
}
