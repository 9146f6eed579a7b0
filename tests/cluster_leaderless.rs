//! A stream whose group cannot elect a leader still answers, as nats-server answers: once a
//! replica has known no leader for a while, `STREAM.INFO` gets that replica's own info (no
//! leader in its `cluster` block) and requests that need the leader get 10008 "JetStream system
//! temporarily unavailable" — one reply, however many replicas are left — direct gets are
//! served from the replica, and a publish finds nobody (no-responders). Without a meta leader, what it would answer gets 10008 too.
//! Once a quorum is back the leaders answer again. Real processes, `kill -9`.

mod common;

use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, stream};
use common::cluster::TestCluster;
use common::jetstream::{publish_until_acked, RETRY_PACE};
use futures::StreamExt;
use serde_json::Value;

const STREAM: &str = "ORDERS";
const MESSAGES: u64 = 5;
/// How long a leaderless stream may take to answer: the survivors notice the leader is gone
/// (about a second), then wait a second more before answering for it.
const ANSWER_DEADLINE: Duration = Duration::from_secs(20);
/// How long to listen for a second reply after the first.
const MORE_REPLIES_WINDOW: Duration = Duration::from_secs(1);
const UNAVAILABLE: &str = "JetStream system temporarily unavailable";

/// Each test runs several jetraft processes; on a small machine they run one at a time.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn connect(url: String) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(url)
        .await
        .expect("client connects")
}

/// Sends one API request and collects its replies: `None` if none came within `first_within`;
/// otherwise the first and any other arriving in the next [`MORE_REPLIES_WINDOW`].
async fn replies(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    first_within: Duration,
) -> Option<Vec<Value>> {
    let inbox = client.new_inbox();
    let mut subscriber = client.subscribe(inbox.clone()).await.unwrap();
    client
        .publish_with_reply(subject.to_string(), inbox, body.to_string().into())
        .await
        .unwrap();
    client.flush().await.unwrap();
    let parse = |msg: async_nats::Message| -> Value {
        serde_json::from_slice(&msg.payload)
            .unwrap_or_else(|e| panic!("reply to {subject} is not JSON ({e}): {msg:?}"))
    };
    let first = tokio::time::timeout(first_within, subscriber.next())
        .await
        .ok()??;
    let mut all = vec![parse(first)];
    while let Ok(Some(more)) = tokio::time::timeout(MORE_REPLIES_WINDOW, subscriber.next()).await {
        all.push(parse(more));
    }
    Some(all)
}

/// Repeats a request until `accept` takes a reply, failing after [`ANSWER_DEADLINE`]. Returns
/// every reply to the accepted request, so the caller can count them.
async fn request_until(
    client: &async_nats::Client,
    subject: &str,
    body: &str,
    what: &str,
    accept: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let deadline = Instant::now() + ANSWER_DEADLINE;
    let mut last = None;
    while Instant::now() < deadline {
        match replies(client, subject, body, Duration::from_secs(2)).await {
            Some(all) if accept(&all[0]) => return all,
            Some(all) => {
                last = Some(all);
                tokio::time::sleep(RETRY_PACE).await;
            }
            // The request timed out: that paced the retry already.
            None => {}
        }
    }
    panic!("timed out waiting for {what} from {subject}; last replies: {last:?}");
}

fn is_error(reply: &Value) -> bool {
    reply.get("error").is_some()
}

fn leader_in(reply: &Value) -> &str {
    reply["cluster"]["leader"].as_str().unwrap_or_default()
}

fn assert_unavailable(replies: &[Value], response_type: &str) {
    assert_eq!(replies.len(), 1, "one reply: {replies:?}");
    let reply = &replies[0];
    assert_eq!(reply["type"], response_type, "{reply}");
    assert_eq!(reply["error"]["code"], 503, "{reply}");
    assert_eq!(reply["error"]["err_code"], 10008, "{reply}");
    assert_eq!(reply["error"]["description"], UNAVAILABLE, "{reply}");
}

