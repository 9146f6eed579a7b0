//! Message schedules (ADR-51) through async-nats: an `@at` schedule produces exactly one
//! message on its target at (not before) its time, with the headers nats-server 2.15.1 puts
//! on it, and is removed; one in the past fires at once; a newer schedule on a subject
//! replaces the older, a cancel removes one; restarts and leader changes before the due time
//! still fire exactly once; an `@every` schedule fires at each of its times, once each,
//! across a restart or leader change, until cancelled; a schedule with a source fires the
//! source's last message; invalid schedules and stream settings
//! get nats-server's errors. Every scenario runs on R1 and R3.

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use async_nats::jetstream::message::StreamMessage;
use async_nats::jetstream::{self, stream};
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::{api, publish_with_headers as publish};
use common::within;
use jetraft::jsapi::time::Timestamp;
use serde_json::{json, Value};

on_r1_and_r3!(
    an_at_schedule_fires_once_at_its_time,
    past_schedules_fire_at_once_and_newer_ones_replace_older,
    invalid_schedules_get_nats_servers_errors,
    schedule_settings_get_nats_servers_errors,
    schedules_fire_once_across_restart_and_leader_change,
    a_repeating_schedule_fires_at_each_time_across_a_restart,
    a_schedule_with_a_source_fires_the_sources_last_message,
    a_cron_schedule_runs_in_its_time_zone,
);

const NANOS: i64 = 1_000_000_000;

/// A publish's headers, by name and value.
type Headers<'a> = Vec<(&'a str, &'a str)>;

fn now_nanos() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// The whole second at least `seconds` from now, in Unix nanoseconds, and its `@at`.
fn at_in(seconds: i64) -> (i64, String) {
    let due = (now_nanos() / NANOS + seconds + 1) * NANOS;
    (due, at(due))
}

fn at(due_nanos: i64) -> String {
    format!("@at {}", Timestamp::from_unix_nanos(due_nanos))
}

async fn create(fx: &JsFixture, client: &async_nats::Client, extra: Value) -> Value {
    let mut body = json!({"name":"S","subjects":["s.>","t.>"],"allow_msg_schedules":true});
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    fx.create_stream_raw(client, body).await
}

