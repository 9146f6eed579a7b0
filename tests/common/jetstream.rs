//! JetStream client steps the tests share: publishing until acknowledged, raw pull requests,
//! and retrying until a cluster serves again.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::pull, context::Publish, stream};
use futures::StreamExt;

/// Publishes `payload` with `headers` to `subject` as a request and returns the PubAck (or
/// error) as JSON, failing the test if none comes within [`super::WAIT`].
pub async fn publish_with_headers(
    client: &async_nats::Client,
    subject: &str,
    headers: &[(&str, &str)],
    payload: &'static str,
) -> serde_json::Value {
    let mut map = async_nats::HeaderMap::new();
    for (name, value) in headers {
        map.insert(*name, *value);
    }
    let reply = super::within(
        "a PubAck",
        client.request_with_headers(subject.to_owned(), map, payload.into()),
    )
    .await
    .unwrap();
    serde_json::from_slice(&reply.payload).unwrap()
}

/// Sends `body` (raw JSON) to the JetStream API `subject` through `client` and returns the
/// JSON reply, failing the test if none comes within [`super::WAIT`].
pub async fn api(
    client: &async_nats::Client,
    subject: impl Into<String>,
    body: impl ToString,
) -> serde_json::Value {
    let subject = subject.into();
    let reply = super::within(
        &subject,
        client.request(subject.clone(), body.to_string().into()),
    )
    .await
    .unwrap_or_else(|e| panic!("{subject}: {e}"));
    serde_json::from_slice(&reply.payload).expect("a JSON reply")
}

/// The stream the cluster tests publish `order <id>` messages to (`orders.new`).
pub const STREAM: &str = "ORDERS";

/// Pause between retries while a failover or an election runs, as a client would pace
/// them; every retry loop is bounded by its attempt count.
pub const RETRY_PACE: Duration = Duration::from_millis(100);

/// A JetStream context on a client of the node at `url`, with the short timeouts the
/// cluster tests retry behind.
pub async fn cluster_client(url: String) -> jetstream::Context {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(url)
        .await
        .expect("client connects");
    let mut js = jetstream::new(client);
    js.set_timeout(Duration::from_secs(3));
    js
}

/// Publishes message `id` to `orders.new` until it is acknowledged (the same `Nats-Msg-Id`
/// each time, so a retry of a publish whose ack was lost is a duplicate, not a second
/// message); returns its sequence. At most 100 attempts.
pub async fn publish_until_acked(js: &jetstream::Context, id: u64) -> u64 {
    for _attempt in 0..100 {
        let publish = Publish::build()
            .message_id(format!("msg-{id}"))
            .payload(format!("order {id}").into());
        let acked = match js.send_publish("orders.new", publish).await {
            Ok(ack) => ack.await,
            Err(e) => Err(e),
        };
        match acked {
            Ok(ack) => return ack.sequence,
            // A failover answers "no responders" at once until the new leader serves.
            Err(_) => tokio::time::sleep(RETRY_PACE).await,
        }
    }
    panic!("message {id} was never acknowledged");
}

/// Publishes `payload` to `subject` and waits for its PubAck.
pub async fn publish_acked(
    js: &jetstream::Context,
    subject: impl Into<String>,
    payload: impl Into<bytes::Bytes>,
) -> jetstream::publish::PublishAck {
    let subject: String = subject.into();
    let pending = super::within("publish", js.publish(subject.clone(), payload.into()))
        .await
        .unwrap_or_else(|e| panic!("publish to {subject}: {e}"));
    super::within("PubAck", std::future::IntoFuture::into_future(pending))
        .await
        .unwrap_or_else(|e| panic!("PubAck of {subject}: {e}"))
}

