//! The log follows the state (ADR 0014): once applied entries are durable in sled, the
//! compactor snapshots in place and purges the log, and removed state gives its WAL segments
//! back; a restart after such a purge loses nothing.

use std::path::Path;

use super::support::*;
use crate::consensus::group::RaftGroup;
use crate::consensus::node_storage::NodeStorage;
use crate::consensus::state_db::{self, KEY_SNAPSHOT, SPACE_RAFT};
use crate::store::log::LogOptions;

const GROUP: u64 = 11;

fn small_segments(dir: &Path) -> NodeStorage {
    let options = LogOptions {
        segment_size: 1 << 20,
        preallocate: 64 << 10,
        ..LogOptions::default()
    };
    NodeStorage::open(dir, options).unwrap().0
}

/// Whether the group's whole log up to its last applied entry is purged.
fn fully_purged(storage: &NodeStorage, group: &RaftGroup) -> bool {
    let applied = group
        .raft()
        .metrics()
        .borrow()
        .last_applied
        .map(|id| id.index);
    applied.is_some() && storage.log.last_purged(GROUP) >= applied
}

fn snapshot_files(storage: &NodeStorage) -> usize {
    match std::fs::read_dir(storage.snapshot_dir(GROUP)) {
        Ok(entries) => entries
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "snap")
            })
            .count(),
        Err(_) => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_is_purged_once_applied_and_a_restart_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    // The default options snapshot every 10,000 entries: far more than this. 200 KiB of
    // commands: enough to be worth a purge once the group is idle.
    let name = "k".repeat(1024);
    let group = start_single(&storage, GROUP, Counters::default(), test_options()).await;
    for _ in 0..200 {
        group.propose(increment(&name)).await.unwrap();
    }
    assert!(
        wait_until(|| fully_purged(&storage, &group)).await,
        "the log is purged up to the applied entry (purged {:?})",
        storage.log.last_purged(GROUP)
    );
    assert_eq!(
        snapshot_files(&storage),
        0,
        "the snapshot stays in sled, no copy"
    );
    let mark = storage
        .state
        .tree()
        .get(state_db::key(GROUP, SPACE_RAFT, KEY_SNAPSHOT))
        .unwrap();
    assert!(mark.is_some(), "the in-place snapshot mark is in sled");
    group.shutdown().await.unwrap();
    drop(group);
    drop(storage);

    let storage = open_storage(dir.path());
    let counters = Counters::default();
    let total = counters.total.clone();
    let group = start_single(&storage, GROUP, counters, test_options()).await;
    assert_eq!(stored_counter(&group.view(), &name), Some(200));
    assert_eq!(total.load(std::sync::atomic::Ordering::SeqCst), 200);
    assert_eq!(snapshot_files(&storage), 0, "a restart dumps nothing");
    assert_eq!(
        value_of(&group.propose(increment(&name)).await.unwrap()),
        201
    );
    group.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_left_alone_with_a_few_kb_of_entries_settles_and_purges_them() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    // ~8 KiB of commands: past SETTLE_MIN_BYTES, far below IDLE_MIN_BYTES.
    let name = "k".repeat(1024);
    let group = start_single(&storage, GROUP, Counters::default(), test_options()).await;
    for _ in 0..8 {
        group.propose(increment(&name)).await.unwrap();
    }
    assert!(
        wait_until(|| fully_purged(&storage, &group)).await,
        "the log of a group left alone is purged (purged {:?})",
        storage.log.last_purged(GROUP)
    );
    group.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removed_state_gives_its_log_segments_back() {
    let dir = tempfile::tempdir().unwrap();
    let storage = small_segments(dir.path());
    let group = start_single(&storage, GROUP, Counters::default(), test_options()).await;
    // 6 MiB of counters with long names: six 1 MiB segments of log.
    let names: Vec<String> = (0..96)
        .map(|n| format!("{n:04}{}", "x".repeat(64 << 10)))
        .collect();
    for name in &names {
        group.propose(increment(name)).await.unwrap();
    }
    let log_dir = dir.path().join("log");
    let filled = allocated(&log_dir);
    assert!(
        filled > 5 << 20,
        "the log holds the counters ({filled} bytes)"
    );
    for name in &names {
        group.propose(reset(name)).await.unwrap();
    }
    assert!(
        wait_until(|| fully_purged(&storage, &group) && allocated(&log_dir) < 2 << 20).await,
        "the log's segments are freed ({} bytes left, purged {:?})",
        allocated(&log_dir),
        storage.log.last_purged(GROUP)
    );
    group.shutdown().await.unwrap();
}
