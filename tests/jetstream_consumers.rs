//! JetStream consumers through async-nats's JetStream API: create (idempotent, strict,
//! ephemeral with a generated name, filters outside the stream's subjects), info numbers, pull fetches and batches with acks,
//! double acks, NAK and ack-wait redelivery, no_wait and expiry, names/list/delete,
//! inactive ephemerals, push delivery with idle heartbeats, and leader stepdown refused
//! without a cluster. Every scenario but the last runs on one node (R1) and on a three-node
//! cluster with three replicas (R3), see `common::fixture`.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream, AckKind};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::jetstream::pull_until_waiting;
use common::within;
use futures::StreamExt;

on_r1_and_r3!(
    create_info_and_idempotence,
    fetch_ack_and_double_ack,
    waiting_batch_gets_new_messages_and_expires,
    nak_and_ack_wait_redeliver,
    names_list_delete_and_ephemerals,
    push_consumer_delivers_with_heartbeats,
    pull_statuses_on_the_wire,
    consume_many_with_heartbeats,
    pull_statuses_as_nats_server_sends_them,
    shutdown_ends_waiting_pull_requests,
);

async fn orders(fx: &JsFixture, js: &jetstream::Context, messages: u64) -> stream::Stream {
    let stream = fx
        .get_or_create_stream(
            js,
            stream::Config {
                name: "ORDERS".into(),
                subjects: vec!["orders.*".into()],
                ..Default::default()
            },
        )
        .await;
    for i in 1..=messages {
        js.publish(format!("orders.{}", i % 3), format!("order {i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    stream
}

fn durable(name: &str) -> consumer::pull::Config {
    consumer::pull::Config {
        durable_name: Some(name.into()),
        ack_policy: consumer::AckPolicy::Explicit,
        ..Default::default()
    }
}

async fn create_info_and_idempotence(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 4).await;

    let mut consumer = stream.create_consumer(durable("proc")).await.unwrap();
    let info = consumer.info().await.unwrap().clone();
    assert_eq!(info.name, "proc");
    assert_eq!(info.stream_name, "ORDERS");
    assert_eq!(info.num_pending, 4);
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.delivered.consumer_sequence, 0);
    assert_eq!(info.config.ack_wait, Duration::from_secs(30));
    assert_eq!(info.config.max_ack_pending, 1000);

    // The same config again is fine, also with action "create"; a different one is not.
    stream.create_consumer(durable("proc")).await.unwrap();
    stream
        .create_consumer_strict(durable("proc"))
        .await
        .unwrap();
    let mut different = durable("proc");
    different.description = Some("changed".into());
    let err = stream.create_consumer_strict(different).await.unwrap_err();
    assert!(err.to_string().contains("consumer already exists"), "{err}");
    // Immutable fields cannot change.
    let mut ack_all = durable("proc");
    ack_all.ack_policy = consumer::AckPolicy::All;
    let err = stream.create_consumer(ack_all).await.unwrap_err();
    assert!(
        err.to_string().contains("ack policy can not be updated"),
        "{err}"
    );

    // Filters outside the stream's subjects are taken and can be changed, as nats-server
    // 2.15 takes them (async-nats's own `update_consumer` test).
    let filtered = |filters: &[&str]| consumer::pull::Config {
        name: Some("outside".into()),
        filter_subjects: filters.iter().map(|f| f.to_string()).collect(),
        ..Default::default()
    };
    stream
        .create_consumer(filtered(&["one", "two"]))
        .await
        .unwrap();
    let updated = stream.create_consumer(filtered(&["one", "orders.1"])).await;
    let mut updated = updated.expect("filters updated");
    let info = updated.info().await.unwrap();
    assert_eq!(info.config.filter_subjects, vec!["one", "orders.1"]);
    assert_eq!(info.num_pending, 2, "orders.1 holds two of the four");

    let err = stream.consumer_info("missing").await.unwrap_err();
    assert!(err.to_string().contains("consumer not found"), "{err}");
    let err = js.get_stream("NOPE").await.map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("stream not found"), "{err}");
}

