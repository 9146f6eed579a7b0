//! A stopped node lets go of its store: once its registry has stopped every group, and the
//! node's handles are dropped, no handle on sled is left, checked without yielding to the
//! runtime (a task that still held one would keep it); once sled closed its file too
//! (`state_db::Closing`), the database opens again at once.

use std::sync::Arc;

use super::support::*;
use crate::consensus::group::{Bootstrap, RaftGroup};
use crate::consensus::network::NoPeers;
use crate::consensus::node_storage::NodeStorage;
use crate::consensus::pacer::Pacer;
use crate::consensus::registry::GroupRegistry;
use crate::consensus::state_db::{Closing, StateDb};

fn registry(storage: &NodeStorage) -> GroupRegistry {
    GroupRegistry::new(
        1,
        storage.clone(),
        Arc::new(NoPeers),
        test_options(),
        Pacer::start(1),
    )
}

async fn start(registry: &GroupRegistry, group: u64) -> Arc<RaftGroup> {
    let group = registry
        .start(
            group,
            RaftGroup::single_voter(1, "127.0.0.1:0"),
            Bootstrap::EveryVoter,
            Box::new(Counters::default()),
        )
        .await
        .unwrap();
    for _ in 0..20 {
        group.propose(increment("x")).await.unwrap();
    }
    group
}

/// Nothing holds the database left by `closing` the moment the caller's handles are gone;
/// once sled closed its file, it opens again.
async fn assert_free(closing: Closing, dir: &std::path::Path) {
    assert!(
        closing.unheld(),
        "a handle on the state db outlived the stop"
    );
    closing.wait().await.unwrap();
    StateDb::open(dir.join("state")).expect("the state db opens again");
}

/// A dropped group has the compactor reclaim sled's space on a blocking thread; the node
/// stops while that runs (the compactor's task held the database after it).
#[tokio::test]
async fn the_store_is_free_once_stopped_during_a_reclaim() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let registry = registry(&storage);
    let kept = start(&registry, 1).await;
    let dropped = start(&registry, 2).await;
    drop(dropped);
    registry.drop_group(2).await.unwrap();
    registry.shutdown_all().await;
    let closing = storage.state.closing();
    drop((kept, registry, storage));
    assert_free(closing, dir.path()).await;
}

/// openraft drops a group's state machine on its own task after its core ended, and builds a
/// snapshot on a detached one (they held the database after the group stopped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_is_free_once_a_group_stopped_while_building_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let storage = open_storage(dir.path());
    let registry = registry(&storage);
    let group = start(&registry, 9).await;
    group.raft().trigger().snapshot().await.unwrap();
    registry.shutdown_all().await;
    let closing = storage.state.closing();
    drop((group, registry, storage));
    assert_free(closing, dir.path()).await;
}
