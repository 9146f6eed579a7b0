//! [`NodeStorage`]: the storage every Raft group of a node shares. One per node.
//!
//! ```text
//! <data dir>/log/          the node-wide write-ahead log (store::log::LogEngine): Raft logs
//! <data dir>/state/        the sled database (StateDb): every group's state machine
//! <data dir>/snapshots/<group id, 16 hex digits>/   each group's snapshot files
//! ```

use std::path::{Path, PathBuf};

use super::compactor::Compactor;
use super::state_db::StateDb;
use super::types::GroupId;
use crate::store::log::{LogEngine, LogError, LogOptions, RecoveryReport};

/// Opening the node's storage failed.
#[derive(Debug, thiserror::Error)]
pub enum StorageOpenError {
    #[error("raft log: {0}")]
    Log(#[from] LogError),
    #[error("state db: {0}")]
    State(#[from] sled::Error),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The log engine, the sled database, the snapshot root and the log compactor of a node.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct NodeStorage {
    pub log: LogEngine,
    pub state: StateDb,
    /// Keeps every group's log small (`compactor.rs`).
    pub compactor: Compactor,
    snapshot_root: PathBuf,
}

impl NodeStorage {
    /// Open (or create) the node's storage under `data_dir`. Blocking (recovery reads the whole
    /// log); call before serving or from `spawn_blocking`.
    pub fn open(
        data_dir: &Path,
        log_options: LogOptions,
    ) -> Result<(NodeStorage, RecoveryReport), StorageOpenError> {
        let log_dir = data_dir.join("log");
        let snapshot_root = data_dir.join("snapshots");
        for dir in [&log_dir, &snapshot_root] {
            std::fs::create_dir_all(dir).map_err(|source| StorageOpenError::Io {
                action: "create directory",
                path: dir.clone(),
                source,
            })?;
        }
        let (log, report) = LogEngine::open(&log_dir, log_options)?;
        let state = StateDb::open(data_dir.join("state"))?;
        Ok((
            NodeStorage {
                log,
                compactor: Compactor::new(state.clone()),
                state,
                snapshot_root,
            },
            report,
        ))
    }

    /// The snapshot directory of `group`.
    pub fn snapshot_dir(&self, group: GroupId) -> PathBuf {
        self.snapshot_root.join(format!("{group:016x}"))
    }
}
