//! Streams whose messages do not fit the message block cache: every node runs with a 1 MiB
//! cache and each scenario stores a few MiB, so bodies are evicted and read back from sled.
//! Consumers (pull, push, filtered), direct and message gets, purges, limits, a restart and a
//! failover must answer exactly as with a cache that holds everything: every body checked
//! against what was published. Each scenario also checks that the cache was too small
//! (blocks were evicted), so it can fail if bodies stopped going through it.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::within;
use futures::StreamExt;

on_r1_and_r3!(cache_bytes: crate::CACHE_BYTES;
    consumers_read_every_body,
    direct_and_message_gets_read_old_bodies,
    purges_leave_the_rest_readable,
    limits_remove_and_keep_bodies_right,
    restart_and_failover_serve_every_body,
);

const CACHE_BYTES: u64 = 1 << 20;
/// 3,000 messages of 1 KiB: three times the cache.
const MESSAGES: u64 = 3_000;
const SUBJECTS: u64 = 3;

/// The payload of message `i` (1-based): its number, padded to 1 KiB.
fn payload(i: u64) -> Vec<u8> {
    let mut body = format!("message {i:06} ").into_bytes();
    body.resize(1024, b'a' + (i % 26) as u8);
    body
}

fn subject(i: u64) -> String {
    format!("orders.{}", i % SUBJECTS)
}

/// The message number a payload carries.
fn number(payload: &[u8]) -> u64 {
    std::str::from_utf8(&payload[8..14])
        .unwrap()
        .parse()
        .unwrap()
}

async fn orders(fx: &JsFixture, js: &jetstream::Context, config: stream::Config) -> stream::Stream {
    fx.create_stream(
        js,
        stream::Config {
            name: "ORDERS".into(),
            subjects: vec!["orders.*".into()],
            allow_direct: true,
            ..config
        },
    )
    .await
}

/// Publishes messages `from..=to` (pipelined, every PubAck awaited).
async fn publish(js: &jetstream::Context, from: u64, to: u64) {
    for chunk in (from..=to).collect::<Vec<_>>().chunks(500) {
        let mut acks = Vec::new();
        for &i in chunk {
            let ack = within("publish", js.publish(subject(i), payload(i).into()))
                .await
                .unwrap();
            acks.push(ack);
        }
        for (ack, &i) in acks.into_iter().zip(chunk) {
            let ack = within("PubAck", std::future::IntoFuture::into_future(ack))
                .await
                .unwrap();
            assert_eq!(ack.sequence, i, "sequences follow the message numbers");
        }
    }
}

fn assert_evicted(fx: &JsFixture) {
    let caches = fx.block_caches();
    assert!(
        caches.iter().all(|cache| cache.bytes <= CACHE_BYTES),
        "every cache within its budget: {caches:?}"
    );
    assert!(
        caches.iter().any(|cache| cache.evictions > 0),
        "the stream did not fit the cache: {caches:?}"
    );
}

/// Pulls `count` messages through `consumer` and returns (stream sequence, payload number,
/// subject) for each, in order.
async fn pull_all(
    consumer: &consumer::Consumer<consumer::pull::Config>,
    count: usize,
) -> Vec<(u64, u64, String)> {
    let mut got = Vec::new();
    while got.len() < count {
        let mut batch = within(
            "fetch",
            consumer
                .fetch()
                .max_messages((count - got.len()).min(500))
                .expires(Duration::from_secs(5))
                .messages(),
        )
        .await
        .unwrap();
        let before = got.len();
        while let Some(msg) = within("message", batch.next()).await {
            let msg = msg.unwrap();
            let seq = msg.info().unwrap().stream_sequence;
            got.push((seq, number(&msg.payload), msg.subject.to_string()));
            msg.ack().await.unwrap();
        }
        assert!(got.len() > before, "a fetch delivered nothing");
    }
    got
}

