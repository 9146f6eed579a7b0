//! Pull-consumer priority groups (ADR-42) on the wire, through async-nats requests: the
//! `pinned_client` pin (the `Nats-Pin-Id` header, `423` for a wrong pin, ConsumerInfo's
//! `priority_groups`, `$JS.API.CONSUMER.UNPIN`, the pinned/unpinned advisories, the pin
//! lapsing after `priority_timeout`), `overflow` thresholds, `prioritized` order, and the
//! `400`s for misused pull fields. Every scenario runs on R1 and R3 (`common::fixture`).

mod common;

use std::time::Duration;

use async_nats::jetstream;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::publish_acked;
use common::within;
use futures::StreamExt;
use serde_json::{json, Value};

on_r1_and_r3!(
    pinned_client_pin_and_unpin,
    a_pin_lapses_after_priority_timeout,
    overflow_serves_past_the_threshold,
    prioritized_serves_the_lowest_priority_first,
    misused_pull_fields_get_400,
);

const STREAM: &str = "JOBS";

async fn jobs(fx: &JsFixture, js: &jetstream::Context, messages: u64) {
    fx.stream_of(js, STREAM, "job", messages).await;
}

async fn request(client: &async_nats::Client, subject: String, body: Value) -> Value {
    let reply = within(
        &subject,
        client.request(subject.clone(), body.to_string().into()),
    )
    .await
    .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

/// Creates durable `name` with `extra` config fields; panics on an error answer.
async fn create(client: &async_nats::Client, name: &str, extra: Value) -> Value {
    let mut config = json!({"durable_name": name, "ack_policy": "explicit"});
    for (key, value) in extra.as_object().unwrap() {
        config[key] = value.clone();
    }
    let body = json!({"stream_name": STREAM, "config": config});
    let created = request(
        client,
        format!("$JS.API.CONSUMER.CREATE.{STREAM}.{name}"),
        body,
    )
    .await;
    assert!(created.get("error").is_none(), "{created}");
    created
}

/// One pull request's inbox.
struct Puller {
    client: async_nats::Client,
    inbox: String,
    replies: async_nats::Subscriber,
}

impl Puller {
    async fn new(client: &async_nats::Client) -> Puller {
        let inbox = client.new_inbox();
        let replies = client.subscribe(inbox.clone()).await.unwrap();
        Puller {
            client: client.clone(),
            inbox,
            replies,
        }
    }

    async fn pull(&self, consumer: &str, body: Value) {
        self.client
            .publish_with_reply(
                format!("$JS.API.CONSUMER.MSG.NEXT.{STREAM}.{consumer}"),
                self.inbox.clone(),
                body.to_string().into(),
            )
            .await
            .unwrap();
    }

    async fn next(&mut self, what: &str) -> async_nats::Message {
        within(what, self.replies.next()).await.unwrap()
    }
}

fn status(msg: &async_nats::Message) -> (Option<u16>, Option<String>) {
    (msg.status.map(|s| s.as_u16()), msg.description.clone())
}

fn pin_of(msg: &async_nats::Message) -> String {
    let headers = msg.headers.as_ref().expect("headers");
    headers.get("Nats-Pin-Id").expect("Nats-Pin-Id").to_string()
}

async fn consumer_info(client: &async_nats::Client, name: &str) -> Value {
    request(
        client,
        format!("$JS.API.CONSUMER.INFO.{STREAM}.{name}"),
        json!({}),
    )
    .await
}

/// Subscribes `subject` once every node knows it (advisories come from the leader).
async fn subscribe_everywhere(
    fx: &JsFixture,
    client: &async_nats::Client,
    subject: String,
) -> async_nats::Subscriber {
    let subscriber = client.subscribe(subject.clone()).await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere(&subject).await;
    subscriber
}

async fn pinned_client_pin_and_unpin(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    jobs(&fx, &js, 4).await;
    let mut pinned_advisories = subscribe_everywhere(
        &fx,
        &client,
        format!("$JS.EVENT.ADVISORY.CONSUMER.PINNED.{STREAM}.W"),
    )
    .await;
    let mut unpinned_advisories = subscribe_everywhere(
        &fx,
        &client,
        format!("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{STREAM}.W"),
    )
    .await;
    let created = create(
        &client,
        "W",
        json!({"priority_policy":"pinned_client","priority_groups":["jobs"]}),
    )
    .await;
    assert_eq!(
        created["config"]["priority_timeout"],
        json!(120_000_000_000i64)
    );
    let info = consumer_info(&client, "W").await;
    assert_eq!(info["priority_groups"][0]["group"], json!("jobs"));
    assert!(info["priority_groups"][0].get("pinned_client_id").is_none());

    // The first request gets the pin; its messages carry it.
    let mut first = Puller::new(&client).await;
    first
        .pull(
            "W",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs"}),
        )
        .await;
    let msg = first.next("pinned delivery").await;
    assert_eq!(&msg.payload[..], b"job 1");
    let pin = pin_of(&msg);
    assert_eq!(pin.len(), 22);
    let advisory = within("pinned advisory", pinned_advisories.next())
        .await
        .unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(
        advisory["type"],
        json!("io.nats.jetstream.advisory.v1.consumer_group_pinned")
    );
    assert_eq!(
        (&advisory["group"], &advisory["pinned_id"]),
        (&json!("jobs"), &json!(pin))
    );
    let info = consumer_info(&client, "W").await;
    assert_eq!(info["priority_groups"][0]["pinned_client_id"], json!(pin));
    assert!(info["priority_groups"][0]["pinned_ts"].is_string());

    // Another pin is refused at once; the pinned client goes on with its pin.
    let mut other = Puller::new(&client).await;
    other
        .pull(
            "W",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs","id":"not-the-pin"}),
        )
        .await;
    let refused = other.next("423 mismatch").await;
    assert_eq!(
        status(&refused),
        (Some(423), Some("Nats-Pin-Id mismatch".into()))
    );
    first
        .pull(
            "W",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs","id": pin}),
        )
        .await;
    let msg = first.next("second pinned delivery").await;
    assert_eq!(
        (&msg.payload[..], pin_of(&msg)),
        (&b"job 2"[..], pin.clone())
    );

    // UNPIN: errors as nats-server's, then the pin goes and is advised.
    let unpin = format!("$JS.API.CONSUMER.UNPIN.{STREAM}.W");
    let wrong = request(&client, unpin.clone(), json!({"group":"other"})).await;
    assert_eq!(wrong["error"]["err_code"], json!(10160));
    let empty = request(&client, unpin.clone(), json!({})).await;
    assert_eq!(empty["error"]["err_code"], json!(10025));
    let done = request(&client, unpin, json!({"group":"jobs"})).await;
    assert_eq!(
        done,
        json!({"type":"io.nats.jetstream.api.v1.consumer_unpin_response"})
    );
    let advisory = within("unpinned advisory", unpinned_advisories.next())
        .await
        .unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(
        (&advisory["group"], &advisory["reason"]),
        (&json!("jobs"), &json!("admin"))
    );

    // The old pin is now wrong; a request without one takes a new pin.
    first
        .pull(
            "W",
            json!({"batch":2,"expires":5_000_000_000i64,"group":"jobs","id": pin}),
        )
        .await;
    let stale = first.next("423 wrong pin").await;
    assert_eq!(
        status(&stale),
        (Some(423), Some("Nats-Wrong-Pin-Id".into()))
    );
    other
        .pull(
            "W",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs"}),
        )
        .await;
    let msg = other.next("delivery under a new pin").await;
    assert_eq!(&msg.payload[..], b"job 3");
    assert_ne!(pin_of(&msg), pin);
}

async fn a_pin_lapses_after_priority_timeout(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    jobs(&fx, &js, 1).await;
    let mut unpinned = subscribe_everywhere(
        &fx,
        &client,
        format!("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.{STREAM}.W"),
    )
    .await;
    create(
        &client,
        "W",
        json!({"priority_policy":"pinned_client","priority_groups":["jobs"],
               "priority_timeout": 300_000_000}),
    )
    .await;
    let mut puller = Puller::new(&client).await;
    puller
        .pull(
            "W",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs"}),
        )
        .await;
    let msg = puller.next("pinned delivery").await;
    assert!(!pin_of(&msg).is_empty());
    // The pinned client pulls no more: the pin lapses.
    let advisory = within("unpinned by timeout", unpinned.next())
        .await
        .unwrap();
    let advisory: Value = serde_json::from_slice(&advisory.payload).unwrap();
    assert_eq!(advisory["reason"], json!("timeout"));
    let info = consumer_info(&client, "W").await;
    assert!(info["priority_groups"][0].get("pinned_client_id").is_none());
}

async fn overflow_serves_past_the_threshold(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    jobs(&fx, &js, 5).await;
    create(
        &client,
        "O",
        json!({"priority_policy":"overflow","priority_groups":["jobs"]}),
    )
    .await;
    // 5 pending: a request asking for at least 10 gets nothing and expires.
    let mut backup = Puller::new(&client).await;
    backup
        .pull(
            "O",
            json!({"batch":1,"expires":300_000_000,"group":"jobs","min_pending":10}),
        )
        .await;
    let expired = backup.next("408 below min_pending").await;
    assert_eq!(expired.status.map(|s| s.as_u16()), Some(408));
    // At least 3 pending: served.
    backup
        .pull(
            "O",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs","min_pending":3}),
        )
        .await;
    let msg = backup.next("overflow delivery").await;
    assert_eq!(&msg.payload[..], b"job 1");
    assert!(msg
        .headers
        .as_ref()
        .and_then(|h| h.get("Nats-Pin-Id"))
        .is_none());
    // min_ack_pending: one message awaits its ack, so a threshold of 1 is met.
    backup
        .pull(
            "O",
            json!({"batch":1,"expires":5_000_000_000i64,"group":"jobs","min_ack_pending":1}),
        )
        .await;
    let msg = backup.next("min_ack_pending delivery").await;
    assert_eq!(&msg.payload[..], b"job 2");
}

async fn prioritized_serves_the_lowest_priority_first(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    jobs(&fx, &js, 0).await;
    create(
        &client,
        "P",
        json!({"priority_policy":"prioritized","priority_groups":["jobs"]}),
    )
    .await;
    let mut low = Puller::new(&client).await;
    let mut high = Puller::new(&client).await;
    low.pull(
        "P",
        json!({"batch":1,"expires":20_000_000_000i64,"group":"jobs","priority":5}),
    )
    .await;
    wait_waiting(&client, "P", 1).await;
    high.pull(
        "P",
        json!({"batch":1,"expires":20_000_000_000i64,"group":"jobs","priority":0}),
    )
    .await;
    wait_waiting(&client, "P", 2).await;
    publish_acked(&js, "jobs.new", "first").await;
    let msg = high.next("priority 0 served first").await;
    assert_eq!(&msg.payload[..], b"first");
    publish_acked(&js, "jobs.new", "second").await;
    let msg = low.next("priority 5 served next").await;
    assert_eq!(&msg.payload[..], b"second");
}

/// Waits until `waiting` pull requests wait on `consumer` (a raw info request: async-nats
/// 0.42 cannot decode the `prioritized` policy).
async fn wait_waiting(client: &async_nats::Client, consumer: &str, waiting: usize) {
    within("pull requests to wait", async {
        while consumer_info(client, consumer).await["num_waiting"] != json!(waiting) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

async fn misused_pull_fields_get_400(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    jobs(&fx, &js, 1).await;
    create(&client, "plain", json!({})).await;
    create(
        &client,
        "W",
        json!({"priority_policy":"pinned_client","priority_groups":["jobs"]}),
    )
    .await;
    let mut puller = Puller::new(&client).await;
    for (consumer, body, expected) in [
        (
            "plain",
            json!({"min_pending":1}),
            "Bad Request - Not a Overflow Priority consumer",
        ),
        (
            "plain",
            json!({"id":"x"}),
            "Bad Request - Not a Pinned Client Priority consumer",
        ),
        (
            "W",
            json!({"group":"jobs","priority":10}),
            "Bad Request - Priority must be between 0 and 9",
        ),
        (
            "W",
            json!({"batch":1}),
            "Bad Request - Priority Group missing",
        ),
        (
            "W",
            json!({"group":"nope"}),
            "Bad Request - Invalid Priority Group",
        ),
    ] {
        puller.pull(consumer, body).await;
        let reply = puller.next(expected).await;
        assert_eq!(status(&reply), (Some(400), Some(expected.to_string())));
    }
    // Config checks as nats-server's: push with a policy, a policy without groups.
    let body = json!({"stream_name": STREAM, "config": {"durable_name":"bad",
        "deliver_subject":"dlv","priority_policy":"overflow","priority_groups":["jobs"]}});
    let refused = request(
        &client,
        format!("$JS.API.CONSUMER.CREATE.{STREAM}.bad"),
        body,
    )
    .await;
    assert_eq!(refused["error"]["err_code"], json!(10178));
    let body = json!({"stream_name": STREAM, "config": {"durable_name":"bad",
        "priority_policy":"overflow"}});
    let refused = request(
        &client,
        format!("$JS.API.CONSUMER.CREATE.{STREAM}.bad"),
        body,
    )
    .await;
    assert_eq!(refused["error"]["err_code"], json!(10159));
}
