//! Core pub/sub through a real client (async-nats): plain, wildcard, queue groups,
//! request/reply, headers, no-responders, auto-unsubscribe, fan-out, large payloads.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use async_nats::HeaderMap;
use bytes::Bytes;
use common::{connect, start_default, within};
use futures::StreamExt;

#[tokio::test]
async fn publish_reaches_subscriber_in_order() {
    let server = start_default().await;
    let client = connect(&server).await;
    let mut sub = client.subscribe("orders.new").await.unwrap();
    client.flush().await.unwrap();
    for i in 0..100 {
        client
            .publish("orders.new", format!("order {i}").into())
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    for i in 0..100 {
        let msg = within("message", sub.next()).await.unwrap();
        assert_eq!(msg.subject.as_str(), "orders.new");
        assert_eq!(msg.payload, Bytes::from(format!("order {i}")));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn wildcards_deliver_the_published_subject() {
    let server = start_default().await;
    let client = connect(&server).await;
    let mut star = client.subscribe("orders.*").await.unwrap();
    let mut full = client.subscribe("orders.>").await.unwrap();
    let mut other = client.subscribe("payments.>").await.unwrap();
    client.flush().await.unwrap();
    client.publish("orders.new", "a".into()).await.unwrap();
    client.publish("orders.eu.new", "b".into()).await.unwrap();
    client.publish("payments.x", "c".into()).await.unwrap();
    client.flush().await.unwrap();

    let msg = within("star", star.next()).await.unwrap();
    assert_eq!(msg.subject.as_str(), "orders.new");
    let first = within("full 1", full.next()).await.unwrap();
    let second = within("full 2", full.next()).await.unwrap();
    assert_eq!(first.subject.as_str(), "orders.new");
    assert_eq!(second.subject.as_str(), "orders.eu.new");
    assert_eq!(within("other", other.next()).await.unwrap().payload, "c");
    // `orders.*` must not have matched the three-token subject.
    client.publish("orders.done", "d".into()).await.unwrap();
    client.flush().await.unwrap();
    assert_eq!(
        within("star 2", star.next())
            .await
            .unwrap()
            .subject
            .as_str(),
        "orders.done"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn queue_group_members_share_messages_and_plain_subscribers_get_all() {
    let server = start_default().await;
    let client = connect(&server).await;
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(
            client
                .queue_subscribe("work", "workers".into())
                .await
                .unwrap(),
        );
    }
    let mut watcher = client.subscribe("work").await.unwrap();
    client.flush().await.unwrap();
    const N: usize = 300;
    for i in 0..N {
        client.publish("work", i.to_string().into()).await.unwrap();
    }
    client.flush().await.unwrap();

    for _ in 0..N {
        within("watcher copy", watcher.next()).await.unwrap();
    }
    let mut seen = HashMap::new();
    let mut per_member = Vec::new();
    for member in &mut members {
        let mut count = 0;
        while let Ok(Some(msg)) =
            tokio::time::timeout(Duration::from_millis(200), member.next()).await
        {
            *seen.entry(msg.payload).or_insert(0) += 1;
            count += 1;
        }
        per_member.push(count);
    }
    assert_eq!(seen.len(), N, "every message reached the group");
    assert!(seen.values().all(|n| *n == 1), "exactly one member each");
    assert!(
        per_member.iter().all(|n| *n > 0),
        "spread over members: {per_member:?}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn request_reply_across_two_connections() {
    let server = start_default().await;
    let responder = connect(&server).await;
    let requester = connect(&server).await;
    let mut service = responder.subscribe("svc.echo").await.unwrap();
    responder.flush().await.unwrap();
    let task = tokio::spawn(async move {
        for _ in 0..10 {
            let msg = service.next().await.unwrap();
            let mut reply = b"echo: ".to_vec();
            reply.extend_from_slice(&msg.payload);
            responder
                .publish(msg.reply.unwrap(), reply.into())
                .await
                .unwrap();
        }
        responder.flush().await.unwrap();
    });
    for i in 0..10 {
        let answer = within(
            "reply",
            requester.request("svc.echo", format!("{i}").into()),
        )
        .await
        .unwrap();
        assert_eq!(answer.payload, Bytes::from(format!("echo: {i}")));
    }
    task.await.unwrap();
    server.shutdown().await;
}

#[tokio::test]
async fn headers_pass_through_byte_exact() {
    let server = start_default().await;
    let client = connect(&server).await;
    let mut sub = client.subscribe("h").await.unwrap();
    client.flush().await.unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("X-Trace", "abc 123");
    headers.append("X-Multi", "one");
    headers.append("X-Multi", "two");
    client
        .publish_with_headers("h", headers, "body".into())
        .await
        .unwrap();
    client.flush().await.unwrap();
    let msg = within("header message", sub.next()).await.unwrap();
    let got = msg.headers.expect("headers delivered");
    assert_eq!(got.get("X-Trace").unwrap().as_str(), "abc 123");
    let multi: Vec<_> = got
        .get_all("X-Multi")
        .map(|v| v.as_str().to_owned())
        .collect();
    assert_eq!(multi, vec!["one", "two"]);
    assert_eq!(msg.payload, "body");
    server.shutdown().await;
}

#[tokio::test]
async fn request_without_responders_gets_no_responders() {
    let server = start_default().await;
    let client = connect(&server).await;
    let err = within("no responders", client.request("nobody.home", "x".into()))
        .await
        .expect_err("no one answers");
    assert_eq!(
        err.kind(),
        async_nats::client::RequestErrorKind::NoResponders,
        "{err}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn unsubscribe_after_max_messages() {
    let server = start_default().await;
    let client = connect(&server).await;
    let mut sub = client.subscribe("limited").await.unwrap();
    sub.unsubscribe_after(3).await.unwrap();
    client.flush().await.unwrap();
    for i in 0..10 {
        client
            .publish("limited", i.to_string().into())
            .await
            .unwrap();
    }
    client.flush().await.unwrap();
    let mut got = Vec::new();
    while let Some(msg) = within("limited stream", sub.next()).await {
        got.push(msg.payload);
    }
    assert_eq!(got, vec!["0", "1", "2"]);
    let shared = server.shared().clone();
    common::wait_until("subscription removed", || {
        shared.router.subscription_count() == 0
    })
    .await;
    server.shutdown().await;
}

#[tokio::test]
async fn many_subscribers_each_get_a_copy() {
    let server = start_default().await;
    let publisher = connect(&server).await;
    let mut clients = Vec::new();
    let mut subs = Vec::new();
    for i in 0..20 {
        let client = connect(&server).await;
        for j in 0..10 {
            let subject = if j % 2 == 0 { "fan.out" } else { "fan.*" };
            subs.push((i, client.subscribe(subject).await.unwrap()));
        }
        client.flush().await.unwrap();
        clients.push(client);
    }
    for i in 0..5 {
        publisher
            .publish("fan.out", i.to_string().into())
            .await
            .unwrap();
    }
    publisher.flush().await.unwrap();
    for (_, sub) in &mut subs {
        for i in 0..5 {
            let msg = within("fan-out copy", sub.next()).await.unwrap();
            assert_eq!(msg.payload, Bytes::from(i.to_string()));
        }
    }
    server.shutdown().await;
}

#[tokio::test]
async fn payloads_up_to_max_payload() {
    let server = start_default().await;
    let client = connect(&server).await;
    assert_eq!(client.server_info().max_payload, 1024 * 1024);
    let mut sub = client.subscribe("big").await.unwrap();
    client.flush().await.unwrap();
    for size in [0usize, 1, 4096, 65_537, 1024 * 1024] {
        let payload: Bytes = (0..size)
            .map(|i| (i % 251) as u8)
            .collect::<Vec<_>>()
            .into();
        client.publish("big", payload.clone()).await.unwrap();
        client.flush().await.unwrap();
        let msg = within("big message", sub.next()).await.unwrap();
        assert_eq!(msg.payload.len(), size);
        assert_eq!(msg.payload, payload);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn echo_off_skips_own_messages() {
    let server = start_default().await;
    let quiet = async_nats::ConnectOptions::new()
        .no_echo()
        .connect(common::url(&server))
        .await
        .unwrap();
    let other = connect(&server).await;
    let mut own = quiet.subscribe("e").await.unwrap();
    quiet.flush().await.unwrap();
    quiet.publish("e", "mine".into()).await.unwrap();
    quiet.flush().await.unwrap();
    other.publish("e", "theirs".into()).await.unwrap();
    other.flush().await.unwrap();
    let msg = within("other's message", own.next()).await.unwrap();
    assert_eq!(msg.payload, "theirs", "own message was not echoed");
    server.shutdown().await;
}
