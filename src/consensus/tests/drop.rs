//! Dropping a group gives its disk back: its log segments, its sled keys and the space sled
//! held for them, and its snapshot directory (issue 16).

use std::sync::Arc;

use bytes::Bytes;

use super::support::{allocated, test_options, wait_until_blocking};
use crate::consensus::network::NoPeers;
use crate::consensus::node_storage::NodeStorage;
use crate::consensus::pacer::Pacer;
use crate::consensus::registry::GroupRegistry;
use crate::consensus::state_db::{self, SPACE_DATA};
use crate::store::log::{LogOp, LogOptions};

fn append(group: u64, index: u64, len: usize) -> LogOp {
    LogOp::Append {
        group,
        index,
        payload: Bytes::from(vec![index as u8; len]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_group_leaves_no_log_keys_or_space_behind() {
    const GROUP: u64 = 5;
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        segment_size: 1 << 20,
        ..LogOptions::default()
    };
    let storage = NodeStorage::open(dir.path(), options).unwrap().0;
    // The meta group's few entries share the first segment with the stream's log.
    storage.log.write(vec![append(0, 1, 100)]).await.unwrap();
    for index in 1..=128 {
        storage
            .log
            .write(vec![append(GROUP, index, 64 << 10)])
            .await
            .unwrap();
    }
    // The stream's state: message blocks of 64 KiB, as the stream machine writes them.
    let tree = storage.state.tree().clone();
    for block in 0u64..300 {
        let key = state_db::key(GROUP, SPACE_DATA, &block.to_be_bytes());
        tree.insert(key, vec![block as u8; 64 << 10]).unwrap();
    }
    storage.state.sync().unwrap();
    let snapshots = storage.snapshot_dir(GROUP);
    std::fs::create_dir_all(&snapshots).unwrap();
    std::fs::write(snapshots.join("old.snap"), b"snapshot").unwrap();
    let log_dir = dir.path().join("log");
    let state_dir = dir.path().join("state");
    let (log_before, state_before) = (allocated(&log_dir), allocated(&state_dir));
    assert!(log_before > 8 << 20, "log holds {log_before} bytes");
    assert!(state_before > 16 << 20, "state holds {state_before} bytes");

    let registry = GroupRegistry::new(
        1,
        storage.clone(),
        Arc::new(NoPeers),
        test_options(),
        Pacer::start(1),
    );
    registry.drop_group(GROUP).await.unwrap();

    assert_eq!(tree.scan_prefix(state_db::group_prefix(GROUP)).count(), 0);
    assert!(!snapshots.exists());
    assert_eq!(storage.log.groups(), vec![0]);
    let log_after = allocated(&log_dir);
    assert!(
        log_after < 4 << 20,
        "the log still holds {log_after} of {log_before} bytes"
    );
    let shrunk = wait_until_blocking(|| allocated(&state_dir) < state_before / 2);
    assert!(
        shrunk,
        "sled still holds {} of {state_before} bytes",
        allocated(&state_dir)
    );
    // The meta group's entry survived the copy.
    assert_eq!(storage.log.entries(0, ..).unwrap().len(), 1);
}
