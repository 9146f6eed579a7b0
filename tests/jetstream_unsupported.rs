//! Settings and publish headers of JetStream features jetraft does not implement are refused
//! with a JetStream error, and nothing is stored (issue 19): a stream or consumer config that
//! asks for one is answered 10052 / 10012 (10005 for placement by tags) and no such stream or
//! consumer exists afterwards; a publish with `Nats-TTL`, `Nats-Incr`, `Nats-Batch-Id` or
//! `Nats-Schedule` is answered with nats-server's PubAck error for a stream that does not allow
//! it (counters themselves: `jetstream_counter.rs`), and the stream holds nothing. Raw API requests, so each body sets exactly one field.
//! Every scenario runs on one node (R1) and on a three-node cluster (R3).

mod common;

use async_nats::jetstream::stream;
use serde_json::{json, Value};

use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::api;
use common::within;

on_r1_and_r3!(
    unsupported_stream_settings_are_refused_and_not_stored,
    unsupported_consumer_settings_are_refused_and_not_stored,
    unsupported_publish_headers_are_refused_and_not_stored,
);

fn err_code(reply: &Value) -> u64 {
    reply["error"]["err_code"].as_u64().unwrap_or(0)
}

/// Publishes `x` to `subject` with one header and returns the PubAck JSON.
async fn publish_with_header(
    client: &async_nats::Client,
    subject: &'static str,
    name: &'static str,
    value: &str,
) -> Value {
    let mut headers = async_nats::HeaderMap::new();
    headers.insert(name, value);
    let reply = within(
        "publish request",
        client.request_with_headers(subject, headers, "x".into()),
    )
    .await
    .expect("a PubAck");
    serde_json::from_slice(&reply.payload).expect("a JSON PubAck")
}

async fn stream_names(client: &async_nats::Client) -> Vec<String> {
    let reply = api(client, "$JS.API.STREAM.NAMES", json!({})).await;
    serde_json::from_value(reply["streams"].clone()).unwrap_or_default()
}

async fn unsupported_stream_settings_are_refused_and_not_stored(fx: JsFixture) {
    let client = fx.client().await;
    let replicas = fx.stream_replicas();
    let cases = [
        (
            "mirror",
            json!({"name":"ORIGIN","external":{"api":"$JS.hub.API"}}),
            10052,
        ),
        (
            "sources",
            json!([{"name":"ORIGIN","external":{"api":"$JS.hub.API"}}]),
            10052,
        ),
        ("no_ack", json!(true), 10052),
        ("placement", json!({"tags":["ssd"]}), 10005),
    ];
    for (field, value, code) in cases {
        let mut body = json!({"name":"REFUSED","num_replicas":replicas});
        body[field] = value;
        if field != "mirror" && field != "sources" {
            body["subjects"] = json!(["x.*"]);
        }
        let reply = api(&client, "$JS.API.STREAM.CREATE.REFUSED", body).await;
        assert_eq!(err_code(&reply), code, "{field}: {reply}");
        if code == 10052 {
            let description = reply["error"]["description"].as_str().unwrap_or("");
            let named = if field == "mirror" || field == "sources" {
                "external"
            } else {
                field
            };
            assert!(description.contains(named), "{field}: {description}");
        }
        let info = api(&client, "$JS.API.STREAM.INFO.REFUSED", json!({})).await;
        assert_eq!(
            err_code(&info),
            10059,
            "{field}: stream stored anyway: {info}"
        );
    }
    assert!(stream_names(&client).await.is_empty());
    // Mirror direct without a mirror: nats-server's own refusal comes first.
    let body = json!({"name":"REFUSED","subjects":["x.*"],"mirror_direct":true});
    let reply = api(&client, "$JS.API.STREAM.CREATE.REFUSED", body).await;
    assert_eq!(
        reply["error"]["description"], "stream has no mirror but does have mirror direct",
        "{reply}"
    );

    // `allow_batched` (set by `nats bench js`) is recorded as false, what a nats-server
    // without fast batches does. `allow_msg_ttl` (tests/jetstream_ttl.rs) and `allow_atomic`
    // (tests/jetstream_batch.rs) are implemented: stored as asked, so a batch member is
    // taken as one (here without its sequence: 10175).
    let body = json!({"name":"TTL","subjects":["ttl.*"],"num_replicas":replicas,
        "allow_msg_ttl":true,"allow_atomic":true,"allow_batched":true});
    let reply = api(&client, "$JS.API.STREAM.CREATE.TTL", body).await;
    assert_eq!(reply["config"]["allow_msg_ttl"], true, "{reply}");
    assert_eq!(reply["config"]["allow_atomic"], true, "{reply}");
    assert_ne!(reply["config"]["allow_batched"], true, "{reply}");
    fx.wait_until_served("TTL").await;
    let ack = publish_with_header(&client, "ttl.a", "Nats-Batch-Id", "b1").await;
    assert_eq!(err_code(&ack), 10175, "{ack}");
    let reply = api(&client, "$JS.API.STREAM.DELETE.TTL", json!({})).await;
    assert_eq!(reply["success"], true, "{reply}");

    // An update that adds one is refused too, and the stored config keeps its old value.
    let js = async_nats::jetstream::new(client.clone());
    fx.create_stream(
        &js,
        stream::Config {
            name: "KEPT".into(),
            subjects: vec!["kept.*".into()],
            ..Default::default()
        },
    )
    .await;
    let body = json!({"name":"KEPT","subjects":["kept.*"],"num_replicas":replicas,
        "no_ack":true});
    let reply = api(&client, "$JS.API.STREAM.UPDATE.KEPT", body).await;
    assert_eq!(err_code(&reply), 10052, "{reply}");
    let info = api(&client, "$JS.API.STREAM.INFO.KEPT", json!({})).await;
    assert_ne!(info["config"]["no_ack"], true, "{info}");

    // The typed client sees the same refusal.
    let mirror = stream::Config {
        name: "MIRROR".into(),
        mirror: Some(stream::Source {
            name: "KEPT".into(),
            external: Some(stream::External {
                api_prefix: "$JS.hub.API".into(),
                delivery_prefix: None,
            }),
            ..Default::default()
        }),
        num_replicas: replicas,
        ..Default::default()
    };
    let err = js.create_stream(mirror).await.unwrap_err();
    assert!(err.to_string().contains("10052"), "{err}");
    assert_eq!(stream_names(&client).await, vec!["KEPT".to_string()]);
    fx.shutdown().await;
}

