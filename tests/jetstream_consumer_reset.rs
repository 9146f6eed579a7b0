//! Consumer reset (nats-server 2.14, `$JS.API.CONSUMER.RESET.<stream>.<consumer>`) on the
//! wire, through raw async-nats requests: back to the ack floor (empty body) and to a
//! sequence (`{"seq": n}`), the next delivery's stream and consumer sequences read from its
//! `$JS.ACK` reply subject, the answer (the consumer's info plus `reset_seq`), a push
//! consumer delivering again, a work-queue stream dropping what a forward reset skipped, and
//! the refusals (10204, 10014, 10059, 10025). Every scenario runs on R1 and R3
//! (`common::fixture`); on R3 each client talks to another node, so the requests reach the
//! stream's leader through the cluster.

mod common;

use async_nats::jetstream;
use common::fixture::{on_r1_and_r3, JsFixture};
use common::jetstream::api;
use common::within;
use futures::StreamExt;
use serde_json::{json, Value};

on_r1_and_r3!(
    reset_to_the_floor_and_to_a_sequence,
    a_push_consumer_delivers_again_after_a_reset,
    work_queue_reset_forward_removes_skipped_messages,
    reset_refusals,
);

const STREAM: &str = "ORDERS";

async fn orders(fx: &JsFixture, js: &jetstream::Context, messages: u64) {
    fx.stream_of(js, STREAM, "order", messages).await;
}

async fn create(client: &async_nats::Client, stream: &str, config: Value) -> Value {
    let name = config["durable_name"].as_str().unwrap().to_owned();
    let body = json!({"stream_name": stream, "config": config});
    let created = api(
        client,
        format!("$JS.API.CONSUMER.CREATE.{stream}.{name}"),
        body,
    )
    .await;
    assert!(created.get("error").is_none(), "{created}");
    created
}

async fn reset(client: &async_nats::Client, stream: &str, consumer: &str, body: &str) -> Value {
    api(
        client,
        format!("$JS.API.CONSUMER.RESET.{stream}.{consumer}"),
        body,
    )
    .await
}

async fn consumer_info(client: &async_nats::Client, stream: &str, consumer: &str) -> Value {
    api(
        client,
        format!("$JS.API.CONSUMER.INFO.{stream}.{consumer}"),
        "",
    )
    .await
}

/// (stream sequence, consumer sequence, delivery count) from a `$JS.ACK` reply subject.
fn sequences(msg: &async_nats::Message) -> (u64, u64, u64) {
    let reply = msg.reply.as_ref().expect("an ack reply subject");
    let tokens: Vec<&str> = reply.split('.').collect();
    assert_eq!(tokens.len(), 9, "{reply}");
    let number = |i: usize| tokens[i].parse::<u64>().unwrap();
    (number(5), number(6), number(4))
}

