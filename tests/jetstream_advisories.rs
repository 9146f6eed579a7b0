//! JetStream advisories on `$JS.EVENT.ADVISORY.>`, as nats-server publishes them: stream
//! created / updated / deleted, consumer created / deleted, a message naked, terminated (with
//! its reason) and out of deliveries (`max_deliver`), an idle ephemeral consumer deleted, each
//! once and with the typed-event fields (`type`, `id`, `timestamp`). Deleting a stream advises
//! each of its consumers' deletion before the stream's (nats-server's `stream.stop`), once in
//! a cluster too; a purge advises nothing. A consumer with `sample_freq` publishes its acks'
//! latency on `$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>`. The single-stream scenarios run on one node (R1)
//! and on a three-node cluster with three replicas (R3), see `common::fixture`.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream, AckKind};
use common::cluster::TestCluster;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::RETRY_PACE;
use common::within;
use futures::StreamExt;
use serde_json::Value;

on_r1_and_r3!(
    streams_consumers_and_deliveries_are_advised,
    deleting_a_stream_advises_its_consumers_first_and_a_purge_nothing,
    sampled_acks_are_published_as_metrics,
);

/// Subscribes every advisory on a client of the fixture, known on every node before any
/// advisory is published.
async fn subscribe_advisories(fx: &JsFixture) -> (async_nats::Client, async_nats::Subscriber) {
    let client = fx.client().await;
    let advisories = client.subscribe("$JS.EVENT.ADVISORY.>").await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere("$JS.EVENT.ADVISORY.probe")
        .await;
    (client, advisories)
}

/// The next advisory: its subject and JSON body, with the typed-event fields checked.
async fn next(advisories: &mut async_nats::Subscriber) -> (String, Value) {
    let msg = within("an advisory", advisories.next()).await.unwrap();
    let body: Value = serde_json::from_slice(&msg.payload).unwrap();
    let id = body["id"].as_str().expect("an id");
    assert_eq!(id.len(), 22, "{body}");
    let timestamp = body["timestamp"].as_str().expect("a timestamp");
    assert!(timestamp.ends_with('Z'), "{body}");
    (msg.subject.to_string(), body)
}

