//! [`NodeStorage`]: the storage every Raft group of a node shares. One per node.
//!
//! ```text
//! <data dir>/log/          the node-wide write-ahead log (store::log::LogEngine): Raft logs
//! <data dir>/state/        the sled database (StateDb): every group's state machine
//! <data dir>/snapshots/<group id, 16 hex digits>/   each group's snapshot files
//! <data dir>/amnesia.json  groups that lost their state and may not vote yet (amnesia.rs)
//! <data dir>/quarantine/   damaged state moved aside (quarantine.rs)
//! ```
//!
//! [`NodeStorage::open_or_rebuild`] never lets a damaged store crash the node: a panic or a
//! corruption error while opening becomes a typed [`StorageOpenError`]; a node whose groups
//! can be rebuilt from peers (a cluster) then quarantines the store, marks every group
//! amnesiac and starts empty (ADR 0015).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::amnesia::Amnesia;

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
    /// sled holds less of a group than its log has given up: sled lost data (sled 0.34 cuts
    /// its own log at the first record failing its checksum and opens the older state
    /// silently). Checked at open for every group of the log.
    #[error("state db lost applied state of group {group}: applied {applied:?}, log purged up to {purged}")]
    StateBehindLog {
        group: GroupId,
        applied: Option<u64>,
        purged: u64,
    },
    /// Opening panicked (sled 0.34 panics on some damaged files).
    #[error("store unreadable (panic while opening): {0}")]
    Panicked(String),
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl StorageOpenError {
    /// Whether the store's contents are damaged (rather than the disk failing, full or in
    /// use): what a quarantine and a rebuild from peers can repair.
    pub fn is_damage(&self) -> bool {
        match self {
            StorageOpenError::Panicked(_) => true,
            StorageOpenError::StateBehindLog { .. } => true,
            StorageOpenError::Log(LogError::Corrupt { .. }) => true,
            StorageOpenError::Log(_) => false,
            // A cut or damaged file reads short or garbled; a missing disk or a lock does not.
            StorageOpenError::State(sled::Error::Io(e)) => matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
            ),
            StorageOpenError::State(_) => true,
            StorageOpenError::Io { .. } => false,
        }
    }
}

/// The log engine, the sled database, the snapshot root and the log compactor of a node.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct NodeStorage {
    pub log: LogEngine,
    pub state: StateDb,
    /// Keeps every group's log small (`compactor.rs`).
    pub compactor: Compactor,
    /// Groups that lost their state here and may not vote yet.
    pub amnesia: Arc<Amnesia>,
    snapshot_root: PathBuf,
    data_dir: PathBuf,
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
        check_state_covers_log(&log, &state, &snapshot_root)?;
        state
            .remove_files_of_keyless_groups()
            .map_err(|source| StorageOpenError::Io {
                action: "removing the files of dropped groups in",
                path: data_dir.join("state"),
                source,
            })?;
        Ok((
            NodeStorage {
                compactor: Compactor::new(state.clone(), log.clone()),
                log,
                state,
                amnesia: Arc::new(Amnesia::load(data_dir)),
                snapshot_root,
                data_dir: data_dir.to_path_buf(),
            },
            report,
        ))
    }

    /// [`open`](Self::open), with a panic while opening caught as
    /// [`StorageOpenError::Panicked`]; if that fails and `rebuild` (the node's groups have
    /// peers to be rebuilt from), quarantines the store, marks every group amnesiac and opens
    /// an empty one. Blocking.
    pub fn open_or_rebuild(
        data_dir: &Path,
        log_options: LogOptions,
        rebuild: bool,
    ) -> Result<(NodeStorage, RecoveryReport), StorageOpenError> {
        let error = match Self::open_catching(data_dir, log_options.clone()) {
            Ok(opened) => return Ok(opened),
            Err(error) if !rebuild || !error.is_damage() => return Err(error),
            Err(error) => error,
        };
        let reason = format!("the store could not be opened: {error}");
        tracing::error!(
            data_dir = %data_dir.display(),
            "{reason}; quarantining it and rebuilding every group from the peers"
        );
        let amnesia = Amnesia::load(data_dir);
        let io = |action: &'static str| {
            let path = data_dir.to_path_buf();
            move |source| StorageOpenError::Io {
                action,
                path,
                source,
            }
        };
        amnesia
            .forget_everything(reason.clone())
            .map_err(io("write the amnesia register in"))?;
        let moved = super::quarantine::quarantine_store(data_dir, &reason)
            .map_err(io("quarantine the store of"))?;
        tracing::error!(
            quarantine = %moved.display(),
            "damaged store moved aside; starting empty, every group amnesiac until caught up"
        );
        Self::open_catching(data_dir, log_options)
    }

    fn open_catching(
        data_dir: &Path,
        log_options: LogOptions,
    ) -> Result<(NodeStorage, RecoveryReport), StorageOpenError> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            Self::open(data_dir, log_options)
        }))
        .unwrap_or_else(|panic| {
            Err(StorageOpenError::Panicked(super::machine::panic_message(
                &*panic,
            )))
        })
    }

    /// The node's data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The snapshot directory of `group`.
    pub fn snapshot_dir(&self, group: GroupId) -> PathBuf {
        self.snapshot_root.join(format!("{group:016x}"))
    }
}

/// The invariant "purged only once sled holds it" (ADR 0014), checked at open: for every group
/// of the log, sled's applied index reaches the log's purge mark, or a snapshot file (which
/// the state machine restores from) exists. Anything else means sled lost applied state.
fn check_state_covers_log(
    log: &LogEngine,
    state: &StateDb,
    snapshot_root: &Path,
) -> Result<(), StorageOpenError> {
    use super::state_db::{key, KEY_APPLIED, SPACE_RAFT};
    for group in log.groups() {
        let Some(purged) = log.last_purged(group) else {
            continue;
        };
        let applied: Option<u64> = match state.tree().get(key(group, SPACE_RAFT, KEY_APPLIED))? {
            Some(bytes) => super::raft_codec::decode::<Option<super::types::LogId>>(&bytes)
                .map_err(|_| StorageOpenError::StateBehindLog {
                    group,
                    applied: None,
                    purged,
                })?
                .map(|id| id.index),
            None => None,
        };
        if applied.is_some_and(|applied| applied >= purged) {
            continue;
        }
        let snapshot_dir = snapshot_root.join(format!("{group:016x}"));
        let has_snapshot_file = std::fs::read_dir(&snapshot_dir)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(false);
        if !has_snapshot_file {
            return Err(StorageOpenError::StateBehindLog {
                group,
                applied,
                purged,
            });
        }
    }
    Ok(())
}
