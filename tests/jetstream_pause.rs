//! Consumer pause (nats-server 2.11) on the wire, through async-nats requests: a consumer
//! created paused, `$JS.API.CONSUMER.PAUSE` to pause and resume, ConsumerInfo's `paused`
//! and `pause_remaining`, nothing delivered to pull or push consumers while paused,
//! delivery once the pause passes, the pause advisories, and a pause that survives a
//! restart. Every scenario runs on R1 and R3 (`common::fixture`).

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_nats::jetstream;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::within;
use futures::StreamExt;
use serde_json::{json, Value};

on_r1_and_r3!(
    created_paused_then_resumed,
    a_pause_ends_by_itself,
    push_consumers_pause_too,
    a_pause_survives_a_restart,
    pause_errors,
);

const STREAM: &str = "ORDERS";

async fn orders(fx: &JsFixture, js: &jetstream::Context, messages: u64) {
    fx.stream_of(js, STREAM, "order", messages).await;
}

/// RFC 3339 of now + `ahead` (UTC, second precision plus milliseconds).
fn rfc3339_in(ahead: Duration) -> String {
    let at = SystemTime::now() + ahead;
    let since = at.duration_since(UNIX_EPOCH).unwrap();
    let secs = since.as_secs() as i64;
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// Subscribes consumer C's pause advisories, once every node knows (any node may publish).
async fn pause_advisories(fx: &JsFixture, client: &async_nats::Client) -> async_nats::Subscriber {
    let subject = format!("$JS.EVENT.ADVISORY.CONSUMER.PAUSE.{STREAM}.C");
    let subscriber = client.subscribe(subject.clone()).await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere(&subject).await;
    subscriber
}

async fn request(client: &async_nats::Client, subject: String, body: Value) -> Value {
    let payload = if body.is_null() {
        bytes::Bytes::new()
    } else {
        body.to_string().into()
    };
    let reply = within(&subject, client.request(subject.clone(), payload))
        .await
        .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

async fn create(client: &async_nats::Client, config: Value) -> Value {
    let name = config["durable_name"].as_str().unwrap().to_owned();
    let body = json!({"stream_name": STREAM, "config": config});
    request(
        client,
        format!("$JS.API.CONSUMER.CREATE.{STREAM}.{name}"),
        body,
    )
    .await
}

async fn consumer_info(client: &async_nats::Client, name: &str) -> Value {
    request(
        client,
        format!("$JS.API.CONSUMER.INFO.{STREAM}.{name}"),
        Value::Null,
    )
    .await
}

async fn pause(client: &async_nats::Client, name: &str, body: Value) -> Value {
    request(
        client,
        format!("$JS.API.CONSUMER.PAUSE.{STREAM}.{name}"),
        body,
    )
    .await
}

fn status(msg: &async_nats::Message) -> Option<u16> {
    msg.status.map(|s| s.as_u16())
}

async fn created_paused_then_resumed(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 2).await;
    let mut advisories = pause_advisories(&fx, &client).await;
    let created = create(
        &client,
        json!({"durable_name":"C","ack_policy":"explicit",
               "pause_until": rfc3339_in(Duration::from_secs(3600))}),
    )
    .await;
    assert!(created.get("error").is_none(), "{created}");
    assert_eq!(created["paused"], json!(true));
    let info = consumer_info(&client, "C").await;
    assert_eq!(info["paused"], json!(true));
    assert!(info["pause_remaining"].as_i64().unwrap() > 3_000_000_000_000);
    assert_eq!(info["config"]["metadata"]["_nats.req.level"], json!("1"));

    // A pull request waits and expires: nothing is delivered while paused.
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let next = format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.C");
    client
        .publish_with_reply(
            next.clone(),
            inbox.clone(),
            r#"{"batch":1,"expires":300000000}"#.into(),
        )
        .await
        .unwrap();
    let reply = within("408 while paused", replies.next()).await.unwrap();
    assert_eq!(status(&reply), Some(408));

    // Resume: an empty body (and the answer as nats-server gives it).
    let resumed = pause(&client, "C", Value::Null).await;
    assert_eq!(
        resumed["type"],
        json!("io.nats.jetstream.api.v1.consumer_pause_response")
    );
    assert_eq!(resumed["paused"], json!(false));
    assert_eq!(resumed["pause_until"], json!("0001-01-01T00:00:00Z"));
    assert!(resumed.get("pause_remaining").is_none());
    let advisory = within("resume advisory", advisories.next()).await.unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(
        advisory["type"],
        json!("io.nats.jetstream.advisory.v1.consumer_pause")
    );
    assert_eq!(advisory["paused"], json!(false));
    let info = consumer_info(&client, "C").await;
    assert!(info.get("paused").is_none() && info.get("pause_remaining").is_none());

    client
        .publish_with_reply(
            next,
            inbox.clone(),
            r#"{"batch":2,"expires":5000000000}"#.into(),
        )
        .await
        .unwrap();
    for expected in ["order 1", "order 2"] {
        let msg = within("delivery after resume", replies.next())
            .await
            .unwrap();
        assert_eq!(&msg.payload[..], expected.as_bytes());
    }
}

async fn a_pause_ends_by_itself(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 1).await;
    let created = create(&client, json!({"durable_name":"C","ack_policy":"explicit"})).await;
    assert!(created.get("error").is_none(), "{created}");
    let mut advisories = pause_advisories(&fx, &client).await;
    let until = rfc3339_in(Duration::from_millis(400));
    let paused = pause(&client, "C", json!({"pause_until": until})).await;
    assert_eq!(paused["paused"], json!(true), "{paused}");
    assert!(paused["pause_remaining"].as_i64().unwrap() > 0);
    let advisory = within("pause advisory", advisories.next()).await.unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(advisory["paused"], json!(true));
    assert_eq!(advisory["consumer"], json!("C"));

    // A waiting request gets the message once the pause has passed, and the end is advised.
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.C"),
            inbox,
            r#"{"batch":1,"expires":20000000000}"#.into(),
        )
        .await
        .unwrap();
    let msg = within("delivery after the pause", replies.next())
        .await
        .unwrap();
    assert_eq!(&msg.payload[..], b"order 1");
    let advisory = within("end-of-pause advisory", advisories.next())
        .await
        .unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(advisory["paused"], json!(false));
    assert!(consumer_info(&client, "C").await.get("paused").is_none());
}

