//! Throughput probe, run by hand (not a timed test; DESIGN.md "Measuring"):
//!
//! ```text
//! cargo test --lib consensus::tests::bench -- --ignored --nocapture
//! ```
//!
//! Proposals per second and fsyncs per proposal for one group and for many groups, with
//! several concurrent proposers each, over a real log engine and sled in a temp directory.

use std::sync::Arc;
use std::time::Instant;

use super::support::*;

async fn run(groups: u64, proposers_per_group: u64, proposals: u64) {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let mut started = Vec::new();
    for id in 0..groups {
        started.push(Arc::new(
            start_single(&storage, id + 1, Counters::default(), test_options()).await,
        ));
    }
    let per_proposer = proposals / groups / proposers_per_group;
    let total = per_proposer * groups * proposers_per_group;
    let before = storage.log.stats();
    let sled_before = storage.state.syncs();
    let clock = Instant::now();
    let mut tasks = Vec::new();
    for group in &started {
        for proposer in 0..proposers_per_group {
            let group = group.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("p{proposer}");
                for _ in 0..per_proposer {
                    group.propose(increment(&name)).await.expect("proposal");
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = clock.elapsed();
    let after = storage.log.stats();
    let fsyncs = after.fsyncs - before.fsyncs;
    let entries = after.appends - before.appends;
    println!(
        "groups={groups:>3} proposers/group={proposers_per_group:>3} proposals={total:>6} \
         {:>8.0} proposals/s  fsyncs={fsyncs:>6} ({:.3}/proposal)  raft entries={entries} \
         sled syncs={}",
        total as f64 / elapsed.as_secs_f64(),
        fsyncs as f64 / total as f64,
        storage.state.syncs() - sled_before,
    );
    for group in &started {
        group.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "throughput probe, run by hand"]
async fn proposal_throughput() {
    run(1, 1, 2_000).await;
    run(1, 64, 10_000).await;
    run(20, 1, 10_000).await;
    run(20, 16, 20_000).await;
}