async fn fetch_ack_and_double_ack(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 5).await;
    let consumer = stream.create_consumer(durable("proc")).await.unwrap();

    let mut batch = consumer.fetch().max_messages(3).messages().await.unwrap();
    let mut seen = Vec::new();
    while let Some(msg) = within("fetch", batch.next()).await {
        let msg = msg.unwrap();
        let info = msg.info().unwrap();
        assert_eq!(info.delivered, 1);
        seen.push((info.stream_sequence, info.consumer_sequence, info.pending));
        assert_eq!(
            msg.subject.as_str(),
            format!("orders.{}", info.stream_sequence % 3)
        );
        msg.double_ack().await.unwrap();
    }
    assert_eq!(seen, vec![(1, 1, 4), (2, 2, 3), (3, 3, 2)]);

    let info = stream.consumer_info("proc").await.unwrap();
    assert_eq!(info.ack_floor.stream_sequence, 3);
    assert_eq!(info.delivered.stream_sequence, 3);
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.num_pending, 2);

    // The rest, then nothing: a no_wait fetch ends at once.
    let mut rest = consumer.fetch().max_messages(10).messages().await.unwrap();
    let mut count = 0;
    while let Some(msg) = within("fetch rest", rest.next()).await {
        msg.unwrap().ack().await.unwrap();
        count += 1;
    }
    assert_eq!(count, 2);
    let mut empty = consumer.fetch().max_messages(10).messages().await.unwrap();
    assert!(within("empty fetch", empty.next()).await.is_none());
}

async fn waiting_batch_gets_new_messages_and_expires(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 0).await;
    let consumer = stream.create_consumer(durable("proc")).await.unwrap();

    let mut batch = consumer
        .batch()
        .max_messages(2)
        .expires(Duration::from_secs(5))
        .messages()
        .await
        .unwrap();
    js.publish("orders.late", "late".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let msg = within("waiting batch", batch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msg.payload.as_ref(), b"late");

    // A request with a short expiry ends (408) without messages.
    let started = std::time::Instant::now();
    let mut short = consumer
        .batch()
        .max_messages(1)
        .expires(Duration::from_millis(300))
        .messages()
        .await
        .unwrap();
    assert!(within("expiry", short.next()).await.is_none());
    assert!(started.elapsed() >= Duration::from_millis(250));
}

async fn nak_and_ack_wait_redeliver(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 1).await;
    let mut config = durable("proc");
    config.ack_wait = Duration::from_millis(500);
    let consumer = stream.create_consumer(config).await.unwrap();

    let next = || async {
        let mut batch = consumer
            .batch()
            .max_messages(1)
            .expires(Duration::from_secs(3))
            .messages()
            .await
            .unwrap();
        within("delivery", batch.next()).await.unwrap().unwrap()
    };
    let first = next().await;
    assert_eq!(first.info().unwrap().delivered, 1);
    first.ack_with(AckKind::Nak(None)).await.unwrap();
    let second = next().await;
    assert_eq!(second.info().unwrap().delivered, 2);
    assert_eq!(second.info().unwrap().stream_sequence, 1);
    // Not acked: back after ack_wait.
    let third = next().await;
    assert_eq!(third.info().unwrap().delivered, 3);
    assert_eq!(third.info().unwrap().consumer_sequence, 3);
    third.double_ack().await.unwrap();
    let info = stream.consumer_info("proc").await.unwrap();
    assert_eq!(info.num_ack_pending, 0);
    assert_eq!(info.ack_floor.stream_sequence, 1);
}