async fn push_consumers_pause_too(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 1).await;
    let deliver = client.new_inbox();
    let mut delivered = client.subscribe(deliver.clone()).await.unwrap();
    let created = create(
        &client,
        json!({"durable_name":"P","deliver_subject": deliver,"ack_policy":"explicit",
               "pause_until": rfc3339_in(Duration::from_secs(3600))}),
    )
    .await;
    assert!(created.get("error").is_none(), "{created}");
    assert_eq!(consumer_info(&client, "P").await["paused"], json!(true));
    // Nothing comes while paused (a bounded look, not a timing claim).
    let early = tokio::time::timeout(Duration::from_millis(300), delivered.next()).await;
    assert!(early.is_err(), "delivered while paused: {:?}", early.ok());
    let resumed = pause(&client, "P", json!({"pause_until":"0001-01-01T00:00:00Z"})).await;
    assert_eq!(resumed["paused"], json!(false));
    let msg = within("push delivery after resume", delivered.next())
        .await
        .unwrap();
    assert_eq!(&msg.payload[..], b"order 1");
}

async fn a_pause_survives_a_restart(mut fx: JsFixture) {
    {
        let client = fx.client().await;
        let js = jetstream::new(client.clone());
        orders(&fx, &js, 1).await;
        let created = create(
            &client,
            json!({"durable_name":"C","ack_policy":"explicit",
                   "pause_until": rfc3339_in(Duration::from_secs(3600))}),
        )
        .await;
        assert!(created.get("error").is_none(), "{created}");
    }
    fx.restart().await;
    fx.wait_until_served(STREAM).await;
    let client = fx.client().await;
    let info = consumer_info(&client, "C").await;
    assert_eq!(info["paused"], json!(true), "{info}");
    assert!(info["config"]["pause_until"].is_string());
}

async fn pause_errors(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 0).await;
    let missing = pause(&client, "nobody", json!({})).await;
    assert_eq!(missing["error"]["err_code"], json!(10014));
    let subject = "$JS.API.CONSUMER.PAUSE.NOSTREAM.C".to_string();
    let missing = request(&client, subject, json!({})).await;
    assert_eq!(missing["error"]["err_code"], json!(10059));
}