/// The last message on `subject`, once there is one.
async fn wait_for_last(stream: &stream::Stream, subject: &str) -> StreamMessage {
    let seq = within(&format!("a message on {subject}"), async {
        loop {
            if let Ok(msg) = stream.get_last_raw_message_by_subject(subject).await {
                return msg.sequence;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    stream.get_raw_message(seq).await.unwrap()
}

/// Header `name` of `msg`, matched by its text (async-nats maps some `Nats-*` names to
/// standard ones a `&str` lookup misses).
fn header<'a>(msg: &'a StreamMessage, name: &str) -> Option<&'a str> {
    msg.headers
        .iter()
        .find(|(key, _)| key.to_string() == name)
        .and_then(|(_, values)| values.first())
        .map(|value| value.as_str())
}

async fn an_at_schedule_fires_once_at_its_time(fx: JsFixture) {
    let client = fx.client().await;
    let reply = create(&fx, &client, json!({"allow_msg_ttl":true})).await;
    // As nats-server: schedules switch rollups on and need API level 2.
    assert_eq!(reply["config"]["allow_msg_schedules"], true, "{reply}");
    assert_eq!(reply["config"]["allow_rollup_hdrs"], true, "{reply}");
    assert_eq!(
        reply["config"]["metadata"]["_nats.req.level"], "2",
        "{reply}"
    );
    let (due, pattern) = at_in(2);
    let ack = publish(
        &client,
        "s.a",
        &[
            ("Nats-Schedule", &pattern),
            ("Nats-Schedule-Target", "t.a"),
            ("Nats-Schedule-TTL", "5m"),
            ("Nats-Msg-Id", "m1"),
            ("Nats-TTL", "1h"),
            ("X-Custom", "kept"),
        ],
        "delayed",
    )
    .await;
    assert_eq!(ack["seq"], 1, "{ack}");
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    // Stored with the subject rollup nats-server adds.
    let schedule = stream.get_raw_message(1).await.unwrap();
    assert_eq!(header(&schedule, "Nats-Rollup"), Some("sub"));

    let produced = wait_for_last(&stream, "t.a").await;
    assert_eq!(produced.sequence, 2);
    assert!(
        produced.time.unix_timestamp_nanos() >= i128::from(due),
        "fired at {} before {due}",
        produced.time
    );
    assert_eq!(&produced.payload[..], &b"delayed"[..]);
    assert_eq!(header(&produced, "X-Custom"), Some("kept"));
    assert_eq!(header(&produced, "Nats-Scheduler"), Some("s.a"));
    assert_eq!(header(&produced, "Nats-Schedule-Next"), Some("purge"));
    assert_eq!(header(&produced, "Nats-TTL"), Some("5m"));
    for stripped in [
        "Nats-Schedule",
        "Nats-Schedule-Target",
        "Nats-Schedule-TTL",
        "Nats-Msg-Id",
        "Nats-Rollup",
    ] {
        assert_eq!(header(&produced, stripped), None, "{stripped}");
    }
    // The schedule is gone; exactly one message was produced, on every replica.
    fx.wait_until_replicas_count("S", 1).await;
    fx.wait_until_replicas_hold("S", 2).await;
    assert!(stream.get_raw_message(1).await.is_err());
    assert_eq!(fx.stream_info("S").await.state.last_sequence, 2);
    fx.shutdown().await;
}

async fn past_schedules_fire_at_once_and_newer_ones_replace_older(fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    // A schedule far ahead, replaced by one in the past on the same subject: only the
    // newer fires, at once.
    let (_, later) = at_in(3600);
    let first = [
        ("Nats-Schedule", later.as_str()),
        ("Nats-Schedule-Target", "t.old"),
    ];
    assert_eq!(publish(&client, "s.a", &first, "old").await["seq"], 1);
    let past = [
        ("Nats-Schedule", "@at 2009-11-10T23:00:00Z"),
        ("Nats-Schedule-Target", "t.new"),
    ];
    assert_eq!(publish(&client, "s.a", &past, "new").await["seq"], 2);
    let produced = wait_for_last(&stream, "t.new").await;
    assert_eq!(produced.sequence, 3);
    assert_eq!(&produced.payload[..], &b"new"[..]);
    // A cancel from another subject removes a pending schedule (and is stored itself).
    let cancelled = [
        ("Nats-Schedule", later.as_str()),
        ("Nats-Schedule-Target", "t.c"),
    ];
    assert_eq!(publish(&client, "s.c", &cancelled, "c").await["seq"], 4);
    let cancel = [("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.c")];
    assert_eq!(publish(&client, "t.x", &cancel, "").await["seq"], 5);
    // Left: the produced message and the cancel.
    fx.wait_until_replicas_count("S", 2).await;
    assert!(stream.get_last_raw_message_by_subject("s.c").await.is_err());
    assert!(stream
        .get_last_raw_message_by_subject("t.old")
        .await
        .is_err());
    // A cancel naming a subject whose last message is no schedule is refused.
    assert_eq!(publish(&client, "s.p", &[], "plain").await["seq"], 6);
    let bad = [("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.p")];
    let reply = publish(&client, "t.x", &bad, "").await;
    assert_eq!(reply["error"]["err_code"], 10212, "{reply}");
    fx.shutdown().await;
}

async fn invalid_schedules_get_nats_servers_errors(fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    fx.create_stream_raw(&client, json!({"name":"P","subjects":["p.>"]}))
        .await;
    let (_, soon) = at_in(3600);
    let soon = soon.as_str();
    let cases: Vec<(&str, Headers, u64)> = vec![
        (
            "p.a",
            vec![("Nats-Schedule", soon), ("Nats-Schedule-Target", "p.b")],
            10188,
        ),
        ("p.a", vec![("Nats-Schedule", "garbage")], 10188),
        ("p.a", vec![("Nats-Scheduler", "p.b")], 10212),
        ("s.a", vec![("Nats-Schedule", soon)], 10190),
        (
            "s.a",
            vec![("Nats-Schedule", soon), ("Nats-Schedule-Target", "s.a")],
            10190,
        ),
        (
            "s.a",
            vec![("Nats-Schedule", soon), ("Nats-Schedule-Target", "t.*")],
            10190,
        ),
        (
            "s.a",
            vec![("Nats-Schedule", soon), ("Nats-Schedule-Target", "x.a")],
            10190,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "@at tomorrow"),
                ("Nats-Schedule-Target", "t.a"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "@at 2030-01-01t00:00:00z"),
                ("Nats-Schedule-Target", "t.a"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Time-Zone", "UTC"),
            ],
            10189,
        ),
        // Repeating forms as nats-server 2.15.1 checks them.
        (
            "s.a",
            vec![
                ("Nats-Schedule", "@every 500ms"),
                ("Nats-Schedule-Target", "t.a"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "@every 1s"),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Time-Zone", "UTC"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "0 0 * * *"),
                ("Nats-Schedule-Target", "t.a"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "0 0 0 30 2 *"),
                ("Nats-Schedule-Target", "t.a"),
            ],
            10189,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", "@hourly"),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Time-Zone", "Mars/Olympus"),
            ],
            10223,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-TTL", "5m"),
            ],
            10166,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-TTL", "banana"),
            ],
            10191,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Rollup", "all"),
            ],
            10192,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Rollup", "all"),
            ],
            10192,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Source", "t.*"),
            ],
            10203,
        ),
        (
            "s.a",
            vec![
                ("Nats-Schedule", soon),
                ("Nats-Schedule-Target", "t.a"),
                ("Nats-Schedule-Source", "t.a"),
            ],
            10203,
        ),
        (
            "t.x",
            vec![("Nats-Schedule-Next", "soon"), ("Nats-Scheduler", "s.a")],
            10212,
        ),
        ("t.x", vec![("Nats-Schedule-Next", "purge")], 10212),
        ("t.x", vec![("Nats-Scheduler", "s.a")], 10212),
    ];
    for (subject, headers, code) in &cases {
        let reply = publish(&client, subject, headers, "x").await;
        assert_eq!(reply["error"]["err_code"], *code, "{headers:?}: {reply}");
    }
    // Nothing was stored.
    assert_eq!(fx.stream_info("S").await.state.messages, 0);
    assert_eq!(fx.stream_info("P").await.state.messages, 0);
    fx.shutdown().await;
}

