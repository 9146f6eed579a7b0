//! `$JS.API.DIRECT.GET`: async-nats's direct gets and key-value store (which reads through
//! direct get when the bucket's stream has `allow_direct`), and the raw replies — headers,
//! statuses, batches with their EOB, `multi_last` — as nats-server sends them. Every
//! scenario runs on one node (R1) and on a three-node cluster with three replicas (R3), see
//! `common::fixture`.

mod common;

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use async_nats::{HeaderMap, Message, StatusCode};
use bytes::Bytes;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::within;
use futures::StreamExt;

on_r1_and_r3!(
    key_value_reads_through_direct_get,
    direct_get_replies_as_nats_server,
    without_allow_direct_nobody_answers,
);

fn header<'a>(msg: &'a Message, name: &str) -> &'a str {
    // By name as sent: async-nats keys its well-known headers apart from plain strings.
    msg.headers
        .as_ref()
        .and_then(|headers| {
            headers
                .iter()
                .find(|(key, _)| AsRef::<str>::as_ref(key) == name)
        })
        .and_then(|(_, values)| values.first())
        .map(|value| value.as_str())
        .unwrap_or_else(|| panic!("no {name} header in {msg:?}"))
}

/// Sends one direct-get request and collects the replies up to and including the first
/// status message (a single message when the request is not a batch).
async fn direct(client: &async_nats::Client, subject: &str, body: &str) -> Vec<Message> {
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, Bytes::from(body.to_string()))
        .await
        .unwrap();
    let batch = body.contains("batch") || body.contains("multi_last");
    let mut out = Vec::new();
    loop {
        let msg = within("direct reply", replies.next()).await.unwrap();
        let done = msg.status.is_some() || !batch;
        out.push(msg);
        if done {
            return out;
        }
    }
}

async fn key_value_reads_through_direct_get(fx: JsFixture) {
    let js = fx.js().await;
    let store = fx
        .create_key_value(
            &js,
            kv::Config {
                bucket: "CFG".into(),
                history: 5,
                ..Default::default()
            },
        )
        .await;
    let info = fx.stream_info("KV_CFG").await;
    assert!(info.config.allow_direct, "the bucket asks for direct gets");

    let first = store.put("a", "1".into()).await.unwrap();
    store.put("a", "2".into()).await.unwrap();
    store.put("b", "x".into()).await.unwrap();
    assert_eq!(store.get("a").await.unwrap(), Some(Bytes::from("2")));
    assert_eq!(store.get("b").await.unwrap(), Some(Bytes::from("x")));
    assert_eq!(store.get("missing").await.unwrap(), None);
    let old = store.entry_for_revision("a", first).await.unwrap().unwrap();
    assert_eq!(old.value, Bytes::from("1"));

    store.delete("a").await.unwrap();
    assert_eq!(
        store.get("a").await.unwrap(),
        None,
        "a delete marker reads as gone"
    );
    let entry = store.entry("a").await.unwrap().unwrap();
    assert_eq!(entry.operation, kv::Operation::Delete);
    // create succeeds on a deleted key, update checks the revision.
    let revision = store.create("a", "3".into()).await.unwrap();
    store.update("a", "4".into(), revision).await.unwrap();
    assert_eq!(store.get("a").await.unwrap(), Some(Bytes::from("4")));
}

