//! Tests of the refusal of unsupported stream and consumer settings (`unsupported`): what the
//! real clients send by default passes, every unsupported setting is refused naming its field.

use serde_json::{json, Value};

use super::consumer_config::{ConsumerConfig, CreateConsumerRequest};
use super::stream_config::StreamConfig;

/// What natscli (jsm.go) sends for `nats stream add ORDERS --subjects "orders.*" --defaults`.
fn natscli_stream() -> Value {
    json!({"name":"ORDERS","subjects":["orders.*"],"retention":"limits","max_consumers":-1,
        "max_msgs_per_subject":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"max_msg_size":-1,
        "storage":"file","discard":"old","num_replicas":1,"duplicate_window":120000000000i64,
        "compression":"none","sealed":false,"deny_delete":false,"deny_purge":false,
        "allow_rollup_hdrs":false,"allow_direct":true,"mirror_direct":false,
        "allow_msg_ttl":false,"consumer_limits":{},"metadata":{}})
}

fn stream(body: &Value) -> StreamConfig {
    serde_json::from_value::<StreamConfig>(body.clone())
        .unwrap()
        .checked()
        .unwrap()
}

fn stream_with(field: &str, value: Value) -> StreamConfig {
    let mut body = natscli_stream();
    body[field] = value;
    if field == "mirror" || field == "sources" {
        body.as_object_mut().unwrap().remove("subjects");
    }
    stream(&body)
}

#[test]
fn client_default_streams_are_accepted() {
    stream(&natscli_stream()).refuse_unsupported().unwrap();
    // Per-message TTLs and delete markers are implemented: stored as asked (nats-py 2.16's
    // key-value bucket sets `allow_msg_ttl`; `nats kv add --marker-ttl` the marker TTL).
    let mut body = natscli_stream();
    body["allow_msg_ttl"] = json!(true);
    body["subject_delete_marker_ttl"] = json!(5_000_000_000i64);
    let stored = stream(&body).refuse_unsupported().unwrap();
    assert!(stored.allow_msg_ttl);
    assert_eq!(stored.subject_delete_marker_ttl, 5_000_000_000);
    // `nats bench js` (nats CLI 0.5.0) sets `allow_atomic` and `allow_batched` on its streams:
    // atomic batches are implemented and stored as asked; fast batches are recorded as false.
    let mut body = natscli_stream();
    body["allow_atomic"] = json!(true);
    body["allow_batched"] = json!(true);
    let stored = stream(&body).refuse_unsupported().unwrap();
    assert!(stored.allow_atomic);
    assert!(!stored.allow_batched);
    // Mirrors and sources on this cluster are implemented (tests/jetstream_mirror.rs).
    stream_with("mirror", json!({"name":"ORIGIN","filter_subject":"a.*"}))
        .refuse_unsupported()
        .unwrap();
    stream_with(
        "sources",
        json!([{"name":"A"},{"name":"B","opt_start_seq":3}]),
    )
    .refuse_unsupported()
    .unwrap();
    // Absent, null and empty forms of every refused field.
    let mut body = natscli_stream();
    for (field, value) in [
        ("mirror", Value::Null),
        ("sources", json!([])),
        ("subject_transform", json!({"src":"","dest":""})),
        ("republish", Value::Null),
        ("subject_delete_marker_ttl", json!(0)),
        ("allow_msg_counter", json!(false)),
        ("allow_atomic", json!(false)),
        ("allow_msg_schedules", json!(false)),
        ("allow_batched", json!(false)),
        ("no_ack", json!(false)),
        ("template_owner", json!("")),
        ("persist_mode", json!("async")),
        ("compression", json!("s2")),
    ] {
        body[field] = value;
    }
    stream(&body).refuse_unsupported().unwrap();
    // A key-value bucket as the clients create it.
    let kv = json!({"name":"KV_b","subjects":["$KV.b.>"],"max_msgs_per_subject":1,
        "discard":"new","allow_direct":true,"allow_rollup_hdrs":true,"deny_delete":true});
    stream(&kv).refuse_unsupported().unwrap();
}