async fn schedule_settings_get_nats_servers_errors(fx: JsFixture) {
    let client = fx.client().await;
    let replicas = fx.stream_replicas();
    let create = |body: Value| {
        let client = client.clone();
        let name = body["name"].as_str().unwrap().to_string();
        let mut body = body;
        body["num_replicas"] = json!(replicas);
        async move { api(&client, format!("$JS.API.STREAM.CREATE.{name}"), body).await }
    };
    fx.create_stream_raw(&client, json!({"name":"O","subjects":["o.>"]}))
        .await;
    let refusals = [
        (
            json!({"name":"M","mirror":{"name":"O"},"allow_msg_schedules":true}),
            10186,
        ),
        (
            json!({"name":"SRC","subjects":["src.>"],"sources":[{"name":"O"}],"allow_msg_schedules":true}),
            10187,
        ),
        (
            json!({"name":"DN","subjects":["dn.>"],"discard":"new","allow_msg_schedules":true}),
            10052,
        ),
        (
            json!({"name":"C","subjects":["c.>"],"allow_msg_counter":true,"allow_msg_schedules":true}),
            10052,
        ),
    ];
    for (body, code) in refusals {
        let reply = create(body.clone()).await;
        assert_eq!(reply["error"]["err_code"], code, "{body}: {reply}");
    }
    // Switched on by an update, never off.
    let update = |enabled: bool| {
        api(
            &client,
            "$JS.API.STREAM.UPDATE.O",
            json!({"name":"O","subjects":["o.>"],"allow_msg_schedules":enabled,"num_replicas":replicas}),
        )
    };
    let on = update(true).await;
    assert_eq!(on["config"]["allow_msg_schedules"], true, "{on}");
    assert_eq!(on["config"]["allow_rollup_hdrs"], true, "{on}");
    let off = update(false).await;
    assert_eq!(off["error"]["err_code"], 10052, "{off}");
    assert_eq!(
        off["error"]["description"],
        "message schedules can not be disabled"
    );
    fx.shutdown().await;
}

