//! Acks in a three-node cluster of real processes travel to the stream's leader only. Only the
//! leader subscribes a stream's ack subjects (as nats-server subscribes a consumer's on its
//! leader), so an ack sent through any node crosses at most one route, and a node without
//! clients receives next to nothing while two consumers ack everything. Counted with
//! `/routez`, which also shows the acks of a follower's client arriving at the leader.

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::cluster::TestCluster;
use common::jetstream::{cluster_client, RETRY_PACE};
use futures::StreamExt;
use serde_json::Value;

const STREAM: &str = "ACKS";
const MESSAGES: usize = 300;

/// Retries `attempt` (bounded) as a cluster client does while leaders are being elected.
async fn retried<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut attempt: impl FnMut() -> F,
) -> T {
    for _ in 0..50 {
        if let Some(value) = attempt().await {
            return value;
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    panic!("{what} did not succeed");
}

/// Fetches and acks (double ack: each ack is confirmed) every message through `js`.
async fn consume_all(js: &jetstream::Context, durable: &str) {
    let consumer: jetstream::consumer::PullConsumer = retried("the consumer", || async {
        js.get_stream(STREAM)
            .await
            .ok()?
            .get_or_create_consumer(
                durable,
                pull::Config {
                    durable_name: Some(durable.into()),
                    ..Default::default()
                },
            )
            .await
            .ok()
    })
    .await;
    let mut acked = 0;
    while acked < MESSAGES {
        let mut batch = consumer.fetch().max_messages(50).messages().await.unwrap();
        while let Some(msg) = batch.next().await {
            msg.unwrap().double_ack().await.expect("ack confirmed");
            acked += 1;
        }
    }
    let mut consumer = consumer;
    let info = consumer.info().await.unwrap();
    assert_eq!(info.ack_floor.stream_sequence, MESSAGES as u64, "{durable}");
    assert_eq!(info.num_ack_pending, 0, "{durable}");
}

/// Node `at`'s route to node `peer`, from `/routez`.
fn route(cluster: &TestCluster, at: usize, peer: usize) -> Value {
    cluster
        .route(at, peer)
        .unwrap_or_else(|| panic!("no route to n{peer} in {}", cluster.routez(at)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_cross_only_the_route_to_the_stream_leader() {
    let cluster = TestCluster::start(3);
    cluster.wait_for_meta_leader();
    let js = cluster_client(cluster.url(0)).await;
    retried("the R3 stream", || async {
        js.get_or_create_stream(stream::Config {
            name: STREAM.into(),
            subjects: vec!["acks.*".into()],
            num_replicas: 3,
            ..Default::default()
        })
        .await
        .ok()
    })
    .await;
    let leader = cluster.leader_of(STREAM);
    let follower = (leader + 1) % 3;
    let quiet = (leader + 2) % 3;

    let routez = cluster.routez(leader);
    assert_eq!(routez["num_routes"], 2, "{routez}");
    assert_eq!(routez["server_name"], format!("n{leader}"));

    let at_leader = cluster_client(cluster.url(leader)).await;
    for i in 0..MESSAGES {
        at_leader
            .publish("acks.new", format!("m{i}").into())
            .await
            .unwrap()
            .await
            .expect("publish acknowledged");
    }
    let received_before: Vec<u64> = [leader, follower]
        .iter()
        .map(|&peer| route(&cluster, quiet, peer)["in_msgs"].as_u64().unwrap())
        .collect();
    let from_follower_before = route(&cluster, leader, follower)["in_msgs"]
        .as_u64()
        .unwrap();

    // One consumer read through the leader's node, one through a follower's.
    consume_all(&at_leader, "at-leader").await;
    let at_follower = cluster_client(cluster.url(follower)).await;
    consume_all(&at_follower, "at-follower").await;

    // The follower's client's acks reached the leader over their route ...
    let from_follower = route(&cluster, leader, follower)["in_msgs"]
        .as_u64()
        .unwrap()
        - from_follower_before;
    assert!(
        from_follower >= MESSAGES as u64,
        "the leader received {from_follower} messages from n{follower}, fewer than the acks"
    );
    // ... and no ack reached the node no client uses (its consumers' pull requests did: the
    // API is answered by exactly one node, but every node hears it).
    for (peer, before) in [leader, follower].into_iter().zip(received_before) {
        let received = route(&cluster, quiet, peer)["in_msgs"].as_u64().unwrap() - before;
        assert!(
            received < MESSAGES as u64 / 4,
            "n{quiet} (no clients) received {received} messages from n{peer} while \
             {MESSAGES} messages were acked twice over"
        );
    }
}