async fn streams_consumers_and_deliveries_are_advised(fx: JsFixture) {
    let (client, mut advisories) = subscribe_advisories(&fx).await;
    let js = jetstream::new(client.clone());

    let config = fx.replicated(stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.*".into()],
        ..Default::default()
    });
    let stream = fx.create_stream(&js, config.clone()).await;
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.STREAM.CREATED.ORDERS");
    assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.stream_action");
    assert_eq!(
        (&body["stream"], &body["action"]),
        (&"ORDERS".into(), &"create".into())
    );
    // The same create again changes nothing and is not advised.
    js.create_stream(config.clone()).await.unwrap();

    for i in 1..=2 {
        js.publish("orders.new", format!("order {i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("proc".into()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_millis(300),
            max_deliver: 2,
            ..Default::default()
        })
        .await
        .unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.CREATED.ORDERS.proc");
    assert_eq!(
        body["type"],
        "io.nats.jetstream.advisory.v1.consumer_action"
    );
    assert_eq!(body["consumer"], "proc");
    assert_eq!(body["action"], "create");

    // Pulls up to `count` messages, each pull waiting up to 2 s. A pull ended by `409
    // Leadership Change` says nothing about the messages: once a leader serves the stream
    // again it is made again for what it still wanted, as clients re-pull. nats-server sends
    // that status too, to the requests waiting when a consumer's leader changes
    // (`checkPendingRequests`), and on R3 under load a stream leader that hears from no
    // quorum for 750 ms stops serving for a moment (`jetstream::leadership`), ending the
    // requests waiting on it; the 2 s pull below that must stay empty is the most exposed.
    // (A pull made while no node serves the stream is answered by none.)
    let fx = &fx;
    let fetch = |count: usize| {
        let consumer = consumer.clone();
        within("a fetch", async move {
            let mut messages = Vec::new();
            loop {
                let batch = consumer
                    .fetch()
                    .max_messages(count - messages.len())
                    .expires(Duration::from_secs(2))
                    .messages()
                    .await
                    .unwrap();
                let mut interrupted = false;
                for item in batch.collect::<Vec<_>>().await {
                    match item {
                        Ok(msg) => messages.push(msg),
                        Err(error)
                            if error
                                .to_string()
                                .contains("409, Some(\"Leadership Change\")") =>
                        {
                            interrupted = true;
                        }
                        Err(error) => panic!("a fetch failed: {error}"),
                    }
                }
                if !interrupted || messages.len() == count {
                    return messages;
                }
                fx.wait_until_served("ORDERS").await;
            }
        })
    };
    let first = fetch(2).await;
    assert_eq!(first.len(), 2);
    let (one, two) = (&first[0], &first[1]);
    one.ack_with(AckKind::Nak(None)).await.unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.ORDERS.proc");
    assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.nak");
    assert_eq!(
        (
            &body["stream_seq"],
            &body["consumer_seq"],
            &body["deliveries"]
        ),
        (&1.into(), &1.into(), &1.into())
    );

    let reply = two.reply.clone().expect("an ack subject");
    client
        .publish(reply, "+TERM not today".into())
        .await
        .unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(
        subject,
        "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.ORDERS.proc"
    );
    assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.terminated");
    assert_eq!(
        (&body["stream_seq"], &body["reason"]),
        (&2.into(), &"not today".into())
    );

    // Message 1 again (its second and last delivery), left unacknowledged: once its
    // ack_wait is up the consumer retires it, and says so once.
    let again = fetch(1).await;
    let info = again[0].info().unwrap();
    assert_eq!((info.stream_sequence, info.delivered), (1, 2));
    let extra: Vec<_> = fetch(1)
        .await
        .iter()
        .map(|msg| format!("{:?}", msg.info().map(|i| (i.stream_sequence, i.delivered))))
        .collect();
    assert!(extra.is_empty(), "out of deliveries, got {extra:?}");
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(
        subject,
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.ORDERS.proc"
    );
    assert_eq!(body["type"], "io.nats.jetstream.advisory.v1.max_deliver");
    assert_eq!(
        (&body["stream_seq"], &body["deliveries"]),
        (&1.into(), &2.into())
    );

    js.update_stream(stream::Config {
        max_messages: 100,
        ..config
    })
    .await
    .unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.STREAM.UPDATED.ORDERS");
    assert_eq!(body["action"], "modify");

    stream.delete_consumer("proc").await.unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.CONSUMER.DELETED.ORDERS.proc");
    assert_eq!(body["action"], "delete");
    // An ephemeral consumer left idle is deleted by the server, and that is advised too.
    let ephemeral = stream
        .create_consumer(consumer::pull::Config {
            inactive_threshold: Duration::from_millis(300),
            ..Default::default()
        })
        .await
        .unwrap();
    let name = ephemeral.cached_info().name.clone();
    let (subject, _) = next(&mut advisories).await;
    assert_eq!(
        subject,
        format!("$JS.EVENT.ADVISORY.CONSUMER.CREATED.ORDERS.{name}")
    );
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(
        subject,
        format!("$JS.EVENT.ADVISORY.CONSUMER.DELETED.ORDERS.{name}")
    );
    assert_eq!(body["action"], "delete");

    js.delete_stream("ORDERS").await.unwrap();
    let (subject, body) = next(&mut advisories).await;
    assert_eq!(subject, "$JS.EVENT.ADVISORY.STREAM.DELETED.ORDERS");
    assert_eq!(body["action"], "delete");
}

/// Checks a consumer-deleted advisory's subject and body, field by field as nats-server sends
/// it (`JSConsumerActionAdvisory`, no `domain` without one); returns the consumer's name.
fn consumer_deleted(stream: &str, subject: &str, body: &Value) -> String {
    let consumer = body["consumer"].as_str().expect("a consumer").to_owned();
    assert_eq!(
        subject,
        format!("$JS.EVENT.ADVISORY.CONSUMER.DELETED.{stream}.{consumer}")
    );
    let mut fields: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        ["action", "consumer", "id", "stream", "timestamp", "type"]
    );
    assert_eq!(
        body["type"],
        "io.nats.jetstream.advisory.v1.consumer_action"
    );
    assert_eq!(
        (&body["stream"], &body["action"]),
        (&stream.into(), &"delete".into())
    );
    consumer
}

/// The advisories of deleting `stream` with consumers `a` and `b`: each consumer's deletion
/// once (in either order: nats-server walks a map), then the stream's.
async fn expect_stream_deletion(advisories: &mut async_nats::Subscriber, stream: &str) {
    let mut consumers = Vec::new();
    for _ in 0..2 {
        let (subject, body) = next(advisories).await;
        consumers.push(consumer_deleted(stream, &subject, &body));
    }
    consumers.sort();
    assert_eq!(consumers, ["a", "b"]);
    let (subject, body) = next(advisories).await;
    assert_eq!(
        subject,
        format!("$JS.EVENT.ADVISORY.STREAM.DELETED.{stream}")
    );
    assert_eq!(body["action"], "delete");
}