async fn schedules_fire_once_across_restart_and_leader_change(mut fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    let (due, pattern) = at_in(3);
    let headers = [
        ("Nats-Schedule", pattern.as_str()),
        ("Nats-Schedule-Target", "t.a"),
    ];
    assert_eq!(publish(&client, "s.a", &headers, "one").await["seq"], 1);
    fx.wait_until_replicas_hold("S", 1).await;
    // Restarted before the due time: the index is rebuilt from the stored headers.
    fx.restart().await;
    fx.wait_until_replicas_hold("S", 2).await;
    fx.wait_until_replicas_count("S", 1).await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let produced = wait_for_last(&stream, "t.a").await;
    assert_eq!(produced.sequence, 2);
    assert!(produced.time.unix_timestamp_nanos() >= i128::from(due));

    // The leader goes before the next one is due: the new leader fires it, once.
    fx.wait_until_served("S").await;
    let (due, pattern) = at_in(3);
    let headers = [
        ("Nats-Schedule", pattern.as_str()),
        ("Nats-Schedule-Target", "t.b"),
    ];
    assert_eq!(publish(&client, "s.b", &headers, "two").await["seq"], 3);
    fx.wait_until_replicas_hold("S", 3).await;
    if fx.stream_replicas() > 1 {
        fx.stop_leader_of("S").await;
    } else {
        fx.restart().await;
    }
    fx.wait_until_served("S").await;
    fx.wait_until_replicas_count("S", 2).await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let produced = wait_for_last(&stream, "t.b").await;
    assert_eq!(produced.sequence, 4);
    assert!(produced.time.unix_timestamp_nanos() >= i128::from(due));
    assert_eq!(fx.stream_info("S").await.state.last_sequence, 4);
    fx.shutdown().await;
}

/// The produced messages on `subject` so far: (stream time, `Nats-Schedule-Next`), in order.
async fn produced_on(stream: &stream::Stream, subject: &str, last: u64) -> Vec<(i64, i64)> {
    let mut produced = Vec::new();
    for seq in 1..=last {
        let Ok(msg) = stream.get_raw_message(seq).await else {
            continue;
        };
        if msg.subject.as_str() != subject {
            continue;
        }
        let next = header(&msg, "Nats-Schedule-Next").expect("a next time");
        let next = Timestamp::parse(next).unwrap().unix_nanos().unwrap();
        produced.push((msg.time.unix_timestamp_nanos() as i64, next));
    }
    produced
}

