//! Life cycle of a single-voter group: start, propose, restart.

use super::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_voter_group_starts_leads_and_applies_proposals() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let group = start_single(&storage, 7, Counters::default(), test_options()).await;
    assert_eq!(group.leader(), Some(1));

    for expected in 1..=5u64 {
        let response = group.propose(increment("a")).await.unwrap();
        assert_eq!(value_of(&response), expected);
    }
    // Applied means in sled, readable through the view.
    assert_eq!(stored_counter(&group.view(), "a"), Some(5));
    // Acknowledged means durable in the log engine.
    let last = storage.log.last_index(7).expect("entries in the log");
    assert!(
        last >= 5,
        "membership entry + 5 proposals, got last index {last}"
    );

    let responses = group
        .propose_all(vec![increment("a"), increment("b"), increment("a")])
        .await
        .unwrap();
    let values: Vec<u64> = responses.iter().map(value_of).collect();
    assert_eq!(
        values,
        vec![6, 1, 7],
        "commands of one entry apply in order"
    );
    group.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_group_keeps_its_state_and_continues_with_higher_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let last_before;
    {
        let storage = open_storage(dir.path());
        let group = start_single(&storage, 3, Counters::default(), test_options()).await;
        for _ in 0..20 {
            group.propose(increment("x")).await.unwrap();
        }
        last_before = storage.log.last_index(3).unwrap();
        group.shutdown().await.unwrap();
    }
    // Reopen engine and sled from the same directories.
    let storage = open_storage(dir.path());
    let counters = Counters::default();
    let total = counters.total.clone();
    let group = start_single(&storage, 3, counters, test_options()).await;
    assert_eq!(
        total.load(std::sync::atomic::Ordering::SeqCst),
        20,
        "machine reloaded its state"
    );
    assert_eq!(stored_counter(&group.view(), "x"), Some(20));
    let response = group.propose(increment("x")).await.unwrap();
    assert_eq!(value_of(&response), 21);
    let last_after = storage.log.last_index(3).unwrap();
    assert!(
        last_after > last_before,
        "new entries continue after {last_before}, got {last_after}"
    );
    assert_eq!(group.leader(), Some(1), "the single voter leads again");
    group.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_units_share_entries_and_keep_their_own_responses() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let group =
        std::sync::Arc::new(start_single(&storage, 9, Counters::default(), test_options()).await);
    let before = storage.log.stats();
    const UNITS: usize = 40;
    let tasks: Vec<_> = (0..UNITS)
        .map(|unit| {
            let group = group.clone();
            tokio::spawn(async move {
                let key = format!("u{unit}");
                let units = vec![increment(&key), increment(&key), increment(&key)];
                group.propose_all(units).await.unwrap()
            })
        })
        .collect();
    for task in tasks {
        let responses = task.await.unwrap();
        let values: Vec<u64> = responses.iter().map(value_of).collect();
        assert_eq!(
            values,
            vec![1, 2, 3],
            "a unit's commands stay together, in order"
        );
    }
    let entries = storage.log.stats().appends - before.appends;
    assert!(
        entries < UNITS as u64,
        "units proposed while an entry is committed share the next one: {entries} entries"
    );
    for unit in 0..UNITS {
        assert_eq!(stored_counter(&group.view(), &format!("u{unit}")), Some(3));
    }
    group.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_whose_fsync_failed_is_not_acknowledged() {
    // The leader hears of its own entry once written, before the fsync (log_store): the
    // proposal's answer must still wait for the fsync, and fail with it.
    let dir = tempfile::tempdir().unwrap();
    let fault = std::sync::Arc::new(crate::store::log::FaultInjector::new());
    let options = crate::store::log::LogOptions {
        fault: Some(fault.clone()),
        ..crate::store::log::LogOptions::default()
    };
    let storage = crate::consensus::NodeStorage::open(dir.path(), options)
        .expect("open node storage")
        .0;
    let group = start_single(&storage, 5, Counters::default(), test_options()).await;
    let response = group.propose(increment("a")).await.unwrap();
    assert_eq!(value_of(&response), 1);

    fault.fail_next_sync();
    let failed = group.propose(increment("a")).await;
    assert!(failed.is_err(), "acknowledged without an fsync: {failed:?}");
    assert_eq!(fault.fired(), 1);
}