async fn deleting_a_stream_advises_its_consumers_first_and_a_purge_nothing(fx: JsFixture) {
    let (client, mut advisories) = subscribe_advisories(&fx).await;
    let js = jetstream::new(client.clone());

    let stream = fx
        .create_stream(
            &js,
            stream::Config {
                name: "PAYMENTS".into(),
                subjects: vec!["payments.*".into()],
                ..Default::default()
            },
        )
        .await;
    assert_eq!(
        next(&mut advisories).await.0,
        "$JS.EVENT.ADVISORY.STREAM.CREATED.PAYMENTS"
    );
    for name in ["a", "b"] {
        stream
            .create_consumer(consumer::pull::Config {
                durable_name: Some(name.into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(
            next(&mut advisories).await.0,
            format!("$JS.EVENT.ADVISORY.CONSUMER.CREATED.PAYMENTS.{name}")
        );
    }
    js.publish("payments.new", "one".into())
        .await
        .unwrap()
        .await
        .unwrap();
    // A purge is not advised (nats-server's `stream.purge` only moves its consumers on):
    // the next advisory is the marker stream's creation.
    assert_eq!(stream.purge().await.unwrap().purged, 1);
    fx.create_stream(
        &js,
        stream::Config {
            name: "MARK".into(),
            subjects: vec!["mark".into()],
            ..Default::default()
        },
    )
    .await;
    assert_eq!(
        next(&mut advisories).await.0,
        "$JS.EVENT.ADVISORY.STREAM.CREATED.MARK"
    );

    js.delete_stream("PAYMENTS").await.unwrap();
    expect_stream_deletion(&mut advisories, "PAYMENTS").await;
    // Nothing more of it: the next advisory is the marker's deletion.
    js.delete_stream("MARK").await.unwrap();
    assert_eq!(
        next(&mut advisories).await.0,
        "$JS.EVENT.ADVISORY.STREAM.DELETED.MARK"
    );
}

/// Subscribes `subject` on `clients[at]` and waits until a message published there from every
/// node arrives (interest travels each route in order, so what was subscribed before on the
/// same connection is known everywhere too).
async fn await_interest(clients: &[async_nats::Client], at: usize) {
    let probe = format!("probe.{at}");
    let mut sub = clients[at].subscribe(probe.clone()).await.unwrap();
    clients[at].flush().await.unwrap();
    for from in clients {
        within("interest to propagate", async {
            loop {
                from.publish(probe.clone(), "probe".into()).await.unwrap();
                from.flush().await.unwrap();
                let arrived = tokio::time::timeout(RETRY_PACE, sub.next()).await;
                if arrived.is_ok() {
                    return;
                }
            }
        })
        .await;
    }
    // Later probes that were already on their way.
    while tokio::time::timeout(RETRY_PACE, sub.next()).await.is_ok() {}
}

/// Creates `name` (one replica) with the durable pull consumers `consumers`, retried (bounded)
/// as a cluster client does while leaders are being elected.
async fn r1_stream_with(js: &jetstream::Context, name: &str, consumers: &[&str]) {
    let config = stream::Config {
        name: name.into(),
        subjects: vec![format!("{}.*", name.to_lowercase())],
        ..Default::default()
    };
    within("the stream and its consumers", async {
        'attempt: loop {
            let Ok(stream) = js.get_or_create_stream(config.clone()).await else {
                tokio::time::sleep(RETRY_PACE).await;
                continue;
            };
            for &consumer in consumers {
                let config = consumer::pull::Config {
                    durable_name: Some(consumer.into()),
                    ..Default::default()
                };
                if stream
                    .get_or_create_consumer(consumer, config)
                    .await
                    .is_err()
                {
                    tokio::time::sleep(RETRY_PACE).await;
                    continue 'attempt;
                }
            }
            return;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cluster_a_stream_deletion_is_advised_once_by_the_meta_leader() {
    let cluster = TestCluster::start(3);
    let mut clients = Vec::new();
    let mut advisories = Vec::new();
    for i in 0..cluster.size() {
        let client = within("client", async_nats::connect(cluster.url(i)))
            .await
            .expect("client connects");
        advisories.push(
            client
                .subscribe("$JS.EVENT.ADVISORY.*.DELETED.>")
                .await
                .unwrap(),
        );
        clients.push(client);
    }
    for i in 0..cluster.size() {
        await_interest(&clients, i).await;
    }
    let js = jetstream::new(clients[0].clone());
    let meta_leader = cluster.meta_leader();
    // The stream is placed away from the meta leader, which answers STREAM.DELETE: its
    // consumers are learned from the stream's leader before the deletion.
    let mut placed = None;
    for name in ["S1", "S2", "S3"] {
        r1_stream_with(&js, name, &[]).await;
        if cluster.leader_of(name) != meta_leader {
            placed = Some(name);
            break;
        }
    }
    let stream = placed.expect("a stream placed away from the meta leader");
    r1_stream_with(&js, stream, &["a", "b"]).await;

    within("the deletion", js.delete_stream(stream))
        .await
        .unwrap();
    for advisories in &mut advisories {
        expect_stream_deletion(advisories, stream).await;
    }
    // Each once: the next advisory everywhere is the marker's deletion.
    r1_stream_with(&js, "MARK", &[]).await;
    within("the marker's deletion", js.delete_stream("MARK"))
        .await
        .unwrap();
    for advisories in &mut advisories {
        assert_eq!(
            next(advisories).await.0,
            "$JS.EVENT.ADVISORY.STREAM.DELETED.MARK"
        );
    }
}

/// `sample_freq: 100%` samples every ack of a pending message (and only those: a second ack
/// of the same message is not sampled); a consumer without it publishes nothing.
async fn sampled_acks_are_published_as_metrics(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let mut metrics = client
        .subscribe("$JS.EVENT.METRIC.CONSUMER.ACK.>")
        .await
        .unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere("$JS.EVENT.METRIC.CONSUMER.ACK.S.C")
        .await;
    let config = fx.replicated(stream::Config {
        name: "S".into(),
        subjects: vec!["s.*".into()],
        ..Default::default()
    });
    let stream = fx.create_stream(&js, config).await;
    for n in 1..=3 {
        common::jetstream::publish_acked(&js, format!("s.{n}"), "x").await;
    }
    let pull = |name: &str, sample: u8| consumer::pull::Config {
        durable_name: Some(name.into()),
        sample_frequency: sample,
        ..Default::default()
    };
    let plain = stream.create_consumer(pull("P", 0)).await.unwrap();
    let sampled = stream.create_consumer(pull("C", 100)).await.unwrap();
    let info = stream.consumer_info("C").await.unwrap();
    assert_eq!(info.config.sample_frequency, 100, "stored and echoed");

    // The plain consumer's acks first: had they been sampled, their metric would come first.
    let mut batch = plain.fetch().max_messages(3).messages().await.unwrap();
    while let Some(msg) = within("fetch", batch.next()).await {
        msg.unwrap().double_ack().await.unwrap();
    }
    let mut batch = sampled.fetch().max_messages(2).messages().await.unwrap();
    let mut acked = Vec::new();
    while let Some(msg) = within("fetch", batch.next()).await {
        let msg = msg.unwrap();
        let info = msg.info().unwrap();
        acked.push((info.stream_sequence, info.consumer_sequence));
        msg.double_ack().await.unwrap();
        // Acked twice: the second finds nothing pending and is not sampled.
        msg.double_ack().await.unwrap();
    }
    for (stream_seq, consumer_seq) in acked {
        let msg = within("an ack metric", metrics.next()).await.unwrap();
        assert_eq!(msg.subject.as_str(), "$JS.EVENT.METRIC.CONSUMER.ACK.S.C");
        let body: Value = serde_json::from_slice(&msg.payload).unwrap();
        assert_eq!(body["type"], "io.nats.jetstream.metric.v1.consumer_ack");
        assert_eq!(body["stream"], "S");
        assert_eq!(body["consumer"], "C");
        assert_eq!(body["stream_seq"], stream_seq, "{body}");
        assert_eq!(body["consumer_seq"], consumer_seq, "{body}");
        assert_eq!(body["deliveries"], 1, "{body}");
        assert!(body["ack_time"].as_i64().unwrap() > 0, "{body}");
        assert_eq!(body["id"].as_str().unwrap().len(), 22, "{body}");
    }
    // Nothing more: a message published now marks the end of the metrics.
    client
        .publish("$JS.EVENT.METRIC.CONSUMER.ACK.S.end", "".into())
        .await
        .unwrap();
    let last = within("the end marker", metrics.next()).await.unwrap();
    assert_eq!(last.subject.as_str(), "$JS.EVENT.METRIC.CONSUMER.ACK.S.end");
    fx.shutdown().await;
}
