//! JetStream client steps the tests share: publishing until acknowledged, raw pull requests,
//! and retrying until a cluster serves again.

use std::time::Duration;

use async_nats::jetstream::{self, context::Publish};

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
