//! Atomic batch publish (NATS ADR-50, `allow_atomic`) through async-nats, which has no batch
//! API yet (0.42): raw publishes with the `Nats-Batch-Id`, `Nats-Batch-Sequence` and
//! `Nats-Batch-Commit` headers, as nats-server's own tests drive it. A committed batch is
//! stored whole with consecutive sequences on every replica; an abandoned, gapped or refused
//! batch stores nothing; the answers (empty member replies, the commit's PubAck with `batch`
//! and `count`, every error) are nats-server 2.15.1's; a batch staged on a leader that stops
//! is lost whole. Counter increments and schedules go in batches too (nats-server 2.12).
//! Every scenario runs on R1 and R3.

mod common;

use async_nats::jetstream;
use async_nats::HeaderMap;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::api;
use common::within;
use serde_json::{json, Value};

on_r1_and_r3!(
    a_committed_batch_is_stored_whole_and_in_order,
    broken_or_unfinished_batches_store_nothing,
    batch_errors_are_nats_servers,
    batch_limits_are_nats_servers,
    a_refused_commit_stores_nothing,
    a_leader_change_mid_batch_loses_the_whole_batch,
    counters_and_schedules_go_in_batches,
);

async fn create(fx: &JsFixture, client: &async_nats::Client, body: Value) -> Value {
    let reply = fx.create_stream_raw(client, body).await;
    // On R3 a publish without a reply reaching a node before the stream's interest does
    // would be dropped (core NATS), which would make a batch look gapped.
    for subject in reply["config"]["subjects"].as_array().into_iter().flatten() {
        let literal = subject.as_str().unwrap().replace(['>', '*'], "x");
        fx.wait_until_known_everywhere(&literal).await;
    }
    reply
}

/// Stream `T` on `t.>` taking atomic batches; its create reply.
async fn create_atomic(fx: &JsFixture, client: &async_nats::Client) -> Value {
    create(
        fx,
        client,
        json!({"name":"T","subjects":["t.>"],"allow_atomic":true}),
    )
    .await
}