/// A client of the fixture, and the stream ORDERS on `orders.*` (replicated as the fixture is).
async fn with_orders(fx: &JsFixture) -> async_nats::Client {
    let client = fx.client().await;
    let js = async_nats::jetstream::new(client.clone());
    let config = stream::Config {
        name: "ORDERS".into(),
        subjects: vec!["orders.*".into()],
        ..Default::default()
    };
    fx.create_stream(&js, config).await;
    client
}

async fn unsupported_consumer_settings_are_refused_and_not_stored(fx: JsFixture) {
    let client = with_orders(&fx).await;
    let pull = json!({"durable_name":"C","ack_policy":"explicit"});
    let push = json!({"name":"C","deliver_subject":"dlv","ack_policy":"explicit"});
    // `pause_until`, the priority groups and `sample_freq` are implemented now
    // (tests/jetstream_pause.rs, tests/jetstream_priority.rs, tests/jetstream_advisories.rs).
    // So are ack policy `flow_control` and `sourcing` (tests/jetstream_durable_source.rs).
    let cases = [
        ("replay_policy", &pull, json!({"replay_policy":"original"})),
        ("rate_limit_bps", &push, json!({"rate_limit_bps":1024})),
    ];
    for (field, base, overrides) in cases {
        let mut config = base.clone();
        for (key, value) in overrides.as_object().expect("an object") {
            config[key] = value.clone();
        }
        let body = json!({"stream_name":"ORDERS","config":config});
        let reply = api(&client, "$JS.API.CONSUMER.CREATE.ORDERS.C", body).await;
        assert_eq!(err_code(&reply), 10012, "{field}: {reply}");
        let description = reply["error"]["description"].as_str().unwrap_or("");
        assert!(description.contains(field), "{field}: {description}");
        let info = api(&client, "$JS.API.CONSUMER.INFO.ORDERS.C", json!({})).await;
        assert_eq!(err_code(&info), 10014, "{field}: consumer stored: {info}");
    }
    // The same consumer without the unsupported settings is fine (jsm.go's zero pause time).
    let mut config = pull.clone();
    config["pause_until"] = json!("0001-01-01T00:00:00Z");
    let body = json!({"stream_name":"ORDERS","config":config});
    let reply = api(&client, "$JS.API.CONSUMER.CREATE.ORDERS.C", body).await;
    assert!(reply.get("error").is_none(), "{reply}");
    // `CONSUMER.PAUSE` is implemented: it pauses.
    let body = json!({"pause_until":"2999-01-01T00:00:00Z"});
    let reply = api(&client, "$JS.API.CONSUMER.PAUSE.ORDERS.C", body).await;
    assert_eq!(reply["paused"], json!(true), "{reply}");
    fx.shutdown().await;
}

async fn unsupported_publish_headers_are_refused_and_not_stored(fx: JsFixture) {
    let client = with_orders(&fx).await;
    let cases = [
        ("Nats-TTL", "1m", 10166),
        ("Nats-TTL", "never", 10166),
        ("Nats-Incr", "+1", 10168),
        ("Nats-Incr", "one", 10171),
        ("Nats-Batch-Id", "b1", 10174),
        ("Nats-Schedule", "@at 2999-01-01T00:00:00Z", 10188),
    ];
    for (name, value, code) in cases {
        let ack = publish_with_header(&client, "orders.new", name, value).await;
        assert_eq!(err_code(&ack), code, "{name}: {value}: {ack}");
        assert_eq!(ack["error"]["code"], 400, "{ack}");
    }
    let info = api(&client, "$JS.API.STREAM.INFO.ORDERS", json!({})).await;
    assert_eq!(info["state"]["messages"], 0, "{info}");
    assert_eq!(info["state"]["last_seq"], 0, "no sequence used: {info}");
    // An ordinary publish still works and takes the first sequence.
    let js = async_nats::jetstream::new(client.clone());
    let ack = common::jetstream::publish_acked(&js, "orders.new", "x").await;
    assert_eq!(ack.sequence, 1);
    fx.shutdown().await;
}
