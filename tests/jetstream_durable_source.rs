//! Durable sourcing (nats-server 2.14, ADR-60) through async-nats: a stream that sources a
//! work-queue origin drains it through a `flow_control` consumer of its own, exactly once,
//! across leader changes and restarts; a mirror follows a consumer the user made on an
//! interest origin; the consumer is deleted with the source; a consumer that is not
//! acknowledged by flow control is reported, and bad source configs are refused with
//! nats-server's codes. Every scenario runs on R1 and R3.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture, Topology};
use common::jetstream::{api, publish_acked, publish_deduplicated, step_down_stream};
use common::within;
use serde_json::{json, Value};

on_r1_and_r3!(
    a_work_queue_origin_is_drained_into_its_source,
    a_mirror_follows_a_users_consumer_on_an_interest_origin,
    a_drained_source_loses_and_duplicates_nothing_across_leader_changes_and_restarts,
    removing_the_source_deletes_its_consumer,
    bad_consumer_sources_are_refused_or_reported,
    a_reset_by_hand_neither_duplicates_nor_stops_the_copy,
);

/// How long a copy may take to catch up (an election per group after a restart first).
const CATCH_UP: Duration = Duration::from_secs(30);

fn origin(name: &str, subjects: &str, retention: stream::RetentionPolicy) -> stream::Config {
    stream::Config {
        name: name.into(),
        subjects: vec![subjects.into()],
        retention,
        ..Default::default()
    }
}

/// The origin ORDERS on `orders.*`.
async fn orders(fx: &JsFixture, js: &jetstream::Context, retention: stream::RetentionPolicy) {
    fx.create_stream(js, origin("ORDERS", "orders.*", retention))
        .await;
}

fn work_queue(name: &str, subjects: &str) -> stream::Config {
    origin(name, subjects, stream::RetentionPolicy::WorkQueue)
}

async fn info_json(client: &async_nats::Client, name: &str) -> Option<Value> {
    let subject = format!("$JS.API.STREAM.INFO.{name}");
    let request = client.request(subject, "".into());
    match tokio::time::timeout(Duration::from_secs(1), request).await {
        Ok(Ok(reply)) => serde_json::from_slice(&reply.payload).ok(),
        _ => None,
    }
}

