//! A stream updated or deleted in a three-node cluster is seen so on every node as soon as
//! the change has answered. Definitions change through the meta group; a stream's requests are
//! answered by the stream's leader, from its own meta state, and a meta follower learns of a
//! change with the meta leader's next append or heartbeat. So a change's reply waits until the
//! node that answers next has applied it. Otherwise a client that asks right away, through the
//! stream's leader, gets that node's stale answer first. Each round's stream is led by a node
//! other than the meta leader.

mod common;

use async_nats::jetstream::{self, stream};
use common::cluster::TestCluster;
use common::jetstream::{api, create_retried, step_down_stream};

/// Streams created, updated and deleted.
const ROUNDS: usize = 5;

#[tokio::test]
async fn updates_and_deletes_are_seen_on_every_node_once_they_answered() {
    let cluster = TestCluster::start(3);
    let meta = cluster.meta_leader();
    let mut clients = Vec::new();
    for i in 0..cluster.size() {
        clients.push(async_nats::connect(cluster.url(i)).await.expect("connects"));
    }
    let contexts: Vec<_> = clients.iter().cloned().map(jetstream::new).collect();
    for round in 0..ROUNDS {
        let name = format!("GONE{round}");
        create_retried(&contexts[meta], &name, 3).await;
        let leader = stream_led_by_a_meta_follower(&cluster, &clients[meta], &name, meta).await;

        // Updated through the stream's leader, which forwards the change to the meta leader.
        let limit = 100 + round as i64;
        let config = stream::Config {
            name: name.clone(),
            subjects: vec![format!("{}.*", name.to_lowercase())],
            num_replicas: 3,
            max_messages: limit,
            ..Default::default()
        };
        contexts[leader]
            .update_stream(config)
            .await
            .expect("updated");
        for (i, client) in clients.iter().enumerate() {
            let info = api(client, format!("$JS.API.STREAM.INFO.{name}"), "").await;
            assert_eq!(
                info["config"]["max_msgs"], limit,
                "round {round}, asked through node {i}: {info}"
            );
        }

        // Deleted through the stream's old leader, whose own answer reaches this client first.
        let deleted = contexts[leader]
            .delete_stream(&name)
            .await
            .expect("deleted");
        assert!(deleted.success);
        for (i, client) in clients.iter().enumerate() {
            let info = api(client, format!("$JS.API.STREAM.INFO.{name}"), "").await;
            assert_eq!(
                info["error"]["err_code"], 10059,
                "round {round}, asked through node {i}: {info}"
            );
        }
    }
}

/// Node index of `name`'s leader, stepping the stream down until a node other than the meta
/// leader `meta` leads it (bounded by `step_down_stream`'s attempts).
async fn stream_led_by_a_meta_follower(
    cluster: &TestCluster,
    client: &async_nats::Client,
    name: &str,
    meta: usize,
) -> usize {
    for _attempt in 0..10 {
        let leader = cluster.leader_of(name);
        if leader != meta {
            return leader;
        }
        assert!(step_down_stream(client, name).await, "no stepdown");
        cluster.wait_for("a new leader of the stream", || {
            let now = cluster.leader_of(name);
            (now != leader).then_some(())
        });
    }
    panic!("{name} stayed led by the meta leader");
}
