//! Quiet groups on a three-node cluster of real processes (issue 15): an idle R3 stream goes
//! quiet on every replica (no heartbeats, no timers) and still fails over when its leader's
//! node dies, with a follower down first, and when its leader is cut off from the others —
//! nothing acknowledged is lost and a cut-off quiet leader acknowledges nothing. A quiet
//! leader woken by a publish goes on serving through its wake.

mod common;

use common::cluster::TestCluster;
use common::jetstream::{
    cluster_client, create_retried, publish_acked, publish_until_acked, pull_until_waiting,
    read_all, STREAM,
};
use common::within;
use futures::StreamExt;

/// Each test runs three jetraft processes; on a small machine they run one at a time.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits until every running node reports the stream's group quiet in `/jsz`.
fn wait_until_quiet(cluster: &TestCluster, nodes: &[usize]) {
    cluster.wait_for("the stream's group to be quiet on every replica", || {
        nodes
            .iter()
            .all(|i| {
                cluster
                    .replica(*i, STREAM)
                    .is_some_and(|r| r["mode"] == "quiet")
            })
            .then_some(())
    });
}

/// Creates the R3 ORDERS stream through node 0, publishes messages 0..10 and waits until its
/// group is quiet on all three nodes; returns the client and the index of its leader.
async fn quiet_orders(cluster: &TestCluster) -> (async_nats::jetstream::Context, usize) {
    let admin = cluster_client(cluster.url(0)).await;
    create_retried(&admin, STREAM, 3).await;
    for id in 0..10 {
        publish_until_acked(&admin, id).await;
    }
    tokio::task::block_in_place(|| wait_until_quiet(cluster, &[0, 1, 2]));
    let leader = tokio::task::block_in_place(|| cluster.leader_of(STREAM));
    // /jsz: the serving replica is the Raft leader, and all three agree on term and leader.
    let replicas: Vec<_> = (0..3)
        .map(|i| cluster.replica(i, STREAM).expect("a replica in /jsz"))
        .collect();
    assert_eq!(replicas[leader]["raft_state"], "leader", "{replicas:?}");
    let roles = replicas
        .iter()
        .filter(|r| r["raft_state"] == "leader")
        .count();
    assert_eq!(roles, 1, "{replicas:?}");
    assert!(
        replicas.iter().all(|r| r["term"] == replicas[0]["term"]
            && r["raft_leader"] == replicas[0]["raft_leader"]
            && r["raft_leader"].is_u64()),
        "{replicas:?}"
    );
    (admin, leader)
}

