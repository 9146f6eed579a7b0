//! JetStream streams through async-nats's JetStream API: create (idempotent, conflicting),
//! info, publish with PubAcks, dedup, expected-* headers, limits, purge, message get and
//! delete, names and list, delete, and account info. Every scenario runs on one node (R1)
//! and on a three-node cluster with three replicas (R3), see `common::fixture`.

mod common;

use async_nats::jetstream::{context::Publish, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::publish_acked;
use common::within;

on_r1_and_r3!(
    create_publish_and_info,
    dedup_and_expected_headers,
    limits_discard_old_and_new,
    purge_get_delete_names_list_and_delete_stream,
    streams_and_messages_survive_a_restart,
    max_age_expires_messages_over_time,
);

fn orders() -> stream::Config {
    stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.*".into()],
        ..Default::default()
    }
}

async fn create_publish_and_info(fx: JsFixture) {
    let js = fx.js().await;

    let mut stream = fx.create_stream(&js, orders()).await;
    let info = stream.info().await.unwrap();
    assert_eq!(info.config.name, "ORDERS");
    assert_eq!(info.state.messages, 0);

    for i in 1..=10u64 {
        let ack = js
            .publish(format!("orders.{}", i % 3), format!("order {i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
        assert_eq!(ack.stream, "ORDERS");
        assert_eq!(ack.sequence, i);
        assert!(!ack.duplicate);
    }
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 10);
    assert_eq!(info.state.first_sequence, 1);
    assert_eq!(info.state.last_sequence, 10);
    assert_eq!(info.state.subjects_count, 3);
    assert!(info.state.bytes > 0);
    // Per-subject counts, read page by page as the client does (it asks again at the
    // count it got; nats-server's paging says there is no more).
    use futures::TryStreamExt;
    let counts: Vec<(String, usize)> = stream
        .info_with_subjects("orders.*")
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut counts = counts;
    counts.sort();
    let expected = [("orders.0", 3), ("orders.1", 4), ("orders.2", 3)];
    let expected: Vec<(String, usize)> =
        expected.iter().map(|(s, n)| (s.to_string(), *n)).collect();
    assert_eq!(counts, expected);

    // Same config again is fine; a different one is refused with 10058.
    js.create_stream(fx.replicated(orders())).await.unwrap();
    let mut different = fx.replicated(orders());
    different.subjects = vec!["other.*".into()];
    let err = js.create_stream(different).await.unwrap_err();
    assert!(err.to_string().contains("10058"), "{err}");

    let account = js.query_account().await.unwrap();
    assert_eq!(account.streams, 1);
    fx.shutdown().await;
}

async fn dedup_and_expected_headers(fx: JsFixture) {
    let js = fx.js().await;
    fx.create_stream(&js, orders()).await;

    let first = js
        .send_publish(
            "orders.a",
            Publish::build().payload("x".into()).message_id("m-1"),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let again = js
        .send_publish(
            "orders.a",
            Publish::build().payload("x".into()).message_id("m-1"),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(again.sequence, first.sequence);
    assert!(again.duplicate);

    let wrong_last = js
        .send_publish(
            "orders.a",
            Publish::build()
                .payload("y".into())
                .expected_last_sequence(99),
        )
        .await
        .unwrap()
        .await
        .unwrap_err();
    assert!(wrong_last.to_string().contains("10071"), "{wrong_last}");

    let wrong_stream = js
        .send_publish(
            "orders.a",
            Publish::build()
                .payload("y".into())
                .expected_stream("OTHER"),
        )
        .await
        .unwrap()
        .await
        .unwrap_err();
    assert!(wrong_stream.to_string().contains("10060"), "{wrong_stream}");

    let right = js
        .send_publish(
            "orders.a",
            Publish::build()
                .payload("y".into())
                .expected_last_subject_sequence(first.sequence),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert_eq!(right.sequence, 2);
    fx.shutdown().await;
}

async fn limits_discard_old_and_new(fx: JsFixture) {
    let js = fx.js().await;
    fx.create_stream(
        &js,
        stream::Config {
            name: "OLD".into(),
            subjects: vec!["old.>".into()],
            max_messages: 3,
            ..Default::default()
        },
    )
    .await;
    for i in 0..5 {
        js.publish("old.x", format!("{i}").into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut old = js.get_stream("OLD").await.unwrap();
    let info = old.info().await.unwrap();
    assert_eq!(info.state.messages, 3);
    assert_eq!(info.state.first_sequence, 3);

    fx.create_stream(
        &js,
        stream::Config {
            name: "NEW".into(),
            subjects: vec!["new.>".into()],
            max_bytes: 200,
            discard: stream::DiscardPolicy::New,
            ..Default::default()
        },
    )
    .await;
    let mut refused = None;
    for i in 0..20 {
        match js
            .publish("new.x", vec![b'x'; 40].into())
            .await
            .unwrap()
            .await
        {
            Ok(_) => {}
            Err(err) => {
                refused = Some((i, err.to_string()));
                break;
            }
        }
    }
    let (at, err) = refused.expect("discard new refuses once max_bytes is reached");
    assert!(at > 0, "the first messages fit");
    assert!(
        err.contains("10047") || err.contains("maximum bytes"),
        "{err}"
    );
    fx.shutdown().await;
}

async fn purge_get_delete_names_list_and_delete_stream(fx: JsFixture) {
    let js = fx.js().await;
    let mut stream = fx.create_stream(&js, orders()).await;
    for subject in ["orders.a", "orders.b", "orders.a", "orders.c"] {
        js.publish(subject, subject.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let msg = stream.get_raw_message(2).await.unwrap();
    assert_eq!(msg.subject.as_str(), "orders.b");
    let last_a = stream
        .get_last_raw_message_by_subject("orders.a")
        .await
        .unwrap();
    assert_eq!(last_a.sequence, 3);

    assert!(stream.delete_message(2).await.unwrap());
    let err = stream.get_raw_message(2).await.unwrap_err();
    assert!(
        err.to_string().contains("10037") || err.to_string().contains("no message"),
        "{err}"
    );
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 3);
    assert_eq!(info.state.deleted_count, Some(1));

    let purged = stream.purge().filter("orders.a").await.unwrap();
    assert_eq!(purged.purged, 2);
    assert_eq!(stream.info().await.unwrap().state.messages, 1);

    fx.create_stream(
        &js,
        stream::Config {
            name: "OTHER".into(),
            subjects: vec!["other.>".into()],
            ..Default::default()
        },
    )
    .await;
    use futures::TryStreamExt;
    let mut names: Vec<String> = js.stream_names().try_collect().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["ORDERS", "OTHER"]);
    let listed: Vec<_> = js.streams().try_collect().await.unwrap();
    assert_eq!(listed.len(), 2);

    assert!(js.delete_stream("OTHER").await.unwrap().success);
    let err = js.get_stream("OTHER").await.unwrap_err();
    assert!(err.to_string().contains("not found"), "{err}");
    let overlap = js
        .create_stream(fx.replicated(stream::Config {
            name: "CLASH".into(),
            subjects: vec!["orders.>".into()],
            ..Default::default()
        }))
        .await
        .unwrap_err();
    assert!(overlap.to_string().contains("10065"), "{overlap}");
    fx.shutdown().await;
}

async fn streams_and_messages_survive_a_restart(mut fx: JsFixture) {
    let js = fx.js().await;
    fx.create_stream(&js, orders()).await;
    // A deleted stream must stay deleted: the meta group persists removals too.
    fx.create_stream(
        &js,
        stream::Config {
            name: "GONE".into(),
            subjects: vec!["gone.>".into()],
            ..Default::default()
        },
    )
    .await;
    js.delete_stream("GONE").await.unwrap();
    for i in 0..50 {
        publish_acked(&js, "orders.new", format!("{i}")).await;
    }
    fx.restart().await;

    let js = fx.js().await;
    assert!(
        js.get_stream("GONE").await.is_err(),
        "deleted stream came back"
    );
    let mut stream = js.get_stream("ORDERS").await.unwrap();
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.messages, 50);
    assert_eq!(info.state.last_sequence, 50);
    let msg = stream.get_raw_message(50).await.unwrap();
    assert_eq!(&msg.payload[..], b"49");
    let ack = publish_acked(&js, "orders.new", "after").await;
    assert_eq!(ack.sequence, 51);
    fx.shutdown().await;
}

async fn max_age_expires_messages_over_time(fx: JsFixture) {
    let js = fx.js().await;
    let mut stream = fx
        .create_stream(
            &js,
            stream::Config {
                name: "SHORT".into(),
                subjects: vec!["short.>".into()],
                max_age: std::time::Duration::from_millis(300),
                ..Default::default()
            },
        )
        .await;
    for _ in 0..5 {
        js.publish("short.x", "x".into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    assert_eq!(stream.info().await.unwrap().state.messages, 5);
    within("messages to expire", async {
        loop {
            if stream.info().await.unwrap().state.messages == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    let info = stream.info().await.unwrap();
    assert_eq!(info.state.last_sequence, 5, "expiry keeps the sequence");
    fx.shutdown().await;
}

/// What an idle stream costs in tasks on one node (issue 15): only its openraft group's own
/// (its core, its state-machine worker and its tick task). Its leadership is followed and
/// its max_age expired by one task per node for every stream, not by a task each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_runs_no_task_of_its_own() {
    const OPENRAFT_TASKS: usize = 3;
    const STREAMS: usize = 10;
    let fx = JsFixture::start(common::fixture::Topology::R1).await;
    let js = fx.js().await;
    let config = |i: usize| stream::Config {
        name: format!("IDLE{i}"),
        subjects: vec![format!("idle{i}.*")],
        max_age: std::time::Duration::from_secs(60),
        ..Default::default()
    };
    // The node-wide tasks start with the first stream: count from there.
    fx.create_stream(&js, config(0)).await;
    fx.wait_until_served("IDLE0").await;
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    for i in 1..=STREAMS {
        fx.create_stream(&js, config(i)).await;
        fx.wait_until_served(&format!("IDLE{i}")).await;
    }
    // Tasks of the creates themselves (requests, blocking calls) end shortly after.
    let mut last = 0;
    common::wait_until("the streams' tasks to settle", || {
        last = tasks();
        last <= before + STREAMS * OPENRAFT_TASKS
    })
    .await;
    assert!(
        last >= before + STREAMS,
        "each stream runs its group ({before} tasks before, {last} after)"
    );
}

/// A stream created on one node is served from its create's reply on, without a break: its
/// leader has applied its log as it stood when elected (its blank entry, the rule the
/// leadership watcher serves by) before the reply, so the watcher does not withdraw the
/// stream's subscriptions to restore them once the entry is applied. (It did when creates
/// ran side by side, most of them here: a publish right after a create could find no
/// responder, as once in a nats-py e2e run.) Each withdrawal and restoration moved the
/// router's generation: creates side by side move it as much as one create alone, times
/// their number.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_stream_is_served_from_its_reply_on() {
    const CLIENTS: usize = 3;
    const STREAMS: u64 = 10;
    let fx = JsFixture::start(common::fixture::Topology::R1).await;
    let node = fx.jetstream_of(0);
    let config = |name: &str, subject: &str| stream::Config {
        name: name.into(),
        subjects: vec![subject.into()],
        ..Default::default()
    };
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let js = fx.js().await;
        js.query_account().await.unwrap(); // its reply subscription made
        clients.push(js);
    }
    let generation = || node.router().generation();
    let before = generation();
    clients[0]
        .create_stream(config("ALONE", "alone.*"))
        .await
        .unwrap();
    let one_create = generation() - before;
    let before = generation();
    let client = |c: usize, js: async_nats::jetstream::Context| async move {
        for i in 0..STREAMS {
            let name = format!("NEW{c}_{i}");
            js.create_stream(config(&name, &format!("new{c}_{i}.*")))
                .await
                .unwrap();
            assert!(node.leads_stream(&name), "{name} is served once created");
            let ack = publish_acked(&js, format!("new{c}_{i}.x"), "x").await;
            assert_eq!((ack.stream, ack.sequence), (name, 1));
        }
    };
    // The clients live on to the end: a closing one unsubscribes its replies.
    let runs = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(c, js)| client(c, js));
    futures::future::join_all(runs).await;
    assert_eq!(
        generation() - before,
        one_create * STREAMS * CLIENTS as u64,
        "subscriptions changed beyond the creates' own ({one_create} each)"
    );
}
