//! Per-message TTLs (ADR-43) and subject delete markers (ADR-48) through async-nats: a
//! message with `Nats-TTL` expires on every replica (a restart before or after, or a leader
//! change, does not keep it), `never` outlives `max_age`, nats-server's PubAck errors, the
//! marker left when a subject's last message expires (and its own expiry), and key-value
//! per-key TTLs with limit markers. Every scenario runs on R1 and R3.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use async_nats::HeaderMap;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::api;
use common::within;
use serde_json::{json, Value};

on_r1_and_r3!(
    ttl_messages_expire_on_every_replica,
    ttl_errors_are_nats_servers,
    expiry_survives_restart_and_leader_change,
    the_last_message_of_a_subject_leaves_a_marker,
    key_value_per_key_ttl_and_limit_markers,
);

/// Publishes with `Nats-TTL: ttl` (none when `None`) and returns the PubAck as JSON.
async fn publish(client: &async_nats::Client, subject: &str, ttl: Option<&str>) -> Value {
    let mut headers = HeaderMap::new();
    if let Some(ttl) = ttl {
        headers.insert("Nats-TTL", ttl);
    }
    let reply = within(
        "a PubAck",
        client.request_with_headers(subject.to_owned(), headers, "v".into()),
    )
    .await
    .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

async fn ttl_messages_expire_on_every_replica(fx: JsFixture) {
    let client = fx.client().await;
    let reply = fx
        .create_stream_raw(
            &client,
            json!({"name":"T","subjects":["t.>"],"allow_msg_ttl":true,"max_age":60_000_000_000i64}),
        )
        .await;
    assert_eq!(reply["config"]["allow_msg_ttl"], true, "{reply}");
    assert_eq!(publish(&client, "t.a", Some("1s")).await["seq"], 1);
    assert_eq!(publish(&client, "t.b", Some("never")).await["seq"], 2);
    assert_eq!(publish(&client, "t.c", None).await["seq"], 3);
    assert_eq!(publish(&client, "t.d", Some("3600")).await["seq"], 4);
    fx.wait_until_replicas_count("T", 3).await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("T").await.unwrap();
    assert!(stream.get_raw_message(1).await.is_err());
    assert!(stream.get_raw_message(2).await.is_ok());
    fx.shutdown().await;
}

async fn ttl_errors_are_nats_servers(fx: JsFixture) {
    let client = fx.client().await;
    fx.create_stream_raw(&client, json!({"name":"PLAIN","subjects":["p.>"]}))
        .await;
    fx.create_stream_raw(
        &client,
        json!({"name":"T","subjects":["t.>"],"allow_msg_ttl":true}),
    )
    .await;
    let disabled = publish(&client, "p.a", Some("1m")).await;
    assert_eq!(disabled["error"]["err_code"], 10166, "{disabled}");
    for invalid in ["500ms", "-1", "banana", "0"] {
        let reply = publish(&client, "t.a", Some(invalid)).await;
        assert_eq!(reply["error"]["err_code"], 10165, "{invalid}: {reply}");
        assert_eq!(reply["error"]["description"], "invalid per-message TTL");
    }
    assert_eq!(publish(&client, "t.a", Some("00")).await["seq"], 1);
    // allow_msg_ttl cannot be switched off; markers need at least a second.
    let update = api(
        &client,
        "$JS.API.STREAM.UPDATE.T",
        json!({"name":"T","subjects":["t.>"],"allow_msg_ttl":false,"num_replicas":fx.stream_replicas()}),
    )
    .await;
    assert_eq!(update["error"]["err_code"], 10052, "{update}");
    let short = api(
        &client,
        "$JS.API.STREAM.CREATE.M",
        json!({"name":"M","subjects":["m.>"],"subject_delete_marker_ttl":500_000_000}),
    )
    .await;
    assert_eq!(short["error"]["err_code"], 10052, "{short}");
    fx.shutdown().await;
}

async fn expiry_survives_restart_and_leader_change(mut fx: JsFixture) {
    let client = fx.client().await;
    fx.create_stream_raw(
        &client,
        json!({"name":"T","subjects":["t.>"],"allow_msg_ttl":true}),
    )
    .await;
    assert_eq!(publish(&client, "t.a", Some("2")).await["seq"], 1);
    assert_eq!(publish(&client, "t.b", Some("1h")).await["seq"], 2);
    fx.wait_until_replicas_hold("T", 2).await;
    // Restarted before the deadline: the index is rebuilt from the stored headers.
    fx.restart().await;
    fx.wait_until_replicas_count("T", 1).await;
    assert_eq!(fx.stream_info("T").await.state.first_sequence, 2);
    // After expiry: it stays gone; a new TTL message expires under the new leader.
    fx.restart().await;
    fx.wait_until_replicas_count("T", 1).await;
    // A publish right after a restart needs a leader and its subjects known everywhere.
    fx.wait_until_served("T").await;
    let client = fx.client().await;
    assert_eq!(publish(&client, "t.c", Some("2")).await["seq"], 3);
    fx.wait_until_replicas_hold("T", 3).await;
    if fx.stream_replicas() > 1 {
        fx.stop_leader_of("T").await;
    } else {
        fx.restart().await;
    }
    fx.wait_until_served("T").await;
    fx.wait_until_replicas_count("T", 1).await;
    fx.shutdown().await;
}

async fn the_last_message_of_a_subject_leaves_a_marker(fx: JsFixture) {
    let client = fx.client().await;
    let reply = fx
        .create_stream_raw(
            &client,
            json!({"name":"T","subjects":["t.>"],"subject_delete_marker_ttl":2_000_000_000i64}),
        )
        .await;
    // As nats-server: markers switch TTLs and rollups on.
    assert_eq!(reply["config"]["allow_msg_ttl"], true, "{reply}");
    assert_eq!(reply["config"]["allow_rollup_hdrs"], true, "{reply}");
    assert_eq!(publish(&client, "t.a", Some("1")).await["seq"], 1);
    assert_eq!(publish(&client, "t.b", Some("1")).await["seq"], 2);
    assert_eq!(publish(&client, "t.b", None).await["seq"], 3);
    // t.a's last message expires: a marker takes its place (t.b still has seq 3).
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("T").await.unwrap();
    let marker = within("the marker", async {
        loop {
            if let Ok(msg) = stream.get_last_raw_message_by_subject("t.a").await {
                if msg.sequence > 1 {
                    return msg;
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(marker.sequence, 4);
    let msg = stream.get_raw_message(4).await.unwrap();
    let header = |name| {
        msg.headers
            .get(name)
            .map(|v: &async_nats::HeaderValue| v.as_str())
    };
    assert_eq!(
        header(async_nats::header::NATS_MARKER_REASON),
        Some("MaxAge")
    );
    assert_eq!(header(async_nats::header::NATS_MESSAGE_TTL), Some("2s"));
    assert_eq!(
        msg.headers.get("Nats-Rollup").map(|v| v.as_str()),
        Some("sub")
    );
    assert!(msg.payload.is_empty());
    // The marker expires by its own TTL and leaves none: only t.b's seq 3 remains.
    fx.wait_until_replicas_count("T", 1).await;
    let info = fx.stream_info("T").await;
    assert_eq!(
        (info.state.first_sequence, info.state.last_sequence),
        (3, 4)
    );
    fx.shutdown().await;
}

async fn key_value_per_key_ttl_and_limit_markers(fx: JsFixture) {
    let js = fx.js().await;
    let store = fx
        .create_key_value(
            &js,
            kv::Config {
                bucket: "B".into(),
                history: 1,
                limit_markers: Some(Duration::from_secs(1)),
                ..Default::default()
            },
        )
        .await;
    let info = fx.stream_info("KV_B").await;
    assert!(info.config.allow_message_ttl);
    // TTLs need API level 1, as nats-server reports it.
    assert_eq!(
        info.config
            .metadata
            .get("_nats.req.level")
            .map(String::as_str),
        Some("1")
    );
    assert_eq!(
        info.config.subject_delete_marker_ttl,
        Some(Duration::from_secs(1))
    );
    store
        .create_with_ttl("k", "v".into(), Duration::from_secs(1))
        .await
        .unwrap();
    store.put("kept", "v".into()).await.unwrap();
    // The key expires and its marker reads as a purge; then the marker expires too.
    within("the key to expire", async {
        loop {
            if store.get("k").await.unwrap().is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let entry = store.entry("k").await.unwrap();
    if let Some(entry) = entry {
        assert_eq!(entry.operation, kv::Operation::Purge);
    }
    fx.wait_until_replicas_count("KV_B", 1).await;
    assert_eq!(store.get("kept").await.unwrap().as_deref(), Some(&b"v"[..]));
    // purge_with_ttl: the purge tombstone expires without a marker.
    store
        .purge_with_ttl("kept", Duration::from_secs(1))
        .await
        .unwrap();
    fx.wait_until_replicas_count("KV_B", 0).await;
    fx.shutdown().await;
}