/// Creates the stream with `replicas`, stores [`MESSAGES`] messages and a durable `worker`;
/// retried (bounded) as a cluster client does while leaders are being elected.
async fn stream_with_messages(client: &async_nats::Client, replicas: usize) {
    let mut js = jetstream::new(client.clone());
    js.set_timeout(Duration::from_secs(3));
    let config = stream::Config {
        name: STREAM.into(),
        subjects: vec!["orders.*".into()],
        num_replicas: replicas,
        allow_direct: true,
        ..Default::default()
    };
    let mut stream = None;
    for _attempt in 0..50 {
        match js.get_or_create_stream(config.clone()).await {
            Ok(created) => {
                stream = Some(created);
                break;
            }
            Err(_) => tokio::time::sleep(RETRY_PACE).await,
        }
    }
    let stream = stream.expect("stream created");
    for id in 0..MESSAGES {
        publish_until_acked(&js, id).await;
    }
    for _attempt in 0..50 {
        let config = pull::Config {
            durable_name: Some("worker".into()),
            ..Default::default()
        };
        if stream
            .get_or_create_consumer("worker", config)
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    panic!("consumer never created");
}

/// Waits until every replica in `nodes` has applied what the leader has, so that the
/// survivors of a kill hold every message and the consumer.
fn wait_until_applied_everywhere(cluster: &TestCluster, nodes: &[usize]) {
    let leader = cluster.leader_of(STREAM);
    cluster.wait_for("every replica to apply the leader's log", || {
        let leader_applied = cluster.replica(leader, STREAM)?["applied_index"].as_u64()?;
        nodes
            .iter()
            .all(|&i| {
                cluster
                    .replica(i, STREAM)
                    .is_some_and(|r| r["applied_index"].as_u64() == Some(leader_applied))
            })
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_without_quorum_answers_from_its_replica_until_a_leader_is_back() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let admin = connect(cluster.url(0)).await;
    stream_with_messages(&admin, 3).await;
    wait_until_applied_everywhere(&cluster, &[0, 1, 2]);

    // Two nodes die, the stream's leader and the meta leader among them: the last node follows
    // both groups and can never win an election (one vote of three). (A leader left without a
    // quorum keeps leading in openraft 0.9, and so keeps answering.)
    let leader = cluster.leader_of(STREAM);
    let meta = cluster.meta_leader();
    let survivor = (0..3).find(|&i| i != leader && i != meta).unwrap();
    for dead in (0..3).filter(|&i| i != survivor) {
        cluster.kill(dead);
    }
    let client = connect(cluster.url(survivor)).await;

    // STREAM.INFO: the replica's own info, with no leader.
    let info = request_until(
        &client,
        "$JS.API.STREAM.INFO.ORDERS",
        "",
        "the surviving replica's stream info",
        |reply| !is_error(reply),
    )
    .await;
    assert_eq!(info.len(), 1, "one reply: {info:?}");
    let info = &info[0];
    assert_eq!(
        info["type"],
        "io.nats.jetstream.api.v1.stream_info_response"
    );
    assert_eq!(info["state"]["messages"], MESSAGES, "{info}");
    assert_eq!(leader_in(info), "", "no leader: {info}");
    assert_eq!(
        info["cluster"]["replicas"].as_array().map(Vec::len),
        Some(3)
    );

    // What needs the leader: 10008, from the one replica that can answer.
    let consumer_info = replies(
        &client,
        "$JS.API.CONSUMER.INFO.ORDERS.worker",
        "",
        Duration::from_secs(5),
    )
    .await
    .expect("CONSUMER.INFO answered");
    assert_unavailable(
        &consumer_info,
        "io.nats.jetstream.api.v1.consumer_info_response",
    );
    let msg_get = replies(
        &client,
        "$JS.API.STREAM.MSG.GET.ORDERS",
        r#"{"seq":1}"#,
        Duration::from_secs(5),
    )
    .await
    .expect("STREAM.MSG.GET answered");
    assert_unavailable(&msg_get, "io.nats.jetstream.api.v1.stream_msg_get_response");
    // Consumer names come from the replica, as stream info does.
    let names = replies(
        &client,
        "$JS.API.CONSUMER.NAMES.ORDERS",
        "",
        Duration::from_secs(5),
    )
    .await
    .expect("CONSUMER.NAMES answered");
    assert_eq!(names.len(), 1, "{names:?}");
    assert_eq!(names[0]["consumers"], serde_json::json!(["worker"]));

    // Direct gets are answered from the replica (nats-server lets any replica answer them).
    let direct = client
        .request("$JS.API.DIRECT.GET.ORDERS", r#"{"seq":1}"#.into())
        .await
        .expect("DIRECT.GET answered");
    // By name as sent: async-nats keys its well-known headers apart from plain strings.
    let sequence = direct.headers.as_ref().and_then(|headers| {
        headers
            .iter()
            .find(|(key, _)| AsRef::<str>::as_ref(key) == "Nats-Sequence")
            .and_then(|(_, values)| values.first())
            .map(|value| value.as_str().to_string())
    });
    assert_eq!(sequence.as_deref(), Some("1"), "{direct:?}");
    assert_eq!(&direct.payload[..], b"order 0");

    // A publish reaches no stream (only a leader subscribes its subjects): no-responders, as
    // from nats-server, never an acknowledgement.
    let published = client.request("orders.new", "lost".into()).await;
    match published {
        Err(e) => assert_eq!(
            e.kind(),
            async_nats::client::RequestErrorKind::NoResponders,
            "{e}"
        ),
        Ok(reply) => panic!("a publish without a leader was answered: {reply:?}"),
    }

    // Without a meta leader, its requests get 10008, and so do those naming a stream this
    // node does not know (its meta state may be behind).
    for (subject, response_type) in [
        ("$JS.API.INFO", "account_info_response"),
        ("$JS.API.STREAM.NAMES", "stream_names_response"),
        ("$JS.API.STREAM.INFO.UNKNOWN", "stream_info_response"),
    ] {
        let answered = request_until(&client, subject, "", "a 10008 reply", is_error).await;
        assert_unavailable(
            &answered,
            &format!("io.nats.jetstream.api.v1.{response_type}"),
        );
    }

    // A second node comes back: the two elect leaders, which answer again.
    cluster.restart(leader);
    let info = request_until(
        &client,
        "$JS.API.STREAM.INFO.ORDERS",
        "",
        "the stream's new leader",
        |reply| !is_error(reply) && !leader_in(reply).is_empty(),
    )
    .await;
    assert_eq!(info.len(), 1, "one reply: {info:?}");
    assert_eq!(info[0]["state"]["messages"], MESSAGES);
    request_until(
        &client,
        "$JS.API.CONSUMER.INFO.ORDERS.worker",
        "",
        "the consumer's info from the leader",
        |reply| !is_error(reply),
    )
    .await;
    let mut js = jetstream::new(client.clone());
    js.set_timeout(Duration::from_secs(3));
    assert_eq!(publish_until_acked(&js, MESSAGES).await, MESSAGES + 1);
    let names = request_until(
        &client,
        "$JS.API.STREAM.NAMES",
        "",
        "the meta leader's stream names",
        |reply| !is_error(reply),
    )
    .await;
    assert_eq!(names.len(), 1, "one reply: {names:?}");
    assert_eq!(names[0]["streams"], serde_json::json!([STREAM]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_leaderless_replicas_send_one_reply() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(4);
    let admin = connect(cluster.url(0)).await;
    stream_with_messages(&admin, 4).await;
    wait_until_applied_everywhere(&cluster, &[0, 1, 2, 3]);

    // Two of four die, the leader among them: two replicas are left, which see each other and
    // know no leader (two votes of four are no quorum).
    let leader = cluster.leader_of(STREAM);
    let survivors = [(leader + 1) % 4, (leader + 2) % 4];
    for dead in [leader, (leader + 3) % 4] {
        cluster.kill(dead);
    }

    // Whichever survivor the client is on, exactly one of the two answers.
    for survivor in survivors {
        let client = connect(cluster.url(survivor)).await;
        let info = request_until(
            &client,
            "$JS.API.STREAM.INFO.ORDERS",
            "",
            "a surviving replica's stream info",
            |reply| !is_error(reply),
        )
        .await;
        assert_eq!(info.len(), 1, "one reply through n{survivor}: {info:?}");
        assert_eq!(leader_in(&info[0]), "");
        assert_eq!(info[0]["state"]["messages"], MESSAGES);
        let consumer_info = replies(
            &client,
            "$JS.API.CONSUMER.INFO.ORDERS.worker",
            "",
            Duration::from_secs(5),
        )
        .await
        .expect("CONSUMER.INFO answered");
        assert_unavailable(
            &consumer_info,
            "io.nats.jetstream.api.v1.consumer_info_response",
        );
    }
}