/// Waits until `subject` holds at least `count` produced messages; returns them.
async fn wait_for_produced(
    fx: &JsFixture,
    stream: &stream::Stream,
    subject: &str,
    count: usize,
) -> Vec<(i64, i64)> {
    within(&format!("{count} messages on {subject}"), async {
        loop {
            let last = fx.stream_info("S").await.state.last_sequence;
            let produced = produced_on(stream, subject, last).await;
            if produced.len() >= count {
                return produced;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await
}

/// Each firing at or after the time the one before announced, each announcing a later
/// whole second: no time fired twice, none fired early.
fn assert_fired_in_turn(produced: &[(i64, i64)]) {
    for pair in produced.windows(2) {
        let ((_, announced), (fired, next)) = (pair[0], pair[1]);
        assert!(fired >= announced, "fired before its time: {produced:?}");
        assert!(next > announced, "a time fired twice: {produced:?}");
    }
    for (fired, next) in produced {
        assert_eq!(next % NANOS, 0, "{produced:?}");
        assert!(next > fired, "{produced:?}");
    }
}

async fn a_repeating_schedule_fires_at_each_time_across_a_restart(mut fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    let headers = [
        ("Nats-Schedule", "@every 1s"),
        ("Nats-Schedule-Target", "t.e"),
        ("X-Kept", "yes"),
    ];
    let stored_at = now_nanos();
    assert_eq!(publish(&client, "s.e", &headers, "tick").await["seq"], 1);
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let produced = wait_for_produced(&fx, &stream, "t.e", 2).await;
    assert!(produced[0].0 >= (stored_at / NANOS) * NANOS + NANOS);
    assert_fired_in_turn(&produced);
    let msg = wait_for_last(&stream, "t.e").await;
    assert_eq!(header(&msg, "Nats-Scheduler"), Some("s.e"));
    assert_eq!(header(&msg, "X-Kept"), Some("yes"));
    assert_eq!(msg.payload.as_ref(), b"tick");
    // The schedule stays.
    assert_eq!(
        stream
            .get_last_raw_message_by_subject("s.e")
            .await
            .unwrap()
            .sequence,
        1
    );

    if fx.stream_replicas() > 1 {
        fx.stop_leader_of("S").await;
    } else {
        fx.restart().await;
    }
    fx.wait_until_served("S").await;
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let before = produced_on(
        &stream,
        "t.e",
        fx.stream_info("S").await.state.last_sequence,
    )
    .await
    .len();
    let produced = wait_for_produced(&fx, &stream, "t.e", before + 2).await;
    assert_fired_in_turn(&produced);

    // A cancel removes it.
    let cancel = [("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.e")];
    assert!(publish(&client, "t.x", &cancel, "").await["seq"]
        .as_u64()
        .is_some());
    assert!(stream.get_last_raw_message_by_subject("s.e").await.is_err());
    fx.shutdown().await;
}

async fn a_schedule_with_a_source_fires_the_sources_last_message(fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    let older = [("X-Src", "old")];
    publish(&client, "t.src", &older, "old").await;
    let newer = [("X-Src", "new"), ("Nats-Msg-Id", "m1")];
    publish(&client, "t.src", &newer, "latest").await;
    let (due, pattern) = at_in(1);
    let with_source = [
        ("Nats-Schedule", pattern.as_str()),
        ("Nats-Schedule-Target", "t.a"),
        ("Nats-Schedule-Source", "t.src"),
        ("X-Own", "yes"),
    ];
    publish(&client, "s.a", &with_source, "own").await;
    // A source without messages: the schedule's own body fires (nats-server 2.15.1).
    let empty_source = [
        ("Nats-Schedule", pattern.as_str()),
        ("Nats-Schedule-Target", "t.b"),
        ("Nats-Schedule-Source", "t.none"),
    ];
    publish(&client, "s.b", &empty_source, "own-b").await;
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let produced = wait_for_last(&stream, "t.a").await;
    assert!(produced.time.unix_timestamp_nanos() >= i128::from(due));
    assert_eq!(produced.payload.as_ref(), b"latest");
    assert_eq!(header(&produced, "X-Src"), Some("new"));
    assert_eq!(header(&produced, "X-Own"), None);
    assert_eq!(header(&produced, "Nats-Msg-Id"), None);
    assert_eq!(header(&produced, "Nats-Scheduler"), Some("s.a"));
    let own = wait_for_last(&stream, "t.b").await;
    assert_eq!(own.payload.as_ref(), b"own-b");
    fx.shutdown().await;
}

/// `Nats-Schedule-Time-Zone` names an IANA zone: the cron pattern runs in its local time, and
/// each produced message's `Nats-Schedule-Next` is written in it, as nats-server writes it
/// (Kolkata: +05:30 all year). An unknown zone, and `Local`, are refused (10223).
async fn a_cron_schedule_runs_in_its_time_zone(fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({})).await;
    for zone in ["Mars/Olympus", "Local", ""] {
        let headers = [
            ("Nats-Schedule", "* * * * * *"),
            ("Nats-Schedule-Target", "t.z"),
            ("Nats-Schedule-Time-Zone", zone),
        ];
        let reply = publish(&client, "s.z", &headers, "x").await;
        assert_eq!(reply["error"]["err_code"], 10223, "{zone:?}: {reply}");
    }
    let headers = [
        ("Nats-Schedule", "* * * * * *"),
        ("Nats-Schedule-Target", "t.z"),
        ("Nats-Schedule-Time-Zone", "Asia/Kolkata"),
    ];
    assert_eq!(publish(&client, "s.z", &headers, "tick").await["seq"], 1);
    let js = jetstream::new(client.clone());
    let stream = js.get_stream("S").await.unwrap();
    let msg = wait_for_last(&stream, "t.z").await;
    assert_eq!(header(&msg, "Nats-Scheduler"), Some("s.z"));
    let next = header(&msg, "Nats-Schedule-Next").expect("a next time");
    assert!(next.ends_with("+05:30"), "{next}");
    let next = Timestamp::parse(next)
        .expect("RFC 3339")
        .unix_nanos()
        .unwrap();
    assert_eq!(next % NANOS, 0, "a whole second");
    assert!(next > now_nanos() - 5 * NANOS, "{next}");
    // Cancelled: nothing more fires.
    let cancel = [("Nats-Schedule-Next", "purge"), ("Nats-Scheduler", "s.z")];
    publish(&client, "t.z", &cancel, "").await;
    fx.shutdown().await;
}
