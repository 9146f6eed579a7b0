//! `CONSUMER.LEADER.STEPDOWN` in a three-node cluster of real processes. A consumer has no
//! Raft group of its own here (its state is in its stream's group), so its leader is its
//! stream's leader and stepping the consumer down moves the stream's leadership; unknown
//! streams and consumers, and one-replica streams, are answered as nats-server answers them.

mod common;

use async_nats::jetstream::{self, consumer::pull, stream};
use common::cluster::TestCluster;
use common::jetstream::{api, RETRY_PACE};
use common::within;
use serde_json::json;

const STEPDOWN_TYPE: &str = "io.nats.jetstream.api.v1.consumer_leader_stepdown_response";

/// Creates `name` with `replicas` and a durable `worker` on it; retried (bounded) as a
/// cluster client does while leaders are being elected.
async fn stream_with_consumer(js: &jetstream::Context, name: &str, replicas: usize) {
    let config = stream::Config {
        name: name.into(),
        subjects: vec![format!("{}.*", name.to_lowercase())],
        num_replicas: replicas,
        ..Default::default()
    };
    for _attempt in 0..50 {
        let Ok(stream) = js.get_or_create_stream(config.clone()).await else {
            tokio::time::sleep(RETRY_PACE).await;
            continue;
        };
        let consumer = pull::Config {
            durable_name: Some("worker".into()),
            ..Default::default()
        };
        if stream
            .get_or_create_consumer("worker", consumer)
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    panic!("{name} and its consumer were never created");
}

/// Waits until every follower of `name` is caught up (a stepdown hands over to one of them).
async fn wait_until_replicas_current(js: &jetstream::Context, name: &str) {
    within("replicas current", async {
        loop {
            if let Ok(mut stream) = js.get_stream(name).await {
                if let Ok(info) = stream.info().await {
                    let replicas = info.cluster.as_ref().map(|c| c.replicas.clone());
                    if replicas.is_some_and(|r| r.len() == 2 && r.iter().all(|p| p.current)) {
                        return;
                    }
                }
            }
            tokio::time::sleep(RETRY_PACE).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_stepdown_moves_its_streams_leader() {
    let cluster = TestCluster::start(3);
    let client = within("client", async_nats::connect(cluster.url(0)))
        .await
        .expect("client connects");
    let js = jetstream::new(client.clone());
    stream_with_consumer(&js, "ORDERS", 3).await;
    stream_with_consumer(&js, "SOLO", 1).await;
    wait_until_replicas_current(&js, "ORDERS").await;

    let before = cluster.leader_of("ORDERS");
    let reply = api(
        &client,
        "$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.worker",
        "",
    )
    .await;
    assert_eq!(reply, json!({"type": STEPDOWN_TYPE, "success": true}));
    let after = cluster.wait_for("another leader of ORDERS", || {
        (0..3).find(|&i| {
            i != before
                && cluster
                    .replica(i, "ORDERS")
                    .is_some_and(|r| r["leader"] == true)
        })
    });
    // The consumer's info names the new leader.
    let info = api(&client, "$JS.API.CONSUMER.INFO.ORDERS.worker", "").await;
    assert_eq!(info["cluster"]["leader"], format!("n{after}"), "{info}");

    // Unknown stream (the meta leader answers) and unknown consumer (the stream leader does).
    let reply = api(
        &client,
        "$JS.API.CONSUMER.LEADER.STEPDOWN.MISSING.worker",
        "",
    )
    .await;
    assert_eq!(reply["type"], STEPDOWN_TYPE);
    assert_eq!(reply["error"]["err_code"], 10059, "{reply}");
    let reply = api(
        &client,
        "$JS.API.CONSUMER.LEADER.STEPDOWN.ORDERS.missing",
        "",
    )
    .await;
    assert_eq!(reply["type"], STEPDOWN_TYPE);
    assert_eq!(reply["error"]["err_code"], 10014, "{reply}");

    // One replica: nothing to hand over, success as nats-server's R1 consumers answer.
    let solo = cluster.leader_of("SOLO");
    let reply = api(&client, "$JS.API.CONSUMER.LEADER.STEPDOWN.SOLO.worker", "").await;
    assert_eq!(reply, json!({"type": STEPDOWN_TYPE, "success": true}));
    assert_eq!(cluster.leader_of("SOLO"), solo);
}
