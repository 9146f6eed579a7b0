//! Counter streams (ADR-49, `allow_msg_counter`) through async-nats. async-nats 0.42 has no
//! counter API (its stream config has no `allow_msg_counter`, its PubAck no `val`), so the
//! streams are created with raw API requests and increments are publishes with a
//! `Nats-Incr` header, as the counter clients (orbit's `counters`, `nats counter`) send them.
//! Increments, decrements and values past 64 bits; concurrent publishers; the value kept
//! across restarts and leader changes; nats-server's errors; deleting the last increment;
//! a counter stream summing two sourced counter streams. Every scenario runs on R1 and R3.

mod common;

use async_nats::HeaderMap;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::{api, publish_with_headers as publish};
use common::within;
use serde_json::{json, Value};

on_r1_and_r3!(
    increments_decrements_and_big_values,
    concurrent_publishers_lose_no_increment,
    the_value_survives_restarts_and_leader_changes,
    errors_are_nats_servers,
    deleting_the_last_increment_falls_back_and_purging_resets,
    a_counter_stream_sums_its_sources,
);

async fn create_counter(fx: &JsFixture, client: &async_nats::Client, name: &str, subjects: &str) {
    let reply = fx
        .create_stream_raw(
            client,
            json!({"name":name,"subjects":[subjects],"allow_msg_counter":true,"allow_direct":true}),
        )
        .await;
    assert_eq!(reply["config"]["allow_msg_counter"], true, "{reply}");
}

/// Adds `incr` to the counter `subject`; returns the PubAck.
async fn add(client: &async_nats::Client, subject: &str, incr: &str) -> Value {
    publish(client, subject, &[("Nats-Incr", incr)], "").await
}

/// The counter's stored value (its last message's body), read as the counter clients read
/// it (`DIRECT.GET` of the subject's last message).
async fn stored_value(client: &async_nats::Client, stream: &str, subject: &str) -> Value {
    let reply = within(
        "a direct get",
        client.request(
            format!("$JS.API.DIRECT.GET.{stream}"),
            json!({"last_by_subj": subject}).to_string().into(),
        ),
    )
    .await
    .unwrap();
    serde_json::from_slice(&reply.payload).unwrap_or(Value::Null)
}

async fn increments_decrements_and_big_values(fx: JsFixture) {
    let client = fx.client().await;
    create_counter(&fx, &client, "C", "c.>").await;
    let ack = add(&client, "c.a", "5").await;
    assert_eq!(
        (&ack["seq"], &ack["val"]),
        (&json!(1), &json!("5")),
        "{ack}"
    );
    assert_eq!(add(&client, "c.a", "+10").await["val"], "15");
    assert_eq!(add(&client, "c.a", "-20").await["val"], "-5");
    // Each subject is its own counter.
    assert_eq!(add(&client, "c.b", "1").await["val"], "1");
    // Past 64 bits, both ways.
    let big = "170141183460469231731687303715884105727";
    assert_eq!(
        add(&client, "c.a", big).await["val"],
        "170141183460469231731687303715884105722"
    );
    assert_eq!(add(&client, "c.a", &format!("-{big}")).await["val"], "-5");
    assert_eq!(add(&client, "c.a", "0").await["val"], "-5");
    assert_eq!(stored_value(&client, "C", "c.a").await, json!({"val":"-5"}));
    assert_eq!(stored_value(&client, "C", "c.b").await, json!({"val":"1"}));
    // A retried increment with the same message id counts once.
    let first = publish(
        &client,
        "c.d",
        &[("Nats-Incr", "2"), ("Nats-Msg-Id", "m1")],
        "",
    )
    .await;
    let again = publish(
        &client,
        "c.d",
        &[("Nats-Incr", "2"), ("Nats-Msg-Id", "m1")],
        "",
    )
    .await;
    assert_eq!(first["val"], "2");
    assert_eq!(
        (&again["seq"], &again["duplicate"]),
        (&first["seq"], &json!(true))
    );
    assert_eq!(stored_value(&client, "C", "c.d").await, json!({"val":"2"}));
    fx.wait_until_replicas_hold("C", 8).await;
    fx.shutdown().await;
}