/// Waits until node `at` counts node `peer` (by index) alive or dead by its pings.
fn wait_for_liveness(cluster: &TestCluster, at: usize, peer: usize, alive: bool) {
    let name = format!("n{peer}");
    cluster.wait_for("a node's view of a peer's liveness", || {
        (cluster.jsz(at)["peers_alive"][&name] == alive).then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_r3_stream_fails_over_when_its_leaders_node_is_killed() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let (_admin, leader) = quiet_orders(&cluster).await;
    assert_eq!(
        cluster.jsz(leader)["raft_groups"]["active"],
        0,
        "the meta group and the stream are quiet on the leader: {}",
        cluster.jsz(leader)
    );

    cluster.kill(leader);
    let survivor = (leader + 1) % 3;
    let js = cluster_client(cluster.url(survivor)).await;
    publish_until_acked(&js, 10).await;
    let ids = read_all(&js, 11).await;
    assert_eq!(ids, (0..11).collect::<Vec<_>>());
}

/// A publish wakes a quiet leader, whose last acknowledgement from its followers is as old as
/// its quiet: it must not take that for a lost quorum. It did, for a moment at each wake: it
/// stopped serving the stream, so a pull waiting on it got `409 Leadership Change` and a
/// publish meanwhile got "no responders".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_leader_woken_by_a_publish_serves_through_the_wake() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = TestCluster::start(3);
    let (admin, leader) = quiet_orders(&cluster).await;
    let client = async_nats::connect(cluster.url(leader))
        .await
        .expect("client connects");
    let js = async_nats::jetstream::new(client.clone());
    let stream = js.get_stream(STREAM).await.expect("stream info");
    let config = async_nats::jetstream::consumer::pull::Config {
        durable_name: Some("WAITING".into()),
        deliver_policy: async_nats::jetstream::consumer::DeliverPolicy::New,
        ack_policy: async_nats::jetstream::consumer::AckPolicy::None,
        ..Default::default()
    };
    stream
        .create_consumer(config)
        .await
        .expect("consumer created");
    for round in 0..5 {
        let inbox = client.new_inbox();
        let mut replies = client.subscribe(inbox.clone()).await.expect("subscribed");
        let body = r#"{"batch":1,"expires":30000000000}"#;
        pull_until_waiting(&client, &stream, "WAITING", inbox, body, 1).await;
        tokio::task::block_in_place(|| wait_until_quiet(&cluster, &[0, 1, 2]));
        // Two publishes, the second as soon as the first is acknowledged: both are taken.
        publish_acked(&admin, "orders.new", format!("first {round}")).await;
        publish_acked(&admin, "orders.new", format!("second {round}")).await;
        let reply = within("the waiting pull's message", replies.next())
            .await
            .expect("a reply");
        assert!(
            reply.status.is_none(),
            "round {round}: the waiting pull got status {:?} {:?}",
            reply.status,
            reply.description
        );
        assert_eq!(&reply.payload[..], format!("first {round}").as_bytes());
        // The second is read now, so that the next round's pull waits for a new message.
        let inbox = client.new_inbox();
        let mut rest = client.subscribe(inbox.clone()).await.expect("subscribed");
        client
            .publish_with_reply(
                "$JS.API.CONSUMER.MSG.NEXT.ORDERS.WAITING",
                inbox,
                r#"{"batch":1,"expires":5000000000}"#.into(),
            )
            .await
            .expect("pull sent");
        let second = within("the second message", rest.next())
            .await
            .expect("a reply");
        assert_eq!(&second.payload[..], format!("second {round}").as_bytes());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_group_stays_quiet_with_a_follower_down_and_fails_over_later() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let (_admin, leader) = quiet_orders(&cluster).await;
    let down = (leader + 1) % 3;
    let other = (leader + 2) % 3;

    // A follower dies: once both others count it dead, the group is still quiet on them and
    // still takes writes.
    cluster.kill(down);
    tokio::task::block_in_place(|| {
        wait_for_liveness(&cluster, leader, down, false);
        wait_for_liveness(&cluster, other, down, false);
        wait_until_quiet(&cluster, &[leader, other]);
    });
    let js = cluster_client(cluster.url(leader)).await;
    publish_until_acked(&js, 10).await;
    tokio::task::block_in_place(|| wait_until_quiet(&cluster, &[leader, other]));

    // It comes back and is caught up (the leader wakes the group for it), then the leader
    // dies: the two others elect a leader and nothing acknowledged is lost.
    cluster.restart(down);
    tokio::task::block_in_place(|| {
        cluster.wait_for("the restarted follower to catch up", || {
            cluster
                .replica(down, STREAM)
                .is_some_and(|r| r["last_seq"] == 11)
                .then_some(())
        });
        wait_until_quiet(&cluster, &[0, 1, 2]);
    });
    cluster.kill(leader);
    let js = cluster_client(cluster.url(down)).await;
    publish_until_acked(&js, 11).await;
    let ids = read_all(&js, 12).await;
    assert_eq!(ids, (0..12).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_quiet_leader_acknowledges_nothing_and_the_majority_goes_on() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = TestCluster::start_partitionable(3).await;
    let (_admin, old_leader) = quiet_orders(&cluster).await;
    let cut_off = cluster_client(cluster.url(old_leader)).await;
    cluster.isolate(old_leader);

    // Its lease lapses with the pings: it stops serving, and nothing sent to it meanwhile is
    // acknowledged (a publish wakes the group, whose append reaches nobody).
    let lost = cut_off
        .publish("orders.new", "order 1000".into())
        .await
        .unwrap()
        .await;
    assert!(
        lost.is_err(),
        "a cut-off quiet leader acknowledged a publish"
    );
    tokio::task::block_in_place(|| {
        cluster.wait_for("the cut-off leader to stop serving", || {
            (cluster.replica(old_leader, STREAM)?["leader"] == false).then_some(())
        })
    });

    // The others count it dead, wake the group and elect one of them.
    let majority = cluster_client(cluster.url((old_leader + 1) % 3)).await;
    for id in 10..20 {
        publish_until_acked(&majority, id).await;
    }
    cluster.heal(old_leader);
    tokio::task::block_in_place(|| cluster.wait_until_all_hold(STREAM, 20));
    let ids = read_all(&majority, 20).await;
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
}
