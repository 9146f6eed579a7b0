//! Snapshots of a [`GroupStateMachine`]: the in-place snapshot's builder, the dump of the
//! current state for a follower that needs it, and the gate that keeps a restart from dumping
//! (the module docs of [`super`] tell how they fit).

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use openraft::{AnyError, RaftSnapshotBuilder, StorageIOError};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::{snapshot_err, GroupStateMachine};
use crate::consensus::raft_codec;
use crate::consensus::restore::blocking;
use crate::consensus::snapshot::{self, SnapshotFile};
use crate::consensus::snapshot_dir::SnapshotDir;
use crate::consensus::state_db::{self, StateDb, KEY_SNAPSHOT, SPACE_RAFT};
use crate::consensus::types::{Snapshot, SnapshotMeta, StorageError, TypeConfig};

/// Whether [`GroupStateMachine`] may dump its state to a snapshot file when openraft asks for
/// the current snapshot. Closed while openraft reads the group's initial state (`Raft::new`),
/// which needs only the snapshot's metadata: a restart must not dump a whole stream. Open
/// otherwise, so a follower that needs the snapshot gets it. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct DumpGate {
    closed: Arc<AtomicBool>,
}

impl DumpGate {
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    pub fn open(&self) {
        self.closed.store(false, Ordering::Release);
    }

    fn is_open(&self) -> bool {
        !self.closed.load(Ordering::Acquire)
    }
}

/// Builds one in-place snapshot. Its mark was queued behind the group's applied batches (on
/// the state-machine task, when the builder was created); building syncs sled, which makes the
/// mark and everything applied before it durable, and deletes an older snapshot file.
pub struct GroupSnapshotBuilder {
    prepared: Result<SnapshotMeta, StorageError>,
    snapshots: Arc<Mutex<SnapshotDir>>,
    db: StateDb,
    /// See [`GroupStateMachine::hold`].
    _held: Option<TaskTrackerToken>,
}

impl RaftSnapshotBuilder<TypeConfig> for GroupSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let meta = std::mem::replace(
            &mut self.prepared,
            Err(snapshot_err(io::Error::other(
                "snapshot builder used twice",
            ))),
        )?;
        let snapshots = self.snapshots.clone();
        let db = &self.db;
        let built = meta.clone();
        // sled must cover everything the log may now purge (module docs).
        db.sync_async().await.map_err(snapshot_err)?;
        blocking(move || {
            snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .discard_older_than(&built)
        })
        .await
        .map_err(snapshot_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotFile::placeholder().map_err(snapshot_err)?),
        })
    }
}

impl GroupStateMachine {
    /// The gate of snapshot dumps (see [`DumpGate`]).
    pub fn dump_gate(&self) -> DumpGate {
        self.dumps.clone()
    }

    /// The metadata of a snapshot of the state as applied now.
    fn current_meta(&self) -> SnapshotMeta {
        let last = self.applied;
        SnapshotMeta {
            last_log_id: last,
            last_membership: self.membership.clone(),
            snapshot_id: format!(
                "{}-{}-{}-{}",
                self.group,
                last.map(|id| id.leader_id.term).unwrap_or(0),
                last.map(|id| id.index + 1).unwrap_or(0),
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or(0)
            ),
        }
    }

    /// Dump the state as applied now into a snapshot file and make it the current one, unless
    /// the in-place snapshot `in_place` is that state (then its metadata is kept, so openraft
    /// sees the snapshot it built). On the state-machine task, so no apply interleaves.
    async fn dump_current(&self, in_place: &SnapshotMeta) -> io::Result<(SnapshotMeta, PathBuf)> {
        let meta = if in_place.last_log_id == self.applied {
            in_place.clone()
        } else {
            self.current_meta()
        };
        let temp = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .temp_path("dump");
        let (db, snapshots, group, owner) = (
            self.db.clone(),
            self.snapshots.clone(),
            self.group,
            self.owner,
        );
        let export = self.machine.stored_value_export();
        // A copy of the whole group for a follower that lacks what the log still holds: worth
        // an operator's notice for a big stream.
        tracing::info!(group = self.group, last_log = ?meta.last_log_id, "dumping the group's state to send a follower");
        blocking(move || {
            db.writer().flush(owner).map_err(io::Error::other)?;
            let dumped = snapshot::write_checked_dump(db.tree(), group, &meta, &temp, &*export);
            if let Err(error) = &dumped {
                let _ = std::fs::remove_file(&temp);
                let damaged = error
                    .get_ref()
                    .is_some_and(|inner| inner.is::<snapshot::DamagedRecord>());
                if damaged {
                    // Its own state is damaged here: set aside and rebuilt (ADR 0018).
                    db.damage()
                        .report(group, format!("dumping a snapshot: {error}"));
                }
            }
            dumped?;
            snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .commit(&temp, meta)
        })
        .await
    }

    /// A builder of an in-place snapshot of the state as applied now (openraft's
    /// `get_snapshot_builder`).
    pub(super) fn snapshot_builder(&mut self) -> GroupSnapshotBuilder {
        let meta = self.current_meta();
        // The mark goes behind this instance's applied batches, so it is durable only with
        // them; nothing is dumped (module docs).
        let mark = vec![(
            state_db::key(self.group, SPACE_RAFT, KEY_SNAPSHOT),
            Some(raft_codec::encode(&meta)),
        )];
        let prepared = match self.db.writer().submit(self.owner, mark) {
            Ok(_) => {
                self.in_place = Some(meta.clone());
                self.growth.snapshot_taken();
                self.machine.snapshot_taken();
                Ok(meta)
            }
            Err(e) => Err(snapshot_err(e)),
        };
        GroupSnapshotBuilder {
            prepared,
            snapshots: self.snapshots.clone(),
            db: self.db.clone(),
            _held: self.held.clone(),
        }
    }

    /// The current snapshot (openraft's `get_current_snapshot`), dumped if only the
    /// in-place one is newer.
    pub(super) async fn current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let read_err = |e: io::Error| {
            StorageError::from(StorageIOError::read_snapshot(None, AnyError::new(&e)))
        };
        let file = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .current()
            .cloned();
        let in_place = self.in_place.clone().filter(|mark| {
            file.as_ref()
                .is_none_or(|(meta, _)| meta.last_log_id < mark.last_log_id)
        });
        let (meta, path) = match (in_place, file) {
            (Some(mark), _) if !self.dumps.is_open() => {
                // openraft reads its initial state: the metadata is all it uses.
                return Ok(Some(Snapshot {
                    meta: mark,
                    snapshot: Box::new(SnapshotFile::placeholder().map_err(read_err)?),
                }));
            }
            (Some(mark), _) => self.dump_current(&mark).await.map_err(read_err)?,
            (None, Some(file)) => file,
            (None, None) => return Ok(None),
        };
        let file = SnapshotFile::open(&path).await.map_err(read_err)?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(file),
        }))
    }
}
