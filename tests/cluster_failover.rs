//! A three-node cluster of real processes: an R3 stream keeps every acknowledged message
//! through `kill -9` of its leader, refuses writes without a quorum, and the consumer resumes
//! from its ack floor on the new leader. Every node ends with the same state.

mod common;

use std::collections::BTreeSet;

use async_nats::jetstream::{self, consumer::pull};
use common::cluster::TestCluster;
use common::jetstream::{
    cluster_client, create_retried, publish_acked, publish_until_acked, read_all, RETRY_PACE,
};
use futures::StreamExt;

const STREAM: &str = "ORDERS";
/// 1 KiB messages past the compactor's least log worth a snapshot (64 KiB, `log_growth.rs`).
const BIG_MESSAGES: u64 = 80;

/// Each test runs three jetraft processes; on a small machine they run one at a time.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn create_r3(js: &jetstream::Context) {
    let cluster = create_retried(js, STREAM, 3).await;
    assert_eq!(cluster.name.as_deref(), Some("test"));
    assert_eq!(cluster.replicas.len(), 2, "two followers: {cluster:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r3_stream_survives_kill_9_of_its_leader() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    let stream = admin.get_stream(STREAM).await.unwrap();
    // A cluster client retries an API call that timed out during a leader change (bounded).
    let mut created = None;
    for _attempt in 0..20 {
        let config = pull::Config {
            durable_name: Some("worker".into()),
            ..Default::default()
        };
        match stream.create_consumer(config).await {
            Ok(consumer) => {
                created = Some(consumer);
                break;
            }
            Err(_) => tokio::time::sleep(RETRY_PACE).await,
        }
    }
    created.expect("durable consumer created");

    let leader = cluster.leader_of(STREAM);
    let follower = (leader + 1) % 3;
    // Through a follower: the publishes reach the leader over the route.
    let js = cluster_client(cluster.url(follower)).await;
    let mut acked = BTreeSet::new();
    for id in 0..200 {
        acked.insert((id, publish_until_acked(&js, id).await));
    }

    // The consumer acknowledges the first 50 before the failover.
    let consumer: jetstream::consumer::PullConsumer = stream.get_consumer("worker").await.unwrap();
    let mut batch = consumer.fetch().max_messages(50).messages().await.unwrap();
    let mut done = 0;
    while let Some(msg) = batch.next().await {
        msg.unwrap().double_ack().await.unwrap();
        done += 1;
    }
    assert_eq!(done, 50);

    cluster.kill(leader);
    // Keep going: the two survivors elect a new leader.
    for id in 200..400 {
        acked.insert((id, publish_until_acked(&js, id).await));
    }
    let new_leader = cluster.leader_of(STREAM);
    assert_ne!(new_leader, leader);

    cluster.restart(leader);
    let sequences: BTreeSet<u64> = acked.iter().map(|(_, seq)| *seq).collect();
    assert_eq!(
        sequences.len(),
        400,
        "each acked message has its own sequence"
    );

    // Every acknowledged message exactly once, in publish order.
    let ids = read_all(&js, 400).await;
    assert_eq!(ids, (0..400).collect::<Vec<_>>());

    // The durable consumer resumes after its ack floor.
    let consumer: jetstream::consumer::PullConsumer = js
        .get_stream(STREAM)
        .await
        .unwrap()
        .get_consumer("worker")
        .await
        .unwrap();
    let mut next = consumer.fetch().max_messages(1).messages().await.unwrap();
    let first = next.next().await.expect("a message").unwrap();
    assert_eq!(first.info().unwrap().stream_sequence, 51);

    // All three replicas converge on the same state.
    let last = *sequences.iter().max().unwrap();
    cluster.wait_for("all replicas to hold every message", || {
        (0..3)
            .all(|i| {
                cluster
                    .replica(i, STREAM)
                    .is_some_and(|r| r["last_seq"] == last && r["messages"] == 400)
            })
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_quorum_writes_are_refused_and_nothing_is_lost() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    for id in 0..20 {
        publish_until_acked(&admin, id).await;
    }
    let survivor = 0;
    cluster.kill(1);
    cluster.kill(2);

    // One of three: no quorum, so no acknowledgement — an error or a timeout, never an ack.
    let refused = admin
        .publish("orders.new", "order 1000".into())
        .await
        .unwrap()
        .await;
    assert!(
        refused.is_err(),
        "a publish without quorum was acknowledged"
    );

    cluster.restart(1);
    let js = cluster_client(cluster.url(survivor)).await;
    let seq = publish_until_acked(&js, 20).await;
    assert!(seq >= 21, "sequence {seq} after 20 acked messages");
    let ids = read_all(&js, 21).await;
    assert_eq!(&ids[..20], &(0..20).collect::<Vec<_>>()[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_a_compacted_log_catches_up_by_snapshot() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    // Snapshot every 50 entries and purge the log behind it.
    let mut cluster = TestCluster::start_with(3, &["--raft_compact_every", "50"]);
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    let leader = cluster.leader_of(STREAM);
    let behind = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    cluster.kill(behind);

    // Each synchronous publish is its own Raft entry: several snapshots and purges happen.
    let js = cluster_client(cluster.url(other)).await;
    for id in 0..300 {
        publish_until_acked(&js, id).await;
    }
    cluster.restart(behind);
    cluster.wait_for_log(behind, "installing a snapshot received from the leader");
    cluster.wait_for("the restarted follower to catch up", || {
        cluster
            .replica(behind, STREAM)
            .is_some_and(|r| r["messages"] == 300 && r["last_seq"] == 300)
            .then_some(())
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_restarted_with_its_logs_purged_sends_no_snapshot() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    // Enough bytes for the compactor to snapshot the group once it is left alone, and to purge
    // its log behind the snapshot as far as the followers hold it: all of it.
    for _ in 0..BIG_MESSAGES {
        publish_acked(&admin, "orders.new", vec![b'x'; 1024]).await;
    }
    cluster.wait_until_all_hold(STREAM, BIG_MESSAGES);
    let leader = cluster.leader_of(STREAM);
    cluster.wait_for("the leader's log purged whole", || {
        let replica = cluster.replica(leader, STREAM)?;
        let last = replica["last_log_index"].as_u64()?;
        (last > 0 && replica["purged_index"].as_u64()? == last).then_some(())
    });

    // Every node `kill -9`ed at once; the leader resumes leading from its vote, with no entry
    // in its log to probe the followers with.
    tokio::task::block_in_place(|| cluster.kill_all_and_restart());
    let js = cluster_client(cluster.url(0)).await;
    publish_until_acked(&js, BIG_MESSAGES).await;
    cluster.wait_until_all_hold(STREAM, BIG_MESSAGES + 1);
    // The followers held every entry: they catch up by the log, not by a copy of the stream
    // (which a follower holding its entries would not even install, once it had been sent).
    for i in 0..3 {
        assert!(
            !cluster.has_logged(i, "dumping the group's state to send a follower"),
            "node {i} dumped a snapshot of the stream for followers that held it"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_stops_acknowledging_and_the_majority_goes_on() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let cluster = TestCluster::start_partitionable(3).await;
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    for id in 0..10 {
        publish_until_acked(&admin, id).await;
    }
    let old_leader = tokio::task::block_in_place(|| cluster.leader_of(STREAM));
    let cut_off = cluster_client(cluster.url(old_leader)).await;
    cluster.isolate(old_leader);

    // The isolated leader cannot reach a quorum: nothing published through it is acknowledged.
    let lost = cut_off
        .publish("orders.new", "order 1000".into())
        .await
        .unwrap()
        .await;
    assert!(lost.is_err(), "an isolated leader acknowledged a publish");

    // Without a quorum it stops serving before the majority can have elected another leader:
    // clients never see two leaders. Its replica then answers STREAM.INFO with no leader.
    tokio::task::block_in_place(|| {
        cluster.wait_for("the isolated leader to stop serving", || {
            (cluster.replica(old_leader, STREAM)?["leader"] == false).then_some(())
        })
    });
    let mut leaderless_info = None;
    for _attempt in 0..20 {
        if let Ok(mut stream) = cut_off.get_stream(STREAM).await {
            let info = stream.info().await.cloned();
            if let Ok(info) = info {
                let leader = info.cluster.as_ref().and_then(|c| c.leader.clone());
                if leader.as_deref().unwrap_or_default().is_empty() {
                    leaderless_info = Some(info);
                    break;
                }
            }
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    let info = leaderless_info.expect("the cut-off replica answers STREAM.INFO without a leader");
    assert_eq!(info.state.messages, 10, "its replica's state");
    // Nor does it know a meta leader (had it led the meta group, it stopped as well).
    tokio::task::block_in_place(|| {
        cluster.wait_for("the cut-off node to know no meta leader", || {
            (cluster.jsz(old_leader)["meta_leader"] == "").then_some(())
        })
    });

    // The majority elects a new leader and takes writes.
    let majority = cluster_client(cluster.url((old_leader + 1) % 3)).await;
    for id in 10..20 {
        publish_until_acked(&majority, id).await;
    }

    // After healing, the old leader follows and its unacknowledged tail is gone: every node
    // holds exactly the 20 acknowledged messages (plus the lost one only if the majority
    // committed it, which it cannot have: it never reached them).
    cluster.heal(old_leader);
    tokio::task::block_in_place(|| cluster.wait_until_all_hold(STREAM, 20));
    let ids = read_all(&majority, 20).await;
    assert_eq!(ids, (0..20).collect::<Vec<_>>());
}

/// The names of the nodes stream `name`, created with `replicas`, was placed on.
async fn placed_on(js: &jetstream::Context, name: &str, replicas: usize) -> BTreeSet<String> {
    let cluster = create_retried(js, name, replicas).await;
    let mut nodes: BTreeSet<String> = cluster.replicas.iter().map(|r| r.name.clone()).collect();
    nodes.extend(cluster.leader);
    nodes
}

/// A node that is down gets no replicas of new streams while enough others are up; with too
/// few up (R3 on three nodes, one down) the stream is still created on all three, as
/// nats-server creates it, and the down replica catches up once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_streams_are_placed_on_nodes_that_are_up() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    cluster.wait_for_meta_leader();
    let meta = cluster.meta_leader();
    let dead = (meta + 1) % 3;
    cluster.kill(dead);
    let dead_name = format!("n{dead}");
    // Both survivors (either may lead the meta group after the kill) see it gone.
    cluster.wait_for("the survivors to see the node gone", || {
        let gone = |at: usize| {
            cluster
                .route(at, dead)
                .is_some_and(|route| route["connected"] == false && route["inbound"] == false)
        };
        (0..3).filter(|&i| i != dead).all(gone).then_some(())
    });

    let js = cluster_client(cluster.url(meta)).await;
    // The down node hosts nothing, so least-loaded placement would pick it first.
    for name in ["UP1", "UP2", "UP3"] {
        let nodes = placed_on(&js, name, 2).await;
        assert_eq!(nodes.len(), 2, "{name}: {nodes:?}");
        assert!(
            !nodes.contains(&dead_name),
            "{name} placed on the down node: {nodes:?}"
        );
    }
    let nodes = placed_on(&js, "ALL3", 3).await;
    assert!(nodes.contains(&dead_name), "R3 over three nodes: {nodes:?}");

    let mut acked = false;
    for _attempt in 0..50 {
        if let Ok(ack) = js.publish("all3.new", "order".into()).await {
            if ack.await.is_ok() {
                acked = true;
                break;
            }
        }
        tokio::time::sleep(RETRY_PACE).await;
    }
    assert!(
        acked,
        "a publish into ALL3 with two of its three replicas up"
    );
    cluster.restart(dead);
    cluster.wait_for("the returned node's ALL3 replica to catch up", || {
        let replica = cluster.replica(dead, "ALL3")?;
        (replica["last_seq"] == 1).then_some(())
    });
}

/// A whole cluster down, one follower back: a `STREAM.INFO` published on it before the node
/// leading the stream is up again (so before that node's interest for the API could reach
/// it) is held there and passed on once it is, instead of reaching only silent nodes and
/// being lost (`jetstream/api/relay.rs`). One node of three cannot elect: the leader that
/// comes back is the one its vote names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_before_the_leaders_node_is_up_is_answered_once_it_is() {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let mut cluster = TestCluster::start(3);
    let admin = cluster_client(cluster.url(0)).await;
    create_r3(&admin).await;
    for _ in 0..5 {
        publish_acked(&admin, "orders.new", b"x".to_vec()).await;
    }
    cluster.wait_until_all_hold(STREAM, 5);
    let leader = cluster.leader_of(STREAM);
    let follower = (leader + 1) % 3;
    drop(admin);
    tokio::task::block_in_place(|| {
        for i in 0..3 {
            cluster.kill(i);
        }
        cluster.restart(follower);
    });

    let client = async_nats::connect(cluster.url(follower)).await.unwrap();
    let inbox = client.new_inbox();
    let mut replies = client.subscribe(inbox.clone()).await.unwrap();
    let subject = format!("$JS.API.STREAM.INFO.{STREAM}");
    client
        .publish_with_reply(subject, inbox, "".into())
        .await
        .unwrap();
    client.flush().await.unwrap();
    tokio::task::block_in_place(|| cluster.restart(leader));

    let reply = common::within("the held request's answer", replies.next())
        .await
        .expect("a reply");
    let info: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
    assert_eq!(info["state"]["messages"], 5, "{info}");
}