/// Sends a raw pull request (`body`) for `consumer` of `stream`, its replies going to
/// `inbox`, and waits until the consumer counts `waiting` requests: from then on the request
/// is queued on the stream's leader.
pub async fn pull_until_waiting(
    client: &async_nats::Client,
    stream: &jetstream::stream::Stream,
    consumer: &str,
    inbox: String,
    body: &'static str,
    waiting: usize,
) {
    let name = &stream.cached_info().config.name;
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{name}.{consumer}"),
            inbox,
            body.into(),
        )
        .await
        .expect("pull request sent");
    super::within("the pull request to wait", async {
        while stream
            .consumer_info(consumer)
            .await
            .expect("consumer info")
            .num_waiting
            != waiting
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
}

/// Creates stream `name` (subjects `<name in lower case>.*`) with `replicas` and returns its
/// cluster block. Creating is idempotent, so a create whose reply was lost in a leader change
/// is retried; bounded by time, since a create placed on a node that is down waits for a
/// leader that never comes.
pub async fn create_retried(
    js: &jetstream::Context,
    name: &str,
    replicas: usize,
) -> stream::ClusterInfo {
    let config = stream::Config {
        name: name.into(),
        subjects: vec![format!("{}.*", name.to_lowercase())],
        num_replicas: replicas,
        ..Default::default()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if let Ok(stream) = js.create_stream(config.clone()).await {
            return stream.cached_info().cluster.clone().expect("cluster block");
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    panic!("stream {name} not created");
}

/// Reads the whole ORDERS stream through a fresh consumer and returns the payload ids in order.
pub async fn read_all(js: &jetstream::Context, expected: usize) -> Vec<u64> {
    // Right after a restart the restarted node may still act on its old term for a moment
    // (openraft resumes a leader it was, until a peer's newer term reaches it), and a request
    // it answers then gets 10008: a cluster client retries (bounded), as with any election.
    let mut reader = None;
    for _attempt in 0..20 {
        let created = match js.get_stream(STREAM).await {
            Ok(stream) => stream
                .create_consumer(pull::Config {
                    ack_policy: jetstream::consumer::AckPolicy::None,
                    ..Default::default()
                })
                .await
                .ok(),
            Err(_) => None,
        };
        if created.is_some() {
            reader = created;
            break;
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    let consumer = reader.expect("reader consumer");
    let mut ids = Vec::new();
    let mut messages = consumer
        .stream()
        .max_messages_per_batch(100)
        .messages()
        .await
        .unwrap();
    while ids.len() < expected {
        let msg = tokio::time::timeout(Duration::from_secs(10), messages.next())
            .await
            .expect("the stream holds every acknowledged message")
            .unwrap()
            .unwrap();
        let text = std::str::from_utf8(&msg.payload).unwrap();
        ids.push(text.trim_start_matches("order ").parse().unwrap());
    }
    ids
}

/// Publishes `payload` to `subject` with message id `id` until it is acknowledged (a leader
/// change answers 503 or nothing meanwhile), paced by [`RETRY_PACE`], at most 100 times; the
/// message id keeps a retried publish from being stored twice.
pub async fn publish_deduplicated(
    js: &jetstream::Context,
    subject: &str,
    id: String,
    payload: String,
) {
    for _attempt in 0..100 {
        let publish = Publish::build()
            .message_id(id.clone())
            .payload(payload.clone().into());
        let acked = match js.send_publish(subject.to_owned(), publish).await {
            Ok(ack) => tokio::time::timeout(
                Duration::from_secs(3),
                std::future::IntoFuture::into_future(ack),
            )
            .await
            .is_ok_and(|acked| acked.is_ok()),
            Err(_) => false,
        };
        if acked {
            return;
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    panic!("{payload} never acknowledged");
}

/// Asks stream `name`'s leader to step down until one does (paced, at most 50 times); false
/// if none did.
pub async fn step_down_stream(client: &async_nats::Client, name: &str) -> bool {
    let subject = format!("$JS.API.STREAM.LEADER.STEPDOWN.{name}");
    for _attempt in 0..50 {
        if let Ok(reply) = client.request(subject.clone(), "".into()).await {
            let reply: serde_json::Value =
                serde_json::from_slice(&reply.payload).unwrap_or_default();
            if reply["success"] == true {
                return true;
            }
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    false
}