fn check(got: &[(u64, u64, String)], expected: impl IntoIterator<Item = u64>) {
    let expected: Vec<(u64, u64, String)> =
        expected.into_iter().map(|i| (i, i, subject(i))).collect();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "bodies match their sequences");
}

async fn consumers_read_every_body(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, Default::default()).await;
    publish(&js, 1, MESSAGES).await;

    let all = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("all".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    check(&pull_all(&all, MESSAGES as usize).await, 1..=MESSAGES);

    let filtered = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("one".into()),
            filter_subject: "orders.1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let ones = pull_all(&filtered, (MESSAGES / SUBJECTS) as usize).await;
    check(&ones, (1..=MESSAGES).filter(|i| i % SUBJECTS == 1));

    // Push: every body, in order, to a deliver subject.
    let client = fx.client().await;
    let inbox = client.new_inbox();
    let mut pushed = client.subscribe(inbox.clone()).await.unwrap();
    stream
        .create_consumer(consumer::push::Config {
            durable_name: Some("push".into()),
            deliver_subject: inbox,
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < MESSAGES as usize {
        let msg = within("pushed message", pushed.next()).await.unwrap();
        if msg.status.is_some() {
            continue;
        }
        got.push(number(&msg.payload));
    }
    assert!(
        got == (1..=MESSAGES).collect::<Vec<_>>(),
        "push bodies in order"
    );
    assert_evicted(&fx);
    fx.shutdown().await;
}

async fn direct_and_message_gets_read_old_bodies(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, Default::default()).await;
    publish(&js, 1, MESSAGES).await;
    for seq in [1, 2, MESSAGES / 2, MESSAGES] {
        let direct = stream.direct_get(seq).await.unwrap();
        assert_eq!(number(&direct.payload), seq);
        assert_eq!(direct.subject.as_str(), subject(seq));
        let raw = stream.get_raw_message(seq).await.unwrap();
        assert_eq!(number(&raw.payload), seq);
    }
    for s in 0..SUBJECTS {
        let last = stream
            .direct_get_last_for_subject(format!("orders.{s}"))
            .await
            .unwrap();
        let expected = (1..=MESSAGES).rev().find(|i| i % SUBJECTS == s).unwrap();
        assert_eq!(number(&last.payload), expected);
        let first = stream
            .direct_get_next_for_subject(format!("orders.{s}"), None)
            .await
            .unwrap();
        let expected = (1..=MESSAGES).find(|i| i % SUBJECTS == s).unwrap();
        assert_eq!(number(&first.payload), expected);
    }
    assert_evicted(&fx);
    fx.shutdown().await;
}

async fn purges_leave_the_rest_readable(fx: JsFixture) {
    let js = fx.js().await;
    let mut stream = orders(&fx, &js, Default::default()).await;
    publish(&js, 1, MESSAGES).await;
    let purged = stream.purge().filter("orders.0").await.unwrap();
    assert_eq!(purged.purged, MESSAGES / SUBJECTS);
    assert!(stream.get_raw_message(3).await.is_err(), "purged");
    assert_eq!(number(&stream.get_raw_message(1).await.unwrap().payload), 1);
    // Keep the newest 100 (of orders.1 and orders.2).
    stream.purge().keep(100).await.unwrap();
    let kept: Vec<u64> = (1..=MESSAGES)
        .filter(|i| i % SUBJECTS != 0)
        .skip((MESSAGES - MESSAGES / SUBJECTS - 100) as usize)
        .collect();
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 100);
    assert_eq!(info.state.first_sequence, kept[0]);
    let reader = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("kept".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    check(&pull_all(&reader, 100).await, kept);
    stream.purge().await.unwrap();
    assert_eq!(stream.info().await.unwrap().state.messages, 0);
    publish(&js, MESSAGES + 1, MESSAGES + 10).await;
    let raw = stream.get_raw_message(MESSAGES + 5).await.unwrap();
    assert_eq!(number(&raw.payload), MESSAGES + 5);
    assert_evicted(&fx);
    fx.shutdown().await;
}

async fn limits_remove_and_keep_bodies_right(fx: JsFixture) {
    let js = fx.js().await;
    // max_msgs: the newest 2,000 stay (more than the cache holds).
    let mut stream = orders(
        &fx,
        &js,
        stream::Config {
            max_messages: 2_000,
            ..Default::default()
        },
    )
    .await;
    publish(&js, 1, MESSAGES).await;
    let info = stream.info().await.unwrap();
    assert_eq!(
        (info.state.messages, info.state.first_sequence),
        (2_000, MESSAGES - 1_999)
    );
    let reader = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("r".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    check(&pull_all(&reader, 2_000).await, MESSAGES - 1_999..=MESSAGES);
    assert_evicted(&fx);
    js.delete_stream("ORDERS").await.unwrap();

    // max_bytes: whole messages up to the limit stay, the newest.
    let mut stream = orders(
        &fx,
        &js,
        stream::Config {
            max_bytes: 1_000_000,
            ..Default::default()
        },
    )
    .await;
    publish(&js, 1, MESSAGES).await;
    let info = stream.info().await.unwrap();
    assert!(info.state.bytes <= 1_000_000 && info.state.messages > 100);
    let first = info.state.first_sequence;
    assert_eq!(first + info.state.messages - 1, MESSAGES);
    assert_eq!(
        number(&stream.get_raw_message(first).await.unwrap().payload),
        first
    );
    assert!(stream.get_raw_message(first - 1).await.is_err());
    js.delete_stream("ORDERS").await.unwrap();

    // max_age: everything expires, and what comes after is readable.
    let stream = orders(
        &fx,
        &js,
        stream::Config {
            max_age: Duration::from_secs(1),
            ..Default::default()
        },
    )
    .await;
    publish(&js, 1, 2_000).await;
    let mut stream_info = stream.clone();
    let mut empty = false;
    for _ in 0..100 {
        if stream_info.info().await.unwrap().state.messages == 0 {
            empty = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(empty, "max_age expired every message");
    publish(&js, 2_001, 2_010).await;
    assert_eq!(
        number(&stream.get_raw_message(2_005).await.unwrap().payload),
        2_005
    );
    fx.shutdown().await;
}

async fn restart_and_failover_serve_every_body(mut fx: JsFixture) {
    let js = fx.js().await;
    orders(&fx, &js, Default::default()).await;
    publish(&js, 1, MESSAGES).await;
    fx.restart().await;
    let js = fx.js().await;
    let stream = js.get_stream("ORDERS").await.unwrap();
    let reader = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("after-restart".into()),
            ack_policy: consumer::AckPolicy::None,
            ..Default::default()
        })
        .await
        .unwrap();
    check(&pull_all(&reader, MESSAGES as usize).await, 1..=MESSAGES);
    assert_evicted(&fx);
    if fx.topology() == Topology::R3 {
        // The leader goes; a follower, whose bodies were never read, serves them all.
        fx.stop_leader_of("ORDERS").await;
        let js = fx.js().await;
        fx.wait_until_served("ORDERS").await;
        let mut stream = None;
        for _ in 0..100 {
            if let Ok(found) = js.get_stream("ORDERS").await {
                stream = Some(found);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let stream = stream.expect("a new leader serves the stream");
        let mut reader = None;
        for _ in 0..100 {
            let created = stream
                .create_consumer(consumer::pull::Config {
                    ack_policy: consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await;
            if let Ok(created) = created {
                reader = Some(created);
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let reader = reader.expect("a consumer on the new leader");
        check(&pull_all(&reader, MESSAGES as usize).await, 1..=MESSAGES);
        let direct = stream.direct_get(1).await.unwrap();
        assert_eq!(number(&direct.payload), 1);
    }
    fx.shutdown().await;
}
