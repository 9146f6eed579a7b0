//! Many groups sharing one log engine: all proposals succeed, and group commit shares fsyncs.

use std::sync::Arc;

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_groups_share_fsyncs_through_openraft() {
    const GROUPS: u64 = 20;
    const PROPOSALS: u64 = 200;
    const PROPOSERS: u64 = 10;
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let mut groups = Vec::new();
    for id in 0..GROUPS {
        groups.push(Arc::new(
            start_single(&storage, 100 + id, Counters::default(), test_options()).await,
        ));
    }
    let before = storage.log.stats();
    let mut tasks = Vec::new();
    for group in &groups {
        for proposer in 0..PROPOSERS {
            let group = group.clone();
            tasks.push(tokio::spawn(async move {
                let name = format!("p{proposer}");
                for expected in 1..=PROPOSALS / PROPOSERS {
                    let response = group.propose(increment(&name)).await.expect("proposal");
                    assert_eq!(value_of(&response), expected);
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let after = storage.log.stats();
    let proposals = GROUPS * PROPOSALS;
    let fsyncs = after.fsyncs - before.fsyncs;
    let entries = after.appends - before.appends;
    for group in &groups {
        for proposer in 0..PROPOSERS {
            assert_eq!(
                stored_counter(&group.view(), &format!("p{proposer}")),
                Some(PROPOSALS / PROPOSERS)
            );
        }
    }
    // Two mechanisms, both checked: concurrent proposals to one group share a Raft entry
    // (the batcher), and entries of different groups share an fsync (the engine).
    assert!(
        fsyncs * 3 < proposals,
        "{fsyncs} fsyncs for {proposals} proposals"
    );
    assert!(
        fsyncs < entries,
        "group commit across groups: {fsyncs} fsyncs for {entries} raft entries"
    );
    for group in &groups {
        group.shutdown().await.unwrap();
    }
}