/// Pulls `batch` messages from consumer `consumer` of `stream` (raw `MSG.NEXT`) and returns
/// their (stream sequence, consumer sequence, delivery count).
async fn fetch(
    client: &async_nats::Client,
    stream: &str,
    consumer: &str,
    batch: usize,
) -> Vec<(u64, u64, u64)> {
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let body = format!(r#"{{"batch":{batch},"expires":5000000000}}"#);
    client
        .publish_with_reply(
            format!("$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"),
            inbox,
            body.into(),
        )
        .await
        .unwrap();
    let mut fetched = Vec::new();
    while fetched.len() < batch {
        let msg = within("a pulled message", replies.next()).await.unwrap();
        assert!(
            msg.status.is_none(),
            "{:?} {:?}",
            msg.status,
            msg.description
        );
        fetched.push(sequences(&msg));
    }
    fetched
}

fn assert_reset_answer(answer: &Value, reset_seq: u64) {
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(
        answer["type"],
        json!("io.nats.jetstream.api.v1.consumer_reset_response")
    );
    assert_eq!(answer["reset_seq"], json!(reset_seq), "{answer}");
    // The consumer's info after the reset: nothing delivered or pending from the start on.
    assert_eq!(answer["stream_name"], json!(STREAM));
    assert_eq!(answer["delivered"]["consumer_seq"], json!(0), "{answer}");
    assert_eq!(answer["delivered"]["stream_seq"], json!(reset_seq - 1));
    assert_eq!(answer["ack_floor"]["consumer_seq"], json!(0));
    assert_eq!(answer["ack_floor"]["stream_seq"], json!(reset_seq - 1));
    assert_eq!(answer["num_ack_pending"], json!(0));
    assert!(answer["config"].is_object(), "{answer}");
}

async fn reset_to_the_floor_and_to_a_sequence(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 10).await;
    create(
        &client,
        STREAM,
        json!({"durable_name":"C","ack_policy":"explicit"}),
    )
    .await;
    let first: Vec<u64> = fetch(&client, STREAM, "C", 5)
        .await
        .iter()
        .map(|(stream_seq, _, _)| *stream_seq)
        .collect();
    assert_eq!(first, vec![1, 2, 3, 4, 5]);
    let info = consumer_info(&client, STREAM, "C").await;
    assert_eq!(info["num_ack_pending"], json!(5));

    // Empty body: back to the ack floor (0), so stream sequence 1 again as consumer seq 1.
    let answer = reset(&client, STREAM, "C", "").await;
    assert_reset_answer(&answer, 1);
    assert_eq!(answer["name"], json!("C"));
    assert_eq!(answer["num_pending"], json!(10));
    // The answer is what CONSUMER.INFO says now (but its time stamp and replica lags).
    let mut info = consumer_info(&client, STREAM, "C").await;
    let mut answered = answer.clone();
    for value in [&mut info, &mut answered] {
        let object = value.as_object_mut().unwrap();
        for volatile in ["type", "ts", "reset_seq", "cluster"] {
            object.remove(volatile);
        }
    }
    assert_eq!(answered, info);
    assert_eq!(fetch(&client, STREAM, "C", 1).await, vec![(1, 1, 1)]);

    // A sequence: the next message is that one, still a first delivery.
    let answer = reset(&client, STREAM, "C", r#"{"seq":8}"#).await;
    assert_reset_answer(&answer, 8);
    assert_eq!(answer["num_pending"], json!(3));
    assert_eq!(
        fetch(&client, STREAM, "C", 3).await,
        vec![(8, 1, 1), (9, 2, 1), (10, 3, 1)]
    );

    // `seq` 0 and unknown fields: the floor again (7, below the pending 8).
    let answer = reset(&client, STREAM, "C", r#"{"seq":0,"other":true}"#).await;
    assert_reset_answer(&answer, 8);
    assert_eq!(fetch(&client, STREAM, "C", 1).await, vec![(8, 1, 1)]);
}

async fn pushed_sequences(pushed: &mut async_nats::Subscriber) -> (u64, u64, u64) {
    let msg = within("a pushed message", pushed.next()).await.unwrap();
    sequences(&msg)
}

async fn a_push_consumer_delivers_again_after_a_reset(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 3).await;
    let deliver = client.new_inbox();
    let mut pushed = client.subscribe(deliver.clone()).await.unwrap();
    client.flush().await.unwrap();
    fx.wait_until_known_everywhere(&deliver).await;
    create(
        &client,
        STREAM,
        json!({"durable_name":"P","ack_policy":"explicit","deliver_subject": deliver}),
    )
    .await;
    let mut first = Vec::new();
    for _ in 0..3 {
        first.push(pushed_sequences(&mut pushed).await);
    }
    assert_eq!(first, vec![(1, 1, 1), (2, 2, 1), (3, 3, 1)]);

    let answer = reset(&client, STREAM, "P", r#"{"seq":2}"#).await;
    // The info is read once the reset is applied, and the push consumer's task delivers as
    // soon as it is: `delivered` may already count the first message again.
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["reset_seq"], json!(2));
    assert_eq!(answer["ack_floor"]["consumer_seq"], json!(0));
    assert_eq!(answer["ack_floor"]["stream_seq"], json!(1));
    let mut again = Vec::new();
    for _ in 0..2 {
        again.push(pushed_sequences(&mut pushed).await);
    }
    assert_eq!(again, vec![(2, 1, 1), (3, 2, 1)]);
}

async fn work_queue_reset_forward_removes_skipped_messages(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    fx.create_stream_raw(
        &client,
        json!({"name":"JOBS","subjects":["jobs.*"],"retention":"workqueue"}),
    )
    .await;
    for i in 1..=10 {
        common::jetstream::publish_acked(&js, "jobs.new".to_string(), format!("job {i}")).await;
    }
    create(
        &client,
        "JOBS",
        json!({"durable_name":"W","ack_policy":"explicit"}),
    )
    .await;
    let fetched = fetch(&client, "JOBS", "W", 2).await;
    assert_eq!(fetched, vec![(1, 1, 1), (2, 2, 1)]);

    // Forward: what the consumer skipped (delivered or not) leaves the work queue.
    let answer = reset(&client, "JOBS", "W", r#"{"seq":6}"#).await;
    assert!(answer.get("error").is_none(), "{answer}");
    assert_eq!(answer["reset_seq"], json!(6));
    assert_eq!(answer["num_pending"], json!(5));
    let state = fx.stream_info("JOBS").await.state;
    assert_eq!((state.messages, state.first_sequence), (5, 6));
    fx.wait_until_replicas_count("JOBS", 5).await;

    // Backwards: nothing removed comes back.
    let answer = reset(&client, "JOBS", "W", r#"{"seq":1}"#).await;
    assert_eq!(answer["reset_seq"], json!(1), "{answer}");
    assert_eq!(fetch(&client, "JOBS", "W", 1).await, vec![(6, 1, 1)]);
    assert_eq!(fx.stream_info("JOBS").await.state.messages, 5);
}

async fn reset_refusals(fx: JsFixture) {
    let client = fx.client().await;
    let js = jetstream::new(client.clone());
    orders(&fx, &js, 10).await;
    let error = |answer: &Value| {
        assert_eq!(
            answer["type"],
            json!("io.nats.jetstream.api.v1.consumer_reset_response")
        );
        (
            answer["error"]["code"].as_u64().unwrap_or(0),
            answer["error"]["err_code"].as_u64().unwrap_or(0),
            answer["error"]["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        )
    };

    create(
        &client,
        STREAM,
        json!({"durable_name":"BYSEQ","ack_policy":"explicit",
               "deliver_policy":"by_start_sequence","opt_start_seq":5}),
    )
    .await;
    let below = reset(&client, STREAM, "BYSEQ", r#"{"seq":4}"#).await;
    assert_eq!(
        error(&below),
        (400, 10204, "invalid reset: below start seq".into())
    );
    let at = reset(&client, STREAM, "BYSEQ", r#"{"seq":5}"#).await;
    assert_eq!(at["reset_seq"], json!(5), "{at}");
    assert_eq!(fetch(&client, STREAM, "BYSEQ", 1).await, vec![(5, 1, 1)]);

    create(
        &client,
        STREAM,
        json!({"durable_name":"NEW","ack_policy":"explicit","deliver_policy":"new"}),
    )
    .await;
    let refused = reset(&client, STREAM, "NEW", r#"{"seq":3}"#).await;
    assert_eq!(
        error(&refused),
        (400, 10204, "invalid reset: not allowed".into())
    );
    // Back to the floor is always allowed.
    let floor = reset(&client, STREAM, "NEW", "").await;
    assert_eq!(floor["reset_seq"], json!(11), "{floor}");

    let unknown = reset(&client, STREAM, "NOPE", "").await;
    assert_eq!(error(&unknown), (404, 10014, "consumer not found".into()));
    let unknown = reset(&client, "NOSTREAM", "NOPE", "").await;
    assert_eq!(error(&unknown), (404, 10059, "stream not found".into()));
    let bad = reset(&client, STREAM, "NEW", "{seq").await;
    let (code, err_code, description) = error(&bad);
    assert_eq!((code, err_code), (400, 10025));
    assert!(description.starts_with("invalid JSON: "), "{description}");
    // Nothing refused changed the consumer.
    let info = consumer_info(&client, STREAM, "NEW").await;
    assert_eq!(info["delivered"]["stream_seq"], json!(10), "{info}");
}
