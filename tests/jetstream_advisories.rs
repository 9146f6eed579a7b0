//! JetStream advisories on `$JS.EVENT.ADVISORY.>`, as nats-server publishes them: stream
//! created / updated / deleted, consumer created / deleted, a message naked, terminated (with
//! its reason) and out of deliveries (`max_deliver`), an idle ephemeral consumer deleted, each
//! once and with the typed-event fields (`type`, `id`, `timestamp`).

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, consumer, stream, AckKind};
use common::within;
use futures::StreamExt;
use serde_json::Value;

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

#[tokio::test]
async fn streams_consumers_and_deliveries_are_advised() {
    let (server, _dir) = common::start_jetstream().await;
    let client = common::connect(&server).await;
    let mut advisories = client.subscribe("$JS.EVENT.ADVISORY.>").await.unwrap();
    client.flush().await.unwrap();
    let js = jetstream::new(client.clone());

    let config = stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.*".into()],
        ..Default::default()
    };
    let stream = js.create_stream(config.clone()).await.unwrap();
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

    let fetch = |count: usize| {
        let consumer = consumer.clone();
        async move {
            let batch = consumer
                .fetch()
                .max_messages(count)
                .expires(Duration::from_secs(2))
                .messages()
                .await
                .unwrap();
            within("a fetch", batch.collect::<Vec<_>>()).await
        }
    };
    let first = fetch(2).await;
    assert_eq!(first.len(), 2);
    let (one, two) = (first[0].as_ref().unwrap(), first[1].as_ref().unwrap());
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
    assert_eq!(again[0].as_ref().unwrap().info().unwrap().delivered, 2);
    assert!(fetch(1).await.is_empty(), "out of deliveries");
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