/// Waits until `check` holds for stream `name`'s info (asked again while unanswered).
async fn wait_for_info(
    client: &async_nats::Client,
    name: &str,
    what: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let mut last = Value::Null;
    let polling = async {
        loop {
            if let Some(info) = info_json(client, name).await {
                if check(&info) {
                    return info;
                }
                last = info;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    match tokio::time::timeout(CATCH_UP, polling).await {
        Ok(info) => info,
        Err(_) => panic!("{name}: never {what}; last info {last}"),
    }
}

async fn wait_for_messages(client: &async_nats::Client, name: &str, messages: u64) -> Value {
    wait_for_info(client, name, &format!("held {messages} messages"), |info| {
        info["state"]["messages"] == messages
    })
    .await
}

/// Creates durable consumer `name` on ORDERS with `config`'s settings; its create reply.
async fn create_consumer(client: &async_nats::Client, name: &str, mut config: Value) -> Value {
    config["durable_name"] = json!(name);
    let subject = format!("$JS.API.CONSUMER.CREATE.ORDERS.{name}");
    let body = json!({"stream_name": "ORDERS", "config": config});
    let created = api(client, subject, body).await;
    assert!(created["error"].is_null(), "{created}");
    created
}

async fn consumer_names(client: &async_nats::Client, stream: &str) -> Vec<String> {
    let reply = api(client, format!("$JS.API.CONSUMER.NAMES.{stream}"), "").await;
    reply["consumers"]
        .as_array()
        .map(|names| {
            names
                .iter()
                .map(|n| n.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Publishes `job <id>` for each id until acknowledged (a leader change answers 503 or
/// nothing meanwhile); the message id keeps a retried publish from being stored twice.
async fn publish_jobs(js: &jetstream::Context, ids: std::ops::RangeInclusive<u64>) {
    for id in ids {
        publish_deduplicated(js, "jobs.new", format!("j{id}"), format!("job {id}")).await;
    }
}

/// The payloads of stream `name`'s messages 1..=count, each once.
async fn payloads(js: &jetstream::Context, name: &str, count: u64) -> BTreeSet<String> {
    let stream = js.get_stream(name).await.expect("stream");
    let mut seen = BTreeSet::new();
    for seq in 1..=count {
        let msg = stream.get_raw_message(seq).await.expect("stored");
        let payload = String::from_utf8(msg.payload.to_vec()).unwrap();
        assert!(seen.insert(payload.clone()), "{payload} twice in {name}");
    }
    seen
}

fn expected_jobs(ids: std::ops::RangeInclusive<u64>) -> BTreeSet<String> {
    ids.map(|id| format!("job {id}")).collect()
}

async fn a_work_queue_origin_is_drained_into_its_source(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, work_queue("JOBS", "jobs.*")).await;
    publish_jobs(&js, 1..=20).await;
    fx.create_stream_raw(
        &client,
        json!({"name": "AGG", "sources": [{"name": "JOBS"}]}),
    )
    .await;
    wait_for_messages(&client, "AGG", 20).await;
    // Acknowledged once stored: the work queue gives them up.
    wait_for_messages(&client, "JOBS", 0).await;
    let names = consumer_names(&client, "JOBS").await;
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("JS_SRC_"), "{names:?}");
    let consumer = api(
        &client,
        format!("$JS.API.CONSUMER.INFO.JOBS.{}", names[0]),
        "",
    )
    .await;
    assert_eq!(
        consumer["config"]["ack_policy"], "flow_control",
        "{consumer}"
    );
    assert_eq!(consumer["config"]["sourcing"], true, "{consumer}");
    assert_eq!(consumer["ack_floor"]["stream_seq"], 20, "{consumer}");

    // What comes next follows, with the source header of a source.
    publish_jobs(&js, 21..=30).await;
    wait_for_messages(&client, "AGG", 30).await;
    wait_for_messages(&client, "JOBS", 0).await;
    assert_eq!(payloads(&js, "AGG", 30).await, expected_jobs(1..=30));
    let copy = js
        .get_stream("AGG")
        .await
        .unwrap()
        .get_raw_message(30)
        .await
        .unwrap();
    let header = copy
        .headers
        .get("Nats-Stream-Source")
        .expect("source header");
    assert!(header.as_str().starts_with("JOBS 30 "), "{header:?}");
    let info = wait_for_info(&client, "AGG", "reported no lag", |info| {
        info["sources"][0]["lag"] == 0
    })
    .await;
    assert!(info["sources"][0].get("error").is_none(), "{info}");
    fx.shutdown().await;
}

async fn a_mirror_follows_a_users_consumer_on_an_interest_origin(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, stream::RetentionPolicy::Interest).await;
    let created = create_consumer(
        &client,
        "TOMIR",
        json!({"deliver_subject": "mir.feed", "ack_policy": "flow_control", "max_deliver": -1}),
    )
    .await;
    assert_eq!(created["config"]["flow_control"], true, "{created}");
    assert_eq!(
        created["config"]["idle_heartbeat"], 1_000_000_000,
        "{created}"
    );
    for id in 1..=10 {
        publish_acked(&js, "orders.new", format!("order {id}")).await;
    }
    fx.create_stream_raw(
        &client,
        json!({"name": "MIR", "mirror": {
            "name": "ORDERS",
            "consumer": {"name": "TOMIR", "deliver_subject": "mir.feed"},
        }}),
    )
    .await;
    wait_for_info(&client, "MIR", "held 1..=10", |info| {
        info["state"]["messages"] == 10 && info["state"]["last_seq"] == 10
    })
    .await;
    // The only interest acknowledged everything: the origin lets go.
    wait_for_messages(&client, "ORDERS", 0).await;
    for id in 11..=15 {
        publish_acked(&js, "orders.new", format!("order {id}")).await;
    }
    wait_for_info(&client, "MIR", "held 1..=15", |info| {
        info["state"]["messages"] == 15 && info["state"]["last_seq"] == 15
    })
    .await;
    let mirror = js.get_stream("MIR").await.unwrap();
    for seq in 1..=15 {
        let msg = mirror.get_raw_message(seq).await.expect("copied");
        assert_eq!(&msg.payload[..], format!("order {seq}").as_bytes());
    }
    // The user's consumer stays when the mirror goes.
    let deleted = api(&client, "$JS.API.STREAM.DELETE.MIR", "").await;
    assert_eq!(deleted["success"], true, "{deleted}");
    let info = api(&client, "$JS.API.CONSUMER.INFO.ORDERS.TOMIR", "").await;
    assert!(info["error"].is_null(), "{info}");
    fx.shutdown().await;
}

async fn a_drained_source_loses_and_duplicates_nothing_across_leader_changes_and_restarts(
    mut fx: JsFixture,
) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, work_queue("JOBS", "jobs.*")).await;
    fx.create_stream_raw(
        &client,
        json!({"name": "AGG", "sources": [{"name": "JOBS"}]}),
    )
    .await;
    publish_jobs(&js, 1..=40).await;
    if fx.topology() == Topology::R3 {
        // Both leaders change while the copy runs and the origin takes more.
        let publishing = publish_jobs(&js, 41..=80);
        let (agg, jobs, ()) = tokio::join!(
            step_down_stream(&client, "AGG"),
            step_down_stream(&client, "JOBS"),
            publishing
        );
        assert!(agg && jobs, "a leader never stepped down");
    } else {
        publish_jobs(&js, 41..=80).await;
    }
    // Every node restarts and the origin takes more.
    fx.restart().await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    publish_jobs(&js, 81..=120).await;
    wait_for_messages(&client, "AGG", 120).await;
    wait_for_messages(&client, "JOBS", 0).await;
    assert_eq!(payloads(&js, "AGG", 120).await, expected_jobs(1..=120));
    fx.shutdown().await;
}

async fn removing_the_source_deletes_its_consumer(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(&js, work_queue("JOBS", "jobs.*")).await;
    fx.create_stream(&js, work_queue("TASKS", "tasks.*")).await;
    let replicas = fx.stream_replicas();
    fx.create_stream_raw(
        &client,
        json!({"name": "AGG", "sources": [{"name": "JOBS"}, {"name": "TASKS"}]}),
    )
    .await;
    publish_jobs(&js, 1..=3).await;
    wait_for_messages(&client, "AGG", 3).await;
    // Acknowledged by the answer to the flow-control request after the next heartbeat.
    wait_for_messages(&client, "JOBS", 0).await;
    within("both origins to get a consumer", async {
        while consumer_names(&client, "JOBS").await.is_empty()
            || consumer_names(&client, "TASKS").await.is_empty()
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let updated = api(
        &client,
        "$JS.API.STREAM.UPDATE.AGG",
        json!({"name": "AGG", "num_replicas": replicas, "sources": [{"name": "TASKS"}]}),
    )
    .await;
    assert!(updated["error"].is_null(), "{updated}");
    within("the removed source's consumer to go", async {
        while !consumer_names(&client, "JOBS").await.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(consumer_names(&client, "TASKS").await.len(), 1);
    // Without a source the work queue keeps what it gets.
    publish_jobs(&js, 4..=5).await;
    wait_for_messages(&client, "JOBS", 2).await;
    let deleted = api(&client, "$JS.API.STREAM.DELETE.AGG", "").await;
    assert_eq!(deleted["success"], true, "{deleted}");
    within("the deleted stream's consumer to go", async {
        while !consumer_names(&client, "TASKS").await.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    fx.shutdown().await;
}

async fn bad_consumer_sources_are_refused_or_reported(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, stream::RetentionPolicy::Limits).await;
    let consumer = json!({"name": "C", "deliver_subject": "c.feed"});
    let refused = [
        (
            json!({"name": "S1", "sources": [{"name": "ORDERS", "opt_start_seq": 3, "consumer": consumer}]}),
            10215,
        ),
        (
            json!({"name": "S2", "sources": [{"name": "ORDERS", "filter_subject": "orders.a", "consumer": consumer}]}),
            10215,
        ),
        (
            json!({"name": "S3", "sources": [{"name": "ORDERS", "consumer": {"name": "C", "deliver_subject": "c.*"}}]}),
            10215,
        ),
        (
            json!({"name": "S4", "sources": [{"name": "ORDERS", "consumer": {"name": "C.D", "deliver_subject": "c.feed"}}]}),
            10215,
        ),
        (
            json!({"name": "M1", "mirror": {"name": "ORDERS", "opt_start_seq": 2, "consumer": consumer}}),
            10213,
        ),
        (
            json!({"name": "S5", "sources": [
                {"name": "ORDERS", "consumer": consumer},
                {"name": "ORDERS", "subject_transforms": [{"src": "orders.a", "dest": "x.a"}], "consumer": consumer},
            ]}),
            10216,
        ),
    ];
    for (body, code) in refused {
        let name = body["name"].as_str().unwrap().to_owned();
        let reply = api(&client, format!("$JS.API.STREAM.CREATE.{name}"), body).await;
        assert_eq!(reply["error"]["err_code"], code, "{name}: {reply}");
    }
    // A consumer acknowledged some other way would let the origin drop or keep messages
    // whatever is stored here: the source reports 10217 and copies nothing.
    create_consumer(
        &client,
        "PLAIN",
        json!({"deliver_subject": "plain.feed", "ack_policy": "explicit"}),
    )
    .await;
    publish_acked(&js, "orders.new", "order 1").await;
    fx.create_stream_raw(
        &client,
        json!({"name": "AGG", "sources": [
            {"name": "ORDERS", "consumer": {"name": "PLAIN", "deliver_subject": "plain.feed"}},
        ]}),
    )
    .await;
    let info = wait_for_info(&client, "AGG", "reported 10217", |info| {
        info["sources"][0]["error"]["err_code"] == 10217
    })
    .await;
    assert_eq!(info["state"]["messages"], 0, "{info}");
    fx.shutdown().await;
}

/// ADR-60: someone else may reset the consumer a stream sources through. Backward, what is
/// delivered again is already stored and is not stored twice; forward, the copy skips
/// ahead; either way it goes on with what comes next.
async fn a_reset_by_hand_neither_duplicates_nor_stops_the_copy(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, stream::RetentionPolicy::Limits).await;
    create_consumer(
        &client,
        "FEED",
        json!({"deliver_subject": "feed", "ack_policy": "flow_control"}),
    )
    .await;
    for id in 1..=10 {
        publish_acked(&js, "orders.new", format!("order {id}")).await;
    }
    fx.create_stream_raw(
        &client,
        json!({"name": "AGG", "sources": [
            {"name": "ORDERS", "consumer": {"name": "FEED", "deliver_subject": "feed"}},
        ]}),
    )
    .await;
    wait_for_messages(&client, "AGG", 10).await;
    let reset = api(
        &client,
        "$JS.API.CONSUMER.RESET.ORDERS.FEED",
        json!({"seq": 1}),
    )
    .await;
    assert_eq!(reset["reset_seq"], 1, "{reset}");
    // Redelivered from 1: copied already, so nothing is stored again; the next ones are.
    within("the consumer to deliver everything again", async {
        loop {
            let info = api(&client, "$JS.API.CONSUMER.INFO.ORDERS.FEED", "").await;
            if info["delivered"]["stream_seq"] == 10 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    publish_acked(&js, "orders.new", "order 11").await;
    wait_for_messages(&client, "AGG", 11).await;
    // Forward: 12..=14 are skipped, 15 on follow.
    for id in 12..=14 {
        publish_acked(&js, "orders.new", format!("order {id}")).await;
    }
    wait_for_messages(&client, "AGG", 14).await;
    let reset = api(
        &client,
        "$JS.API.CONSUMER.RESET.ORDERS.FEED",
        json!({"seq": 20}),
    )
    .await;
    assert_eq!(reset["reset_seq"], 20, "{reset}");
    for id in 15..=20 {
        publish_acked(&js, "orders.new", format!("order {id}")).await;
    }
    wait_for_messages(&client, "AGG", 15).await;
    let stream = js.get_stream("AGG").await.unwrap();
    let mut seen = BTreeSet::new();
    for seq in 1..=15 {
        let msg = stream.get_raw_message(seq).await.expect("stored");
        seen.insert(String::from_utf8(msg.payload.to_vec()).unwrap());
    }
    let mut expected: BTreeSet<String> = (1..=14).map(|id| format!("order {id}")).collect();
    expected.insert("order 20".into());
    assert_eq!(seen, expected);
    fx.shutdown().await;
}