async fn concurrent_publishers_lose_no_increment(fx: JsFixture) {
    const PUBLISHERS: u64 = 8;
    const EACH: u64 = 50;
    let client = fx.client().await;
    create_counter(&fx, &client, "C", "c.>").await;
    let tasks: Vec<_> = (0..PUBLISHERS)
        .map(|publisher| {
            let client = client.clone();
            tokio::spawn(async move {
                for _ in 0..EACH {
                    let ack = add(&client, "c.hits", "1").await;
                    assert!(ack["error"].is_null(), "{ack}");
                }
                // And a subject of its own, with async publishes acked at the end.
                let js = async_nats::jetstream::new(client.clone());
                let mut acks = Vec::new();
                for _ in 0..EACH {
                    let mut headers = HeaderMap::new();
                    headers.insert("Nats-Incr", "2");
                    let subject = format!("c.own.{publisher}");
                    acks.push(
                        js.publish_with_headers(subject, headers, "".into())
                            .await
                            .unwrap(),
                    );
                }
                for ack in acks {
                    ack.await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        within("a publisher", task).await.unwrap();
    }
    let total = PUBLISHERS * EACH;
    assert_eq!(
        stored_value(&client, "C", "c.hits").await,
        json!({"val": total.to_string()})
    );
    for publisher in 0..PUBLISHERS {
        let own = stored_value(&client, "C", &format!("c.own.{publisher}")).await;
        assert_eq!(own, json!({"val": (2 * EACH).to_string()}));
    }
    fx.wait_until_replicas_hold("C", 2 * total).await;
    fx.shutdown().await;
}

async fn the_value_survives_restarts_and_leader_changes(mut fx: JsFixture) {
    let client = fx.client().await;
    create_counter(&fx, &client, "C", "c.>").await;
    assert_eq!(add(&client, "c.a", "7").await["val"], "7");
    assert_eq!(
        add(&client, "c.b", "99999999999999999999").await["val"],
        "99999999999999999999"
    );
    fx.wait_until_replicas_hold("C", 2).await;
    // Restarted: the next increment adds to the stored value.
    fx.restart().await;
    let client = fx.client().await;
    assert_eq!(add(&client, "c.a", "3").await["val"], "10");
    assert_eq!(
        add(&client, "c.b", "1").await["val"],
        "100000000000000000000"
    );
    fx.wait_until_replicas_hold("C", 4).await;
    // A new leader (on R1: the node restarted again) counts on from the same value.
    if fx.stream_replicas() > 1 {
        fx.stop_leader_of("C").await;
    } else {
        fx.restart().await;
    }
    fx.wait_until_served("C").await;
    let client = fx.client().await;
    assert_eq!(add(&client, "c.a", "-11").await["val"], "-1");
    assert_eq!(stored_value(&client, "C", "c.a").await, json!({"val":"-1"}));
    fx.shutdown().await;
}

async fn errors_are_nats_servers(fx: JsFixture) {
    let client = fx.client().await;
    fx.create_stream_raw(&client, json!({"name":"PLAIN","subjects":["p.>"]}))
        .await;
    create_counter(&fx, &client, "C", "c.>").await;
    let err_code = |ack: Value| ack["error"]["err_code"].clone();
    // Not a counter stream.
    assert_eq!(err_code(add(&client, "p.a", "1").await), 10168);
    assert_eq!(err_code(add(&client, "p.a", "x").await), 10171);
    // A counter stream: a bad increment, a payload, no increment, incompatible headers.
    assert_eq!(err_code(add(&client, "c.a", "1.5").await), 10171);
    assert_eq!(
        err_code(publish(&client, "c.a", &[("Nats-Incr", "1")], "x").await),
        10170
    );
    assert_eq!(err_code(publish(&client, "c.a", &[], "x").await), 10169);
    assert_eq!(
        err_code(publish(&client, "c.a", &[("Nats-Msg-Id", "1")], "").await),
        10169
    );
    for incompatible in [
        ("Nats-Expected-Last-Sequence", "0"),
        ("Nats-Expected-Last-Subject-Sequence", "0"),
        ("Nats-Expected-Stream", "C"),
        ("Nats-Expected-Last-Msg-Id", "x"),
        ("Nats-Rollup", "sub"),
    ] {
        let ack = publish(&client, "c.a", &[("Nats-Incr", "1"), incompatible], "").await;
        assert_eq!(ack["error"]["err_code"], 10171, "{incompatible:?}: {ack}");
        assert_eq!(
            ack["error"]["description"],
            "message counter increment is invalid"
        );
    }
    // None of that was stored.
    assert_eq!(add(&client, "c.a", "1").await["seq"], 1);
    // Configs nats-server refuses.
    let refused = [
        (
            json!({"name":"D","subjects":["d"],"allow_msg_counter":true,"discard":"new"}),
            10052,
        ),
        (
            json!({"name":"D","subjects":["d"],"allow_msg_counter":true,"allow_msg_ttl":true}),
            10052,
        ),
        (
            json!({"name":"D","subjects":["d"],"allow_msg_counter":true,"retention":"workqueue"}),
            10052,
        ),
        (
            json!({"name":"D","mirror":{"name":"C"},"allow_msg_counter":true}),
            10173,
        ),
    ];
    for (body, code) in refused {
        let reply = api(&client, "$JS.API.STREAM.CREATE.D", &body).await;
        assert_eq!(reply["error"]["err_code"], code, "{body}: {reply}");
    }
    let update = json!({"name":"C","subjects":["c.>"],"allow_direct":true,
        "num_replicas":fx.stream_replicas()});
    let reply = api(&client, "$JS.API.STREAM.UPDATE.C", &update).await;
    assert_eq!(
        reply["error"]["description"],
        "stream configuration update can not change message counter setting",
        "{reply}"
    );
    fx.shutdown().await;
}

async fn deleting_the_last_increment_falls_back_and_purging_resets(fx: JsFixture) {
    let client = fx.client().await;
    create_counter(&fx, &client, "C", "c.>").await;
    assert_eq!(add(&client, "c.a", "4").await["val"], "4");
    assert_eq!(add(&client, "c.b", "1").await["val"], "1");
    assert_eq!(add(&client, "c.a", "6").await["val"], "10");
    // The last message on c.a goes: the counter stands at the one before (read back from
    // the stored body, as nats-server loads the subject's last message).
    let reply = api(&client, "$JS.API.STREAM.MSG.DELETE.C", json!({"seq":3})).await;
    assert_eq!(reply["success"], true, "{reply}");
    assert_eq!(add(&client, "c.a", "1").await["val"], "5");
    // Purging a subject resets its counter; the other keeps counting.
    let reply = api(&client, "$JS.API.STREAM.PURGE.C", json!({"filter":"c.a"})).await;
    assert_eq!(reply["success"], true, "{reply}");
    assert_eq!(add(&client, "c.a", "1").await["val"], "1");
    assert_eq!(add(&client, "c.b", "1").await["val"], "2");
    fx.wait_until_replicas_hold("C", 6).await;
    fx.shutdown().await;
}

async fn a_counter_stream_sums_its_sources(fx: JsFixture) {
    let client = fx.client().await;
    create_counter(&fx, &client, "A", "a.>").await;
    create_counter(&fx, &client, "B", "b.>").await;
    let transform = |name: &str, from: &str| json!({"name":name,"subject_transforms":[{"src":from,"dest":"all.hits"}]});
    fx.create_stream_raw(
        &client,
        json!({"name":"SUM","subjects":["all.local"],"allow_msg_counter":true,"allow_direct":true,
            "sources":[transform("A","a.hits"),transform("B","b.hits")]}),
    )
    .await;
    assert_eq!(add(&client, "a.hits", "3").await["val"], "3");
    assert_eq!(add(&client, "b.hits", "10").await["val"], "10");
    assert_eq!(add(&client, "a.hits", "2").await["val"], "5");
    // Each origin's value replaces what was taken from it: the sum is 5 + 10.
    let summed = within("the sum of both sources", async {
        loop {
            let value = stored_value(&client, "SUM", "all.hits").await;
            if value == json!({"val":"15"}) {
                return value;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(summed, json!({"val":"15"}));
    // What it took from each origin is in the stored message's headers.
    let reply = within(
        "the stored counter",
        client.request(
            "$JS.API.DIRECT.GET.SUM".to_owned(),
            json!({"last_by_subj":"all.hits"}).to_string().into(),
        ),
    )
    .await
    .unwrap();
    let sources = reply
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Counter-Sources"));
    assert_eq!(
        sources.map(|value| value.as_str()),
        Some(r#"{"A":{"all.hits":"5"},"B":{"all.hits":"10"}}"#)
    );
    fx.shutdown().await;
}