fn batch_headers(id: &str, seq: u64, commit: Option<&str>, extra: &[(&str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("Nats-Batch-Id", id);
    headers.insert("Nats-Batch-Sequence", seq.to_string().as_str());
    if let Some(commit) = commit {
        headers.insert("Nats-Batch-Commit", commit);
    }
    for (name, value) in extra {
        headers.insert(*name, *value);
    }
    headers
}

/// Sends a batch member as a request and returns the reply's payload (empty for a staged
/// member, a PubAck or its error otherwise).
async fn member(
    client: &async_nats::Client,
    subject: &str,
    id: &str,
    seq: u64,
    commit: Option<&str>,
    extra: &[(&str, &str)],
) -> Vec<u8> {
    let payload = format!("{id}-{seq}");
    member_with(client, subject, id, seq, commit, extra, &payload).await
}

/// [`member`] with its own payload.
async fn member_with(
    client: &async_nats::Client,
    subject: &str,
    id: &str,
    seq: u64,
    commit: Option<&str>,
    extra: &[(&str, &str)],
    payload: &str,
) -> Vec<u8> {
    let headers = batch_headers(id, seq, commit, extra);
    let reply = send_member(client, subject, headers, payload.to_owned()).await;
    reply.expect("a reply").payload.to_vec()
}

/// Sends one batch member as a request; its reply, or why there is none.
async fn send_member(
    client: &async_nats::Client,
    subject: &str,
    headers: HeaderMap,
    payload: String,
) -> Result<async_nats::Message, async_nats::RequestError> {
    within(
        "a batch member's reply",
        client.request_with_headers(subject.to_owned(), headers, payload.into()),
    )
    .await
}

/// [`acked`] while the stream's group may be electing: `None` if the member met no leader
/// (only a leader subscribes the stream's subjects, so the request gets the 503
/// no-responders status, as from nats-server).
async fn acked_unless_leaderless(
    client: &async_nats::Client,
    subject: &str,
    id: &str,
    seq: u64,
    commit: Option<&str>,
) -> Option<Value> {
    let headers = batch_headers(id, seq, commit, &[]);
    match send_member(client, subject, headers, format!("{id}-{seq}")).await {
        Ok(reply) => Some(
            serde_json::from_slice(&reply.payload)
                .unwrap_or_else(|e| panic!("{e}: {:?}", reply.payload)),
        ),
        Err(e) if e.kind() == async_nats::RequestErrorKind::NoResponders => None,
        Err(e) => panic!("a batch member's reply: {e}"),
    }
}

/// A member whose reply must be a PubAck (or its error), as JSON.
async fn acked(
    client: &async_nats::Client,
    subject: &str,
    id: &str,
    seq: u64,
    commit: Option<&str>,
    extra: &[(&str, &str)],
) -> Value {
    let payload = member(client, subject, id, seq, commit, extra).await;
    serde_json::from_slice(&payload).unwrap_or_else(|e| panic!("{e}: {payload:?}"))
}

/// Publishes a member without a reply subject.
async fn staged(client: &async_nats::Client, subject: &str, id: &str, seq: u64) {
    let headers = batch_headers(id, seq, None, &[]);
    client
        .publish_with_headers(subject.to_owned(), headers, format!("{id}-{seq}").into())
        .await
        .unwrap();
}

/// A plain publish's sequence: shows which sequences a refused batch did not use.
async fn plain(client: &async_nats::Client, subject: &str) -> u64 {
    let reply = within(
        "a PubAck",
        client.request(subject.to_owned(), "plain".into()),
    )
    .await
    .unwrap();
    let ack: Value = serde_json::from_slice(&reply.payload).unwrap();
    ack["seq"].as_u64().unwrap_or_else(|| panic!("{ack}"))
}

fn err_code(reply: &Value) -> u64 {
    reply["error"]["err_code"]
        .as_u64()
        .unwrap_or_else(|| panic!("an error: {reply}"))
}

async fn a_committed_batch_is_stored_whole_and_in_order(fx: JsFixture) {
    let client = fx.client().await;
    let reply = create_atomic(&fx, &client).await;
    assert_eq!(reply["config"]["allow_atomic"], true, "{reply}");
    assert_eq!(plain(&client, "t.first").await, 1);
    // Members with a reply subject get an empty reply; the commit gets the PubAck.
    for seq in 1..=3 {
        let subject = format!("t.{seq}");
        assert!(member(&client, &subject, "b1", seq, None, &[])
            .await
            .is_empty());
    }
    staged(&client, "t.4", "b1", 4).await;
    let commit = acked(&client, "t.5", "b1", 5, Some("1"), &[]).await;
    assert_eq!(
        commit,
        json!({"stream":"T","seq":6,"batch":"b1","count":5}),
        "{commit}"
    );
    // `eob` commits without storing its own message.
    staged(&client, "t.x", "b2", 1).await;
    let commit = acked(&client, "t.eob", "b2", 2, Some("eob"), &[]).await;
    assert_eq!(commit, json!({"stream":"T","seq":7,"batch":"b2","count":1}));
    fx.wait_until_replicas_hold("T", 7).await;
    fx.wait_until_replicas_count("T", 7).await;
    let stream = jetstream::new(client.clone())
        .get_stream("T")
        .await
        .unwrap();
    for (seq, subject, payload) in [
        (2, "t.1", "b1-1"),
        (4, "t.3", "b1-3"),
        (6, "t.5", "b1-5"),
        (7, "t.x", "b2-1"),
    ] {
        let msg = stream.get_raw_message(seq).await.unwrap();
        assert_eq!(
            (msg.subject.as_str(), &msg.payload[..]),
            (subject, payload.as_bytes())
        );
        // Stored as published, batch headers included (as nats-server stores them).
        let headers = msg.headers;
        assert_eq!(
            headers.get("Nats-Batch-Id").unwrap().as_str(),
            subject_batch(seq)
        );
    }
    assert_eq!(plain(&client, "t.last").await, 8);
    drop(client);
    // The members' bodies were written like any message's: they read back after a restart.
    let mut fx = fx;
    fx.restart().await;
    let stream = fx.js().await.get_stream("T").await.unwrap();
    let msg = stream.get_raw_message(6).await.unwrap();
    assert_eq!(&msg.payload[..], b"b1-5");
    fx.shutdown().await;
}

fn subject_batch(seq: u64) -> &'static str {
    if seq == 7 {
        "b2"
    } else {
        "b1"
    }
}

async fn broken_or_unfinished_batches_store_nothing(fx: JsFixture) {
    let client = fx.client().await;
    create_atomic(&fx, &client).await;
    // Never committed.
    staged(&client, "t.a", "open", 1).await;
    staged(&client, "t.a", "open", 2).await;
    // A gap drops the batch; its commit then finds nothing.
    staged(&client, "t.a", "gap", 1).await;
    assert_eq!(
        err_code(&acked(&client, "t.a", "gap", 3, None, &[]).await),
        10176
    );
    assert_eq!(
        err_code(&acked(&client, "t.a", "gap", 2, Some("1"), &[]).await),
        10176
    );
    // No start.
    assert_eq!(
        err_code(&acked(&client, "t.a", "late", 2, Some("1"), &[]).await),
        10176
    );
    // Started again.
    staged(&client, "t.a", "again", 1).await;
    assert_eq!(
        err_code(&acked(&client, "t.a", "again", 1, None, &[]).await),
        10176
    );
    assert_eq!(
        err_code(&acked(&client, "t.a", "again", 2, Some("1"), &[]).await),
        10176
    );
    // An invalid commit value.
    staged(&client, "t.a", "bad", 1).await;
    let bad = acked(&client, "t.a", "bad", 2, Some("yes"), &[]).await;
    assert_eq!(err_code(&bad), 10200);
    assert_eq!(
        bad["error"]["description"],
        "atomic publish batch commit is invalid"
    );
    assert_eq!(
        err_code(&acked(&client, "t.a", "bad", 3, Some("1"), &[]).await),
        10176
    );
    // An `eob` with nothing before it.
    assert_eq!(
        err_code(&acked(&client, "t.a", "empty", 1, Some("eob"), &[]).await),
        10176
    );
    // Nothing of any of them used a sequence.
    assert_eq!(plain(&client, "t.plain").await, 1);
    fx.wait_until_replicas_count("T", 1).await;
    fx.shutdown().await;
}

async fn batch_errors_are_nats_servers(fx: JsFixture) {
    let client = fx.client().await;
    create(&fx, &client, json!({"name":"OFF","subjects":["off.>"]})).await;
    let off = acked(&client, "off.a", "b", 1, Some("1"), &[]).await;
    assert_eq!(off["error"]["err_code"], 10174, "{off}");
    assert_eq!(off["error"]["description"], "atomic publish is disabled");
    assert_eq!(off["stream"], "OFF");

    create_atomic(&fx, &client).await;
    let mut no_seq = HeaderMap::new();
    no_seq.insert("Nats-Batch-Id", "b");
    let reply = within(
        "a reply",
        client.request_with_headers("t.a".to_owned(), no_seq, "x".into()),
    )
    .await
    .unwrap();
    let missing: Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(err_code(&missing), 10175);
    assert_eq!(
        missing["error"]["description"],
        "atomic publish sequence is missing"
    );

    let long = "A".repeat(65);
    assert_eq!(
        err_code(&acked(&client, "t.a", &long, 1, Some("1"), &[]).await),
        10179
    );
    let ok = "A".repeat(64);
    assert_eq!(
        acked(&client, "t.a", &ok, 1, Some("1"), &[]).await["count"],
        1
    );

    let last_msg_id = [("Nats-Expected-Last-Msg-Id", "x")];
    let unsupported = acked(&client, "t.a", "u", 1, Some("1"), &last_msg_id).await;
    assert_eq!(err_code(&unsupported), 10177);
    assert_eq!(
        unsupported["error"]["description"],
        "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id"
    );
    // A duplicate message id, stored before or twice in the batch.
    let id = [("Nats-Msg-Id", "m1")];
    assert_eq!(
        acked(&client, "t.a", "d1", 1, Some("1"), &id).await["seq"],
        2
    );
    assert_eq!(
        err_code(&acked(&client, "t.a", "d2", 1, Some("1"), &id).await),
        10201
    );
    assert!(
        member(&client, "t.a", "d3", 1, None, &[("Nats-Msg-Id", "m2")])
            .await
            .is_empty()
    );
    let twice = acked(&client, "t.a", "d3", 2, Some("1"), &[("Nats-Msg-Id", "m2")]).await;
    assert_eq!(err_code(&twice), 10201);
    // The stream's own refusals, answered at the commit.
    // A staged member's reply is empty even when the stream will refuse it.
    let ttl = member(&client, "t.a", "ttl", 1, None, &[("Nats-TTL", "5s")]).await;
    assert!(ttl.is_empty(), "{ttl:?}");
    assert_eq!(
        err_code(&acked(&client, "t.a", "ttl", 2, Some("1"), &[]).await),
        10166
    );
    let other = [("Nats-Expected-Stream", "X")];
    assert_eq!(
        err_code(&acked(&client, "t.a", "es", 1, Some("1"), &other).await),
        10060
    );

    // A mirror cannot take batches of its own.
    let mirror = api(
        &client,
        "$JS.API.STREAM.CREATE.M",
        json!({"name":"M","mirror":{"name":"T"},"allow_atomic":true,
               "num_replicas":fx.stream_replicas()}),
    )
    .await;
    assert_eq!(mirror["error"]["err_code"], 10198, "{mirror}");
    // Switched off: batches are refused again, and nothing above was stored beyond its
    // two successful commits.
    let update = api(
        &client,
        "$JS.API.STREAM.UPDATE.T",
        json!({"name":"T","subjects":["t.>"],"num_replicas":fx.stream_replicas()}),
    )
    .await;
    assert!(update["error"].is_null(), "{update}");
    assert!(update["config"].get("allow_atomic").is_none(), "{update}");
    assert_eq!(
        err_code(&acked(&client, "t.a", "z", 1, Some("1"), &[]).await),
        10174
    );
    assert_eq!(plain(&client, "t.plain").await, 3);
    fx.shutdown().await;
}

async fn batch_limits_are_nats_servers(fx: JsFixture) {
    let client = fx.client().await;
    create_atomic(&fx, &client).await;
    // 1,000 members commit; the 1,001st is refused and the batch dropped.
    for seq in 1..1000 {
        staged(&client, "t.a", "full", seq).await;
    }
    let full = acked(&client, "t.a", "full", 1000, Some("1"), &[]).await;
    assert_eq!(full["count"], 1000, "{full}");
    assert_eq!(full["seq"], 1000, "{full}");
    for seq in 1..=1000 {
        staged(&client, "t.a", "over", seq).await;
    }
    let over = acked(&client, "t.a", "over", 1001, Some("1"), &[]).await;
    assert_eq!(err_code(&over), 10199);
    assert_eq!(
        over["error"]["description"],
        "atomic publish batch is too large: 1000"
    );
    // 50 batches in flight; the 51st is refused with 429.
    for batch in 0..50 {
        staged(&client, "t.b", &format!("in{batch}"), 1).await;
    }
    let too_many = acked(&client, "t.b", "in50", 1, Some("1"), &[]).await;
    assert_eq!(err_code(&too_many), 10210);
    assert_eq!(too_many["error"]["code"], 429);
    // The open ones still commit.
    let commit = acked(&client, "t.b", "in0", 2, Some("1"), &[]).await;
    assert_eq!(commit["count"], 2, "{commit}");
    fx.wait_until_replicas_count("T", 1002).await;
    fx.shutdown().await;
}

async fn a_refused_commit_stores_nothing(fx: JsFixture) {
    let client = fx.client().await;
    create(
        &fx,
        &client,
        json!({"name":"T","subjects":["t.>"],"allow_atomic":true,
               "max_msgs":3,"discard":"new"}),
    )
    .await;
    assert_eq!(plain(&client, "t.a").await, 1);
    // The third member expects the sequence before the batch: the whole batch is refused.
    staged(&client, "t.b", "b", 1).await;
    staged(&client, "t.c", "b", 2).await;
    let wrong = [("Nats-Expected-Last-Sequence", "1")];
    let refused = acked(&client, "t.d", "b", 3, Some("1"), &wrong).await;
    assert_eq!(err_code(&refused), 10071);
    assert_eq!(refused["error"]["description"], "wrong last sequence: 3");
    // Three more would pass max_msgs (discard new): refused whole, not stored in part.
    staged(&client, "t.b", "c", 1).await;
    staged(&client, "t.c", "c", 2).await;
    let full = acked(&client, "t.d", "c", 3, Some("1"), &[]).await;
    assert_eq!(err_code(&full), 10077, "{full}");
    assert_eq!(plain(&client, "t.e").await, 2);
    fx.wait_until_replicas_count("T", 2).await;
    fx.shutdown().await;
}

async fn a_leader_change_mid_batch_loses_the_whole_batch(mut fx: JsFixture) {
    let client = fx.client().await;
    create_atomic(&fx, &client).await;
    for seq in 1..=3 {
        let reply = member(&client, "t.a", "lost", seq, None, &[]).await;
        assert!(reply.is_empty(), "{}", String::from_utf8_lossy(&reply));
    }
    drop(client);
    // The staging leader goes (on R1 the node restarts): its staged batch goes with it.
    if fx.stream_replicas() > 1 {
        fx.stop_leader_of("T").await;
    } else {
        fx.restart().await;
    }
    fx.wait_until_served("T").await;
    fx.wait_until_known_everywhere("t.a").await;
    let client = fx.client().await;
    // Two of three nodes under load may elect once more, so a request may meet no leader
    // (the 503 no-responders status, or 10008): a client asks again once one is elected,
    // as here (a few times at most).
    let mut commit = Value::Null;
    for _ in 1..=20 {
        match acked_unless_leaderless(&client, "t.a", "lost", 4, Some("1")).await {
            Some(answer) if answer["error"]["err_code"] != 10008 => {
                commit = answer;
                break;
            }
            _ => fx.wait_until_served("T").await,
        }
    }
    assert_eq!(err_code(&commit), 10176, "{commit}");
    // Nothing of it was stored anywhere; a new batch commits under the new leader. A batch
    // that met no leader (its first member dropped, or its commit refused) stored nothing
    // either, and the client starts another.
    let mut next = Value::Null;
    for attempt in 1..=20 {
        fx.wait_until_served("T").await;
        let id = format!("next{attempt}");
        staged(&client, "t.b", &id, 1).await;
        next = acked_unless_leaderless(&client, "t.b", &id, 2, Some("1"))
            .await
            .unwrap_or_else(|| json!({"error":{"description":"no responders"}}));
        if next.get("error").is_none() {
            assert_eq!(next, json!({"stream":"T","seq":2,"batch":id,"count":2}));
            break;
        }
    }
    assert!(next.get("error").is_none(), "no batch committed: {next}");
    fx.wait_until_replicas_count("T", 2).await;
    fx.shutdown().await;
}

/// The body of the last message on `subject` of stream `stream`, with its headers.
async fn last_on(client: &async_nats::Client, stream: &str, subject: &str) -> (HeaderMap, String) {
    let stream = jetstream::new(client.clone())
        .get_stream(stream)
        .await
        .unwrap();
    let msg = within(
        "the last message",
        stream.get_last_raw_message_by_subject(subject),
    )
    .await
    .unwrap_or_else(|e| panic!("the last message on {subject}: {e}"));
    (
        msg.headers,
        String::from_utf8_lossy(&msg.payload).into_owned(),
    )
}

async fn counters_and_schedules_go_in_batches(fx: JsFixture) {
    let client = fx.client().await;
    create(
        &fx,
        &client,
        json!({"name":"C","subjects":["c.>"],"allow_msg_counter":true,"allow_atomic":true}),
    )
    .await;
    let incr = |value: &'static str| [("Nats-Incr", value)];
    let lone = {
        let mut headers = HeaderMap::new();
        headers.insert("Nats-Incr", "10");
        let reply = within(
            "a PubAck",
            client.request_with_headers("c.a", headers, "".into()),
        )
        .await
        .unwrap();
        serde_json::from_slice::<Value>(&reply.payload).unwrap()
    };
    assert_eq!(lone["val"], "10", "{lone}");
    // Each increment counts from the one before it on its subject, in the batch too.
    for (seq, subject, value) in [(1, "c.a", "1"), (2, "c.b", "5")] {
        let reply = member_with(&client, subject, "k1", seq, None, &incr(value), "").await;
        assert!(reply.is_empty(), "{reply:?}");
    }
    let reply = member_with(&client, "c.a", "k1", 3, Some("1"), &incr("2"), "").await;
    let commit: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(commit["seq"], 4, "{commit}");
    assert_eq!(commit["count"], 3, "{commit}");
    fx.wait_until_replicas_hold("C", 4).await;
    assert_eq!(last_on(&client, "C", "c.a").await.1, r#"{"val":"13"}"#);
    assert_eq!(last_on(&client, "C", "c.b").await.1, r#"{"val":"5"}"#);
    // A member that is no increment refuses the whole batch.
    member_with(&client, "c.a", "k2", 1, None, &incr("1"), "").await;
    let reply = member_with(&client, "c.a", "k2", 2, Some("1"), &incr("1"), "payload").await;
    let refused: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(err_code(&refused), 10170, "{refused}");
    assert_eq!(last_on(&client, "C", "c.a").await.1, r#"{"val":"13"}"#);

    create(
        &fx,
        &client,
        json!({"name":"S","subjects":["s.>"],"allow_msg_schedules":true,"allow_atomic":true}),
    )
    .await;
    let schedule = [
        ("Nats-Schedule", "@at 2020-01-01T00:00:00Z"),
        ("Nats-Schedule-Target", "s.out"),
    ];
    member_with(&client, "s.sched", "s1", 1, None, &schedule, "later").await;
    let commit = acked(&client, "s.data", "s1", 2, Some("1"), &[]).await;
    assert_eq!(commit["count"], 2, "{commit}");
    // The schedule is due: it fires once, from the batch as from a lone publish.
    let produced = within("the schedule to fire", async {
        loop {
            let stream = jetstream::new(client.clone())
                .get_stream("S")
                .await
                .unwrap();
            if let Ok(msg) = stream.get_last_raw_message_by_subject("s.out").await {
                return msg;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(&produced.payload[..], b"later");
    assert_eq!(
        produced.headers.get("Nats-Scheduler").unwrap().as_str(),
        "s.sched"
    );
    // A schedule is stored with `Nats-Rollup: sub`: a second one on its subject in the same
    // batch would roll up the first (nats-server's 10111).
    member_with(&client, "s.twice", "s2", 1, None, &schedule, "one").await;
    let reply = member_with(&client, "s.twice", "s2", 2, Some("1"), &schedule, "two").await;
    let refused: Value = serde_json::from_slice(&reply).unwrap();
    assert_eq!(err_code(&refused), 10111, "{refused}");
    assert_eq!(refused["error"]["description"], "batch rollup sub invalid");
    fx.shutdown().await;
}
