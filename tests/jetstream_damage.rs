//! Damage found while a node runs (ADR 0018): a read that fails its check (a message block
//! whose checksum does not match, a panic inside sled) reports the group's state damaged,
//! and the supervisor acts at once: a replicated stream's damaged replica is set aside
//! (`quarantine/`) and rebuilt from its peers, the stream serving every acknowledged message
//! throughout; a single-replica stream goes offline and says why (10194), nothing dropped.
//!
//! The report is made here as the reader makes it (`report_damage_on_leader`); that a damaged
//! block is refused and reported is `stream_machine/tests_damage.rs`'s, and a damaged block
//! found at start `cluster_corruption.rs`'s.

mod common;

use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::{wait_until, within};

const MESSAGES: u64 = 20;

async fn publish(js: &jetstream::Context, i: u64) -> Result<(), String> {
    let ack = js
        .publish("orders.new", format!("order {i}").into())
        .await
        .map_err(|e| e.to_string())?;
    ack.await.map(|_| ()).map_err(|e| e.to_string())
}

async fn info(client: &async_nats::Client) -> serde_json::Value {
    let reply = within(
        "STREAM.INFO",
        client.request("$JS.API.STREAM.INFO.ORDERS", "".into()),
    )
    .await
    .expect("an answer");
    serde_json::from_slice(&reply.payload).unwrap()
}

async fn damage_found_while_running(fx: JsFixture) {
    let js = fx.js().await;
    let config = stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.>".into()],
        ..Default::default()
    };
    fx.create_stream(&js, config).await;
    for i in 0..MESSAGES {
        publish(&js, i).await.expect("acknowledged");
    }
    fx.wait_until_replicas_hold("ORDERS", MESSAGES).await;
    let damaged = fx.report_damage_on_leader("ORDERS", "message block 1: checksum mismatch");
    let client = fx.client().await;

    if fx.stream_replicas() == 1 {
        // Nothing to rebuild from: offline, saying why; nothing stored meanwhile.
        let mut answer = serde_json::Value::Null;
        for _ in 0..100 {
            answer = info(&client).await;
            if answer["error"]["err_code"] == 10194 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        let description = answer["error"]["description"].as_str().unwrap_or_default();
        assert!(
            description.starts_with("stream is offline: ") && description.contains("checksum"),
            "{answer}"
        );
        assert!(
            publish(&js, MESSAGES).await.is_err(),
            "an offline stream stored"
        );
        return;
    }
    // Replicated: the damaged replica is set aside and rebuilt; the stream serves all.
    let quarantine = fx.store_dir(damaged).join("quarantine");
    wait_until("the damaged replica to be quarantined", || {
        std::fs::read_dir(&quarantine).is_ok_and(|mut d| d.next().is_some())
    })
    .await;
    fx.wait_until_served("ORDERS").await;
    let mut next = MESSAGES;
    for _ in 0..100 {
        if publish(&js, next).await.is_ok() {
            next += 1;
            break;
        }
    }
    assert_eq!(
        next,
        MESSAGES + 1,
        "no write acknowledged after the rebuild"
    );
    fx.wait_until_replicas_hold("ORDERS", next).await;
    let answer = info(&client).await;
    assert_eq!(answer["state"]["messages"], next, "{answer}");
}

on_r1_and_r3!(damage_found_while_running);