#[test]
fn every_unsupported_stream_setting_is_refused_with_10052_naming_it() {
    let cases = [
        (
            "external",
            json!({"name":"ORIGIN","external":{"api":"$JS.other.API"}}),
        ),
        ("no_ack", json!(true)),
        ("template_owner", json!("T")),
    ];
    for (field, value) in cases {
        // Origin settings sit inside a mirror.
        let (field_set, value) = if field == "external" {
            ("mirror", value)
        } else {
            (field, value)
        };
        let err = stream_with(field_set, value)
            .refuse_unsupported()
            .expect_err(field);
        assert_eq!((err.code, err.err_code), (500, 10052), "{field}");
        assert!(
            err.description
                .ends_with(&format!("not supported by jetraft ({field})")),
            "{field}: {}",
            err.description
        );
    }
}

#[test]
fn atomic_batches_go_with_counters_and_schedules() {
    for feature in ["allow_msg_schedules", "allow_msg_counter"] {
        let mut body = natscli_stream();
        body[feature] = json!(true);
        body["allow_atomic"] = json!(true);
        let stored = stream(&body).refuse_unsupported().expect(feature);
        assert!(stored.allow_atomic, "{feature}");
    }
}

/// The body natscli sends for `nats consumer add ORDERS C --pull --defaults`: Go's zero
/// `pause_until` means "not paused".
fn natscli_consumer() -> Value {
    json!({"ack_policy":"explicit","deliver_policy":"all","durable_name":"C","name":"C",
        "max_deliver":-1,"replay_policy":"instant","num_replicas":0,
        "pause_until":"0001-01-01T00:00:00Z","sample_freq":""})
}

fn consumer(config: Value) -> Result<(), super::error::ApiError> {
    let request: CreateConsumerRequest =
        serde_json::from_value(json!({"stream_name":"ORDERS","config":config})).unwrap();
    let config: ConsumerConfig = request.config.checked(&stream(&natscli_stream())).unwrap();
    config.refuse_unsupported()
}

#[test]
fn client_default_consumers_are_accepted() {
    consumer(natscli_consumer()).unwrap();
    let mut body = natscli_consumer();
    body["pause_until"] = Value::Null;
    body["priority_policy"] = json!("none");
    body["priority_groups"] = json!([]);
    body["sample_freq"] = json!("0%");
    body["mem_storage"] = json!(true);
    consumer(body).unwrap();
    // Ack sampling, pause and priority groups are implemented (issue 19).
    for sample in ["50%", "100", "0"] {
        let mut body = natscli_consumer();
        body["sample_freq"] = json!(sample);
        consumer(body).unwrap();
    }
    let mut body = natscli_consumer();
    body["pause_until"] = json!("2999-01-01T00:00:00Z");
    consumer(body).unwrap();
    for policy in ["pinned_client", "overflow", "prioritized"] {
        let mut body = natscli_consumer();
        body["priority_policy"] = json!(policy);
        body["priority_groups"] = json!(["jobs"]);
        consumer(body).unwrap();
    }
    // A consumer a stream sources through (2.14): acknowledged by flow control.
    let mut body = natscli_consumer();
    let object = body.as_object_mut().unwrap();
    object.remove("durable_name");
    object.remove("name");
    body["deliver_subject"] = json!("dlv");
    body["ack_policy"] = json!("flow_control");
    body["sourcing"] = json!(true);
    body["ack_wait"] = json!(0);
    consumer(body).unwrap();
    // A push consumer with a queue group, flow control and heartbeats.
    consumer(
        json!({"deliver_subject":"dlv","deliver_group":"q","ack_policy":"explicit",
        "flow_control":true,"idle_heartbeat":5_000_000_000i64}),
    )
    .unwrap();
}

#[test]
fn every_unsupported_consumer_setting_is_refused_with_10012_naming_it() {
    let cases = [
        ("replay_policy", json!({"replay_policy":"original"})),
        (
            "rate_limit_bps",
            json!({"deliver_subject":"dlv","rate_limit_bps":1024}),
        ),
        ("direct", json!({"deliver_subject":"dlv","direct":true})),
    ];
    for (field, overrides) in cases {
        let mut body = natscli_consumer();
        if overrides.get("deliver_subject").is_some() || overrides.get("direct").is_some() {
            // Push (and, for `direct`, ephemeral) forms: drop the pull durable's names.
            let object = body.as_object_mut().unwrap();
            object.remove("durable_name");
            object.remove("name");
        }
        for (key, value) in overrides.as_object().unwrap() {
            body[key] = value.clone();
        }
        let err = consumer(body).expect_err(field);
        assert_eq!((err.code, err.err_code), (500, 10012), "{field}");
        assert!(
            err.description
                .ends_with(&format!("not supported by jetraft ({field})")),
            "{field}: {}",
            err.description
        );
    }
}