async fn names_list_delete_and_ephemerals(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 2).await;
    for name in ["b", "a"] {
        stream.create_consumer(durable(name)).await.unwrap();
    }
    let ephemeral = stream
        .create_consumer(consumer::pull::Config {
            inactive_threshold: Duration::from_millis(300),
            ..Default::default()
        })
        .await
        .unwrap();
    let generated = ephemeral.cached_info().name.clone();
    assert_eq!(generated.len(), 8, "{generated}");

    let mut names: Vec<String> = stream.consumer_names().map(|n| n.unwrap()).collect().await;
    names.sort();
    let mut expected = vec!["a".to_string(), "b".to_string(), generated.clone()];
    expected.sort();
    assert_eq!(names, expected);
    let infos: Vec<_> = stream.consumers().map(|i| i.unwrap()).collect().await;
    assert_eq!(infos.len(), 3);
    assert!(infos.iter().all(|i| i.num_pending == 2));

    assert!(stream.delete_consumer("a").await.unwrap().success);
    let Err(err) = stream.delete_consumer("a").await else {
        panic!("second delete succeeded");
    };
    assert!(err.to_string().contains("consumer not found"), "{err}");

    // The ephemeral goes away once nobody pulls for its inactive threshold.
    within("ephemeral cleanup", async {
        while stream.consumer_info(&generated).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

async fn push_consumer_delivers_with_heartbeats(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = orders(&fx, &js, 3).await;
    let deliver = client.new_inbox();
    let push = stream
        .create_consumer(consumer::push::Config {
            durable_name: Some("pusher".into()),
            deliver_subject: deliver.clone(),
            ack_policy: consumer::AckPolicy::Explicit,
            idle_heartbeat: Duration::from_millis(200),
            flow_control: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut messages = push.messages().await.unwrap();
    for seq in 1..=3u64 {
        let msg = within("push delivery", messages.next())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(msg.info().unwrap().stream_sequence, seq);
        msg.ack().await.unwrap();
    }
    js.publish("orders.more", "more".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let msg = within("push delivery of a new message", messages.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(msg.payload.as_ref(), b"more");
    msg.double_ack().await.unwrap();

    // Heartbeats while idle, visible on a raw subscription.
    let mut raw = client.subscribe(deliver).await.unwrap();
    let heartbeat = within("idle heartbeat", raw.next()).await.unwrap();
    assert_eq!(
        heartbeat.status,
        Some(async_nats::StatusCode::IDLE_HEARTBEAT)
    );
    let info = stream.consumer_info("pusher").await.unwrap();
    assert!(info.push_bound);
    assert_eq!(info.ack_floor.stream_sequence, 4);
}

async fn pull_statuses_on_the_wire(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = orders(&fx, &js, 0).await;
    let mut config = durable("proc");
    config.max_waiting = 1;
    stream.create_consumer(config).await.unwrap();
    let next = "$JS.API.CONSUMER.MSG.NEXT.ORDERS.proc";
    let status_of =
        |msg: &async_nats::Message| (msg.status.map(|s| s.as_u16()), msg.description.clone());

    // no_wait with nothing there: 404 at once.
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let body = r#"{"batch":1,"no_wait":true}"#;
    client
        .publish_with_reply(next, inbox.clone(), body.into())
        .await
        .unwrap();
    let reply = within("404", replies.next()).await.unwrap();
    assert_eq!(status_of(&reply), (Some(404), Some("No Messages".into())));

    // max_waiting 1: a second waiting request is refused; deleting the consumer ends the first.
    let body = r#"{"batch":1,"expires":30000000000}"#;
    client
        .publish_with_reply(next, inbox.clone(), body.into())
        .await
        .unwrap();
    client
        .publish_with_reply(next, inbox.clone(), body.into())
        .await
        .unwrap();
    let reply = within("409 max waiting", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(409), Some("Exceeded MaxWaiting".into()))
    );
    assert_eq!(stream.consumer_info("proc").await.unwrap().num_waiting, 1);
    stream.delete_consumer("proc").await.unwrap();
    let reply = within("409 deleted", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(409), Some("Consumer Deleted".into()))
    );

    // Pulling from a consumer that does not exist: nobody answers (503).
    client
        .publish_with_reply(next, inbox.clone(), body.into())
        .await
        .unwrap();
    let reply = within("503", replies.next()).await.unwrap();
    assert_eq!(reply.status.map(|s| s.as_u16()), Some(503));
}

async fn consume_many_with_heartbeats(fx: JsFixture) {
    let js = fx.js().await;
    let stream = orders(&fx, &js, 0).await;
    let publishes: Vec<_> = futures::future::join_all(
        (0..2000).map(|i| js.publish(format!("orders.{}", i % 3), "x".into())),
    )
    .await;
    for ack in publishes {
        ack.unwrap().await.unwrap();
    }
    let consumer = stream.create_consumer(durable("proc")).await.unwrap();
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(300)
        .heartbeat(Duration::from_millis(200))
        .expires(Duration::from_secs(2))
        .messages()
        .await
        .unwrap();
    for expected in 1..=2000u64 {
        let msg = within("consume", messages.next()).await.unwrap().unwrap();
        assert_eq!(msg.info().unwrap().stream_sequence, expected);
        msg.ack().await.unwrap();
    }
    // Idle for several heartbeat intervals and request expiries: no error surfaces.
    let idle = tokio::time::timeout(Duration::from_millis(2500), messages.next()).await;
    assert!(idle.is_err(), "unexpected item while idle: {:?}", idle.ok());
    within("ack floor", async {
        loop {
            let info = stream.consumer_info("proc").await.unwrap();
            if info.ack_floor.stream_sequence == 2000 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}

/// The statuses nats-server 2.15 sends on a pull request's inbox (observed on the wire):
/// `409 Batch Completed` and `409 Message Size Exceeds MaxBytes` with the pending headers,
/// `408 Requests Pending` for a `no_wait` request the waiting ones already cover, idle
/// heartbeats then `408 Request Timeout` with what was still wanted, and no `409 Exceeded
/// MaxWaiting` for a request that asked for heartbeats.
async fn pull_statuses_as_nats_server_sends_them(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = orders(&fx, &js, 3).await;
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let pull = |consumer: &str, body: &'static str| {
        let (client, inbox) = (client.clone(), inbox.clone());
        let subject = format!("$JS.API.CONSUMER.MSG.NEXT.ORDERS.{consumer}");
        async move {
            client
                .publish_with_reply(subject, inbox, body.into())
                .await
                .unwrap()
        }
    };
    let header = |msg: &async_nats::Message, name: &str| {
        // By text: async-nats keys well-known names (`Nats-Last-Stream`…) differently.
        msg.headers.as_ref().and_then(|headers| {
            headers
                .iter()
                .find(|(key, _)| key.to_string().eq_ignore_ascii_case(name))
                .and_then(|(_, values)| values.first())
                .map(|value| value.to_string())
        })
    };
    let status_of = |msg: &async_nats::Message| {
        (
            msg.status.map(|s| s.as_u16()),
            msg.description.clone().unwrap_or_default(),
            header(msg, "Nats-Pending-Messages"),
            header(msg, "Nats-Pending-Bytes"),
        )
    };
    let some = |s: &str| Some(s.to_string());

    stream.create_consumer(durable("c")).await.unwrap();
    // A byte budget whose batch fills first: the message, then what was left.
    pull("c", r#"{"batch":1,"max_bytes":10000,"expires":2000000000}"#).await;
    let msg = within("message", replies.next()).await.unwrap();
    assert!(msg.status.is_none());
    let charged =
        (msg.subject.len() + msg.reply.as_ref().unwrap().len() + msg.payload.len()) as i64;
    let reply = within("batch completed", replies.next()).await.unwrap();
    let left = (10000 - charged).to_string();
    assert_eq!(
        status_of(&reply),
        (Some(409), "Batch Completed".into(), some("0"), Some(left))
    );
    // The next message does not fit the budget.
    pull("c", r#"{"batch":5,"max_bytes":20,"expires":2000000000}"#).await;
    let reply = within("too big", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (
            Some(409),
            "Message Size Exceeds MaxBytes".into(),
            some("5"),
            some("20")
        )
    );

    // Two messages pending, a waiting request for 10 of them: a no_wait request is told.
    let mut limited = durable("d");
    limited.max_ack_pending = 1;
    stream.create_consumer(limited).await.unwrap();
    pull("d", r#"{"batch":1}"#).await;
    assert!(within("d first", replies.next())
        .await
        .unwrap()
        .status
        .is_none());
    // Sent back to back: the server keeps a connection's pull requests in order.
    pull("d", r#"{"batch":10,"expires":5000000000}"#).await;
    pull("d", r#"{"batch":1,"no_wait":true}"#).await;
    let reply = within("requests pending", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(408), "Requests Pending".into(), None, None)
    );

    // Nothing to deliver: idle heartbeats, then the timeout with what is still wanted.
    let mut fresh = durable("e");
    fresh.deliver_policy = consumer::DeliverPolicy::New;
    stream.create_consumer(fresh).await.unwrap();
    pull(
        "e",
        r#"{"batch":3,"expires":1200000000,"idle_heartbeat":500000000,"max_bytes":1000}"#,
    )
    .await;
    for _ in 0..2 {
        let reply = within("heartbeat", replies.next()).await.unwrap();
        assert_eq!(reply.status.map(|s| s.as_u16()), Some(100));
        assert_eq!(reply.description.as_deref(), Some("Idle Heartbeat"));
        assert_eq!(header(&reply, "Nats-Last-Consumer"), some("0"));
        assert_eq!(header(&reply, "Nats-Last-Stream"), some("3"));
    }
    let reply = within("request timeout", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(408), "Request Timeout".into(), some("3"), some("1000"))
    );

    // max_waiting 1: a request with heartbeats is refused silently, one without is told.
    let mut one = durable("f");
    one.deliver_policy = consumer::DeliverPolicy::New;
    one.max_waiting = 1;
    stream.create_consumer(one).await.unwrap();
    pull("f", r#"{"batch":1,"expires":3000000000}"#).await;
    pull(
        "f",
        r#"{"batch":1,"expires":3000000000,"idle_heartbeat":1000000000}"#,
    )
    .await;
    pull("f", r#"{"batch":1,"expires":3000000000}"#).await;
    let reply = within("max waiting", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(409), "Exceeded MaxWaiting".into(), None, None)
    );
    stream.delete_consumer("f").await.unwrap();
    let reply = within("deleted", replies.next()).await.unwrap();
    assert_eq!(
        status_of(&reply),
        (Some(409), "Consumer Deleted".into(), None, None)
    );
    // Only one of each: the silent refusal sent nothing.
    let extra = tokio::time::timeout(Duration::from_millis(200), replies.next()).await;
    assert!(extra.is_err(), "unexpected {:?}", extra.ok());
}

/// A server that stops tells waiting pull requests why (`409 Server Shutdown` with the
/// pending headers) before it closes their connection. On R3 the server that stops is the
/// stream's leader, where the request waits; the client may be on another node.
async fn shutdown_ends_waiting_pull_requests(mut fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = orders(&fx, &js, 0).await;
    stream.create_consumer(durable("proc")).await.unwrap();
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let body = r#"{"batch":7,"expires":30000000000}"#;
    pull_until_waiting(&client, &stream, "proc", inbox, body, 1).await;
    fx.stop_leader_of("ORDERS").await;
    let reply = within("server shutdown", replies.next()).await.unwrap();
    assert_eq!(reply.status.map(|s| s.as_u16()), Some(409));
    assert_eq!(reply.description.as_deref(), Some("Server Shutdown"));
    let pending = reply.headers.as_ref().unwrap();
    assert_eq!(pending.get("Nats-Pending-Messages").unwrap().as_str(), "7");
    assert_eq!(pending.get("Nats-Pending-Bytes").unwrap().as_str(), "0");
}

/// R1 only: the answer of a standalone server (a cluster steps down, `cluster_stepdown.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_stepdown_needs_a_cluster() {
    let fx = JsFixture::start(Topology::R1).await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = orders(&fx, &js, 1).await;
    stream.create_consumer(durable("proc")).await.unwrap();
    // As a standalone nats-server: 10010 before looking at the stream or consumer, for the
    // consumer's and the stream's stepdown.
    for (subject, kind) in [
        ("$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.proc", "consumer"),
        (
            "$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.missing",
            "consumer",
        ),
        ("$JS.API.CONSUMER.LEADER.STEPDOWN.MISSING.proc", "consumer"),
        ("$JS.API.STREAM.LEADER.STEPDOWN.ORDERS", "stream"),
        ("$JS.API.STREAM.LEADER.STEPDOWN.MISSING", "stream"),
    ] {
        let reply = within(subject, client.request(subject, "".into()))
            .await
            .unwrap();
        let reply: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
        assert_eq!(
            reply,
            serde_json::json!({
                "type": format!("io.nats.jetstream.api.v1.{kind}_leader_stepdown_response"),
                "error": {
                    "code": 503,
                    "err_code": 10010,
                    "description": "JetStream clustering support required"
                }
            }),
            "{subject}"
        );
    }
    fx.shutdown().await;
}