async fn direct_get_replies_as_nats_server(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    let stream = fx
        .create_stream(
            &js,
            stream::Config {
                name: "D".into(),
                subjects: vec!["d.>".into()],
                allow_direct: true,
                ..Default::default()
            },
        )
        .await;
    for (subject, body) in [("d.a", "a1"), ("d.b", "b1"), ("d.a", "a2"), ("d.c", "c1")] {
        js.publish(subject, body.into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    let mut headers = HeaderMap::new();
    headers.insert("Own", "yes");
    js.publish_with_headers("d.b", headers, "b2".into())
        .await
        .unwrap()
        .await
        .unwrap();

    // async-nats's own calls.
    let msg = stream.direct_get(2).await.unwrap();
    assert_eq!(
        (msg.subject.as_str(), &msg.payload[..]),
        ("d.b", &b"b1"[..])
    );
    let last = stream.direct_get_last_for_subject("d.b").await.unwrap();
    assert_eq!((last.sequence, &last.payload[..]), (5, &b"b2"[..]));
    assert_eq!(last.headers.get("Own").map(|v| v.as_str()), Some("yes"));
    let next = stream
        .direct_get_next_for_subject("d.a", Some(2))
        .await
        .unwrap();
    assert_eq!(header(&next.message, "Nats-Sequence"), "3");
    let err = stream.direct_get(99).await.unwrap_err();
    assert_eq!(
        err.kind(),
        async_nats::jetstream::stream::DirectGetErrorKind::NotFound
    );

    // The raw reply: stored headers kept, the Nats-* headers appended.
    let reply = direct(&client, "$JS.API.DIRECT.GET.D.d.b", "").await;
    assert_eq!(reply.len(), 1);
    assert_eq!(header(&reply[0], "Own"), "yes");
    assert_eq!(header(&reply[0], "Nats-Stream"), "D");
    assert_eq!(header(&reply[0], "Nats-Subject"), "d.b");
    assert_eq!(header(&reply[0], "Nats-Sequence"), "5");
    assert!(header(&reply[0], "Nats-Time-Stamp").ends_with('Z'));

    // Statuses: empty, malformed and contradictory requests, a body on the subject form.
    for (subject, body, status) in [
        ("$JS.API.DIRECT.GET.D", "", "Empty Request"),
        ("$JS.API.DIRECT.GET.D", "{}", "Empty Request"),
        ("$JS.API.DIRECT.GET.D", "{nope", "Malformed Request"),
        (
            "$JS.API.DIRECT.GET.D",
            r#"{"seq":1,"last_by_subj":"d.a"}"#,
            "Bad Request",
        ),
        ("$JS.API.DIRECT.GET.D.d.a", r#"{"seq":1}"#, "Bad Request"),
        ("$JS.API.DIRECT.GET.D.d.zzz", "", "Message Not Found"),
    ] {
        let reply = direct(&client, subject, body).await;
        let code = if status == "Message Not Found" {
            404
        } else {
            408
        };
        assert_eq!(
            reply[0].status,
            Some(StatusCode::from_u16(code).unwrap()),
            "{body}"
        );
        assert_eq!(reply[0].description.as_deref(), Some(status), "{body}");
    }

    // no_hdr: the payload alone, without even the Nats-* headers.
    let bare = direct(
        &client,
        "$JS.API.DIRECT.GET.D",
        r#"{"seq":5,"no_hdr":true}"#,
    )
    .await;
    assert_eq!(
        (bare[0].headers.as_ref(), &bare[0].payload[..]),
        (None, &b"b2"[..])
    );

    // A batch: Nats-Num-Pending / Nats-Last-Sequence on each message, then the EOB.
    let batch = direct(&client, "$JS.API.DIRECT.GET.D", r#"{"seq":2,"batch":3}"#).await;
    let seqs: Vec<&str> = batch[..3]
        .iter()
        .map(|m| header(m, "Nats-Sequence"))
        .collect();
    assert_eq!(seqs, ["2", "3", "4"]);
    let pending: Vec<&str> = batch[..3]
        .iter()
        .map(|m| header(m, "Nats-Num-Pending"))
        .collect();
    assert_eq!(pending, ["3", "2", "1"], "what is left after each message");
    assert_eq!(header(&batch[1], "Nats-Last-Sequence"), "2");
    let eob = &batch[3];
    assert_eq!(eob.status, Some(StatusCode::from_u16(204).unwrap()));
    assert_eq!(header(eob, "Nats-Num-Pending"), "1");
    assert_eq!(header(eob, "Nats-Last-Sequence"), "4");

    // next_by_subj in a batch stops at the last match.
    let batch = direct(
        &client,
        "$JS.API.DIRECT.GET.D",
        r#"{"next_by_subj":"d.a","batch":10}"#,
    )
    .await;
    assert_eq!(batch.len(), 3);
    assert_eq!(header(&batch[1], "Nats-Sequence"), "3");
    assert_eq!(header(&batch[2], "Nats-Num-Pending"), "0");

    // multi_last: the last of each subject, optionally up to a sequence.
    let multi = direct(&client, "$JS.API.DIRECT.GET.D", r#"{"multi_last":["d.*"]}"#).await;
    let seqs: Vec<&str> = multi[..3]
        .iter()
        .map(|m| header(m, "Nats-Sequence"))
        .collect();
    assert_eq!(seqs, ["3", "4", "5"]);
    assert_eq!(header(&multi[3], "Nats-UpTo-Sequence"), "5");
    let multi = direct(
        &client,
        "$JS.API.DIRECT.GET.D",
        r#"{"multi_last":["d.a","d.b"],"up_to_seq":2}"#,
    )
    .await;
    let seqs: Vec<&str> = multi[..2]
        .iter()
        .map(|m| header(m, "Nats-Sequence"))
        .collect();
    assert_eq!(seqs, ["1", "2"]);
    let none = direct(&client, "$JS.API.DIRECT.GET.D", r#"{"multi_last":["x.*"]}"#).await;
    assert_eq!(none[0].description.as_deref(), Some("No Results"));
}

async fn without_allow_direct_nobody_answers(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream(
        &js,
        stream::Config {
            name: "P".into(),
            subjects: vec!["p.>".into()],
            ..Default::default()
        },
    )
    .await;
    js.publish("p.1", "x".into()).await.unwrap().await.unwrap();
    for subject in ["$JS.API.DIRECT.GET.P", "$JS.API.DIRECT.GET.NOPE"] {
        let outcome = tokio::time::timeout(
            Duration::from_secs(5),
            client.request(subject.to_string(), r#"{"seq":1}"#.into()),
        )
        .await
        .expect("an answer, not a timeout");
        let err = outcome.unwrap_err();
        assert_eq!(
            err.kind(),
            async_nats::client::RequestErrorKind::NoResponders,
            "{subject}"
        );
    }
}
