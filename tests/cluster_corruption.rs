//! Silent disk corruption of one replica of an R3 stream (issue 17): a node is stopped, its
//! store files are damaged at seeded random offsets (bit flips or a truncation; the seed is
//! printed, `JETRAFT_FAULT_SEED` replays it), it is restarted, and then the stream's leader is
//! killed, so the damaged node is needed for every quorum. The damaged node must start (never
//! panic), the stream must take writes again, every acknowledged message must read back with
//! its exact payload, and all replicas must agree once the killed leader is back.

mod common;

use std::time::{Duration, Instant};

use common::cluster::TestCluster;
use common::damage::{self, Damage, Files, Rng};
use common::jetstream::{cluster_client, create_retried, publish_until_acked, read_all, STREAM};

/// Bits flipped per damaged node (`JETRAFT_FAULT_FLIPS` overrides): enough that most seeds
/// hit live data, not only free space.
fn flips() -> usize {
    std::env::var("JETRAFT_FAULT_FLIPS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256)
}

/// Messages acknowledged before the damage (`JETRAFT_FAULT_MESSAGES` overrides; the issue's
/// scenario is 2000).
fn before() -> u64 {
    std::env::var("JETRAFT_FAULT_MESSAGES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(300)
}
/// How long the stream may take to take writes again once the leader is killed (the wait's
/// bound, not a timed assertion: the figure is printed).
const RESUME_WITHIN: Duration = Duration::from_secs(30);

/// Each test runs three jetraft processes; on a small machine they run one at a time.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Which replica is damaged.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Victim {
    Follower,
    Leader,
}

async fn corrupt_then_fail_over(test: &str, victim: Victim, files: Files, how: Damage) {
    let _one = ONE_CLUSTER_AT_A_TIME.lock().await;
    let seed = damage::seed(test);
    let mut rng = Rng::new(seed);
    let mut cluster = TestCluster::start(3);
    let admin = cluster_client(cluster.url(0)).await;
    create_retried(&admin, STREAM, 3).await;
    let leader = cluster.leader_of(STREAM);
    let damaged = match victim {
        Victim::Follower => (leader + 1) % 3,
        Victim::Leader => leader,
    };
    let survivor = (damaged + 1) % 3;
    let js = cluster_client(cluster.url(survivor)).await;
    let before = before();
    for id in 0..before {
        publish_until_acked(&js, id).await;
    }
    cluster.wait_until_all_hold(STREAM, before);

    cluster.kill(damaged);
    // With the damaged node down the others go on (a new leader when it led).
    let mut acked = before;
    for id in before..before + 10 {
        publish_until_acked(&js, id).await;
        acked += 1;
    }
    for line in damage::damage(cluster.dir(damaged), files, how, &mut rng) {
        eprintln!("{test}: {line}");
    }
    // It must start: a panic or an exit fails here, with its log.
    cluster.restart(damaged);
    // It repairs itself from its peers: its replica holds every acknowledged message.
    cluster.wait_for("the damaged replica to be repaired", || {
        cluster
            .replica(damaged, STREAM)
            .is_some_and(|r| r["messages"] == acked && r["last_seq"] == acked)
            .then_some(())
    });

    let quarantined = cluster.dir(damaged).join("quarantine").exists();
    eprintln!("{test}: damaged node quarantined state: {quarantined}");

    // Now the damaged node is needed for every quorum.
    let current = cluster.leader_of(STREAM);
    let killed = if current == damaged {
        (damaged + 1) % 3
    } else {
        current
    };
    cluster.kill(killed);
    let other = (0..3).find(|&i| i != damaged && i != killed).unwrap();
    let js = cluster_client(cluster.url(other)).await;
    let started = Instant::now();
    let mut resumed = None;
    while started.elapsed() < RESUME_WITHIN {
        let publish = async_nats::jetstream::context::Publish::build()
            .message_id(format!("msg-{acked}"))
            .payload(format!("order {acked}").into());
        let ack = match js.send_publish("orders.new", publish).await {
            Ok(pending) => pending.await.ok(),
            Err(_) => None,
        };
        if ack.is_some() {
            resumed = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let resumed = resumed.unwrap_or_else(|| {
        panic!("{test}: no write acknowledged within {RESUME_WITHIN:?} (seed {seed})")
    });
    eprintln!("{test}: writes resumed {resumed:?} after the leader was killed");
    let lost = acked.saturating_sub(
        cluster
            .replica(other, STREAM)
            .and_then(|r| r["messages"].as_u64())
            .unwrap_or(0),
    );
    eprintln!("{test}: acknowledged {acked}, missing on the surviving replica: {lost}");
    acked += 1;

    // Every acknowledged message, exactly once, with its exact payload.
    let ids = read_all(&js, acked as usize).await;
    assert_eq!(ids, (0..acked).collect::<Vec<_>>(), "seed {seed}");

    // The killed node comes back and all three agree.
    cluster.restart(killed);
    cluster.wait_until_all_hold(STREAM, acked);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_a_followers_sled_files() {
    corrupt_then_fail_over(
        "follower_sled",
        Victim::Follower,
        Files::Sled,
        Damage::Flips(flips()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_a_followers_wal() {
    corrupt_then_fail_over(
        "follower_wal",
        Victim::Follower,
        Files::Wal,
        Damage::Flips(flips()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followers_sled_file_truncated() {
    corrupt_then_fail_over(
        "follower_truncated",
        Victim::Follower,
        Files::Sled,
        Damage::Truncate,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_the_leaders_sled_files() {
    corrupt_then_fail_over(
        "leader_sled",
        Victim::Leader,
        Files::Sled,
        Damage::Flips(flips()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bit_flips_in_the_leaders_wal() {
    corrupt_then_fail_over(
        "leader_wal",
        Victim::Leader,
        Files::Wal,
        Damage::Flips(flips()),
    )
    .await;
}
