//! openraft's storage conformance suite against [`GroupLogStore`] + [`GroupStateMachine`] over
//! a real log engine and sled in a temp directory.

use openraft::testing::{StoreBuilder, Suite};
use tempfile::TempDir;

use super::support::{open_storage, Counters};
use crate::consensus::log_store::GroupLogStore;
use crate::consensus::state_machine::GroupStateMachine;
use crate::consensus::types::{StorageError, TypeConfig};

struct TempStores;

impl StoreBuilder<TypeConfig, GroupLogStore, GroupStateMachine, TempDir> for TempStores {
    async fn build(&self) -> Result<(TempDir, GroupLogStore, GroupStateMachine), StorageError> {
        let dir = tempfile::tempdir().expect("temp dir");
        let storage = open_storage(dir.path());
        let group = 42;
        let log = GroupLogStore::new(group, 1, storage.log.clone());
        let state_machine = GroupStateMachine::open(
            group,
            storage.state.clone(),
            storage.snapshot_dir(group),
            Box::new(Counters::default()),
        )
        .await?;
        Ok((dir, log, state_machine))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    Suite::test_all(TempStores).expect("openraft storage suite");
}
