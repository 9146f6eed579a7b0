//! [`GroupStateMachine`]: openraft's `RaftStateMachine` for one group, over the node's sled
//! database ([`StateDb`]) and the group's [`GroupMachine`]. One per group on every replica,
//! owned by openraft's state-machine task (so applies, snapshot dumps and installs of one group
//! never run concurrently).
//!
//! - **Apply**: all entries of one openraft `apply` call go through the machine into one
//!   [`MachineTxn`] (then `GroupMachine::finish` stages what the machine batched); its writes, the last applied log id and the last membership are written in
//!   one atomic sled batch. sled is thus self-consistent on reopen: the applied index it
//!   reports is exactly the state it holds, and openraft re-applies committed entries after it.
//!   The batch is queued to the node's write-behind thread (`state_writer.rs`), so `apply`
//!   returns before sled has it; every read of this group's sled keys flushes that queue first.
//!   It is not fsynced either (sled may lag the log; the log is the durable source).
//! - **Snapshot**: a consistent dump of the group's machine keys (taken on the state-machine
//!   task, so this group's applies wait for it; other groups do not), fsynced, renamed into
//!   place, then sled is really synced ([`StateDb::sync`]). Only then is the snapshot reported to
//!   openraft, which purges the log only up to a snapshot. So every purged entry is covered both
//!   by the snapshot file and by durable sled state.
//! - **Install** (a snapshot from the leader): the file is fsynced and committed first; then the
//!   group's keys are replaced under an `installing` marker in sled, so a crash mid-install is
//!   finished from the file on the next open.
//! - **Open**: if sled holds the marker, or is behind the current snapshot file (sled lost
//!   unsynced writes and the log was purged past them), the group's keys are restored from the
//!   snapshot file; then [`GroupMachine::load`] rebuilds the machine's in-memory state.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use tokio::io::AsyncSeekExt;

use super::machine::{ApplyPosition, GroupMachine, MachineTxn, MachineView};
use super::raft_codec;
use super::snapshot::{self, SnapshotDir, SnapshotFile};
use super::state_db::{self, StateDb, KEY_APPLIED, KEY_INSTALLING, KEY_MEMBERSHIP, SPACE_RAFT};
use super::state_writer::Owner;
use super::types::{
    Entry, GroupId, LogId, ProposalResponse, Snapshot, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig,
};

/// Writes per sled batch when clearing or restoring a group's keys.
const RESTORE_BATCH: usize = 10_000;

fn sm_read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_state_machine(AnyError::new(&e)).into()
}

fn sm_write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn snapshot_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

fn join_err(e: tokio::task::JoinError) -> io::Error {
    io::Error::other(e)
}

/// Run blocking I/O off the async workers.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(join_err)?
}

/// The state machine of one group. See the module docs.
pub struct GroupStateMachine {
    group: GroupId,
    db: StateDb,
    view: MachineView,
    /// Shared with snapshot builders, which commit their file from a spawned task.
    snapshots: Arc<Mutex<SnapshotDir>>,
    machine: Box<dyn GroupMachine>,
    applied: Option<LogId>,
    membership: StoredMembership,
    /// This instance's batches in the node's write-behind queue (`state_writer.rs`).
    owner: Owner,
}

impl Drop for GroupStateMachine {
    fn drop(&mut self) {
        self.db.writer().release(self.owner);
    }
}

impl GroupStateMachine {
    /// Open the state machine of `group`: recover sled from the snapshot file if needed (see
    /// the module docs), then let `machine` load its state.
    pub async fn open(
        group: GroupId,
        db: StateDb,
        snapshot_dir: PathBuf,
        mut machine: Box<dyn GroupMachine>,
    ) -> Result<GroupStateMachine, StorageError> {
        let snapshots = blocking(move || SnapshotDir::open(snapshot_dir))
            .await
            .map_err(sm_read_err)?;
        // A previous instance of this group (before a restart) may still have batches queued.
        let writer = db.writer();
        writer.flush_all().map_err(sm_read_err)?;
        let owner = writer.new_owner();
        let tree = db.tree().clone();
        let read = |name: &[u8]| {
            tree.get(state_db::key(group, SPACE_RAFT, name))
                .map_err(sm_read_err)
        };
        let installing = read(KEY_INSTALLING)?;
        let mut applied: Option<LogId> = match read(KEY_APPLIED)? {
            Some(bytes) => raft_codec::decode(&bytes).map_err(sm_read_err)?,
            None => None,
        };
        let mut membership: StoredMembership = match read(KEY_MEMBERSHIP)? {
            Some(bytes) => raft_codec::decode(&bytes).map_err(sm_read_err)?,
            None => StoredMembership::default(),
        };
        let snapshot = snapshots.current().cloned();
        let needs_restore = installing.is_some()
            || snapshot
                .as_ref()
                .is_some_and(|(meta, _)| meta.last_log_id > applied);
        if needs_restore {
            let Some((meta, path)) = snapshot else {
                return Err(sm_read_err(io::Error::other(format!(
                    "group {group}: sled holds an unfinished snapshot install but no snapshot file exists"
                ))));
            };
            tracing::warn!(
                group,
                sled_applied = ?applied,
                snapshot = ?meta.last_log_id,
                interrupted_install = installing.is_some(),
                "restoring group state from its snapshot file"
            );
            restore(db.tree().clone(), group, path)
                .await
                .map_err(sm_write_err)?;
            applied = meta.last_log_id;
            membership = meta.last_membership;
        }
        let view = MachineView::new(db.clone(), group);
        machine.load(&view).map_err(sm_read_err)?;
        Ok(GroupStateMachine {
            group,
            db,
            view,
            snapshots: Arc::new(Mutex::new(snapshots)),
            machine,
            applied,
            membership,
            owner,
        })
    }

    /// Read access to the group's machine keys.
    pub fn view(&self) -> MachineView {
        self.view.clone()
    }

    /// Delete everything the state machine of `group` stored: its sled keys and its snapshot
    /// directory. For dropping a group that is not running. Blocking.
    pub fn destroy(db: &StateDb, group: GroupId, snapshot_dir: &Path) -> io::Result<()> {
        db.writer().flush_all().map_err(io::Error::other)?;
        clear_group(db.tree(), group, &[])?;
        SnapshotDir::remove_all(snapshot_dir)
    }

    fn apply_entries(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<ProposalResponse>, StorageError> {
        let mut replies = Vec::new();
        let mut txn = MachineTxn::new(&self.view);
        let mut last_applied = None;
        let mut new_membership = None;
        for entry in entries {
            let log_id = entry.log_id;
            match entry.payload {
                EntryPayload::Blank => replies.push(ProposalResponse::default()),
                EntryPayload::Normal(proposal) => {
                    let mut responses = Vec::with_capacity(proposal.commands.len());
                    for (position, command) in proposal.commands.iter().enumerate() {
                        let at = ApplyPosition {
                            index: log_id.index,
                            position: position as u32,
                        };
                        let response = self
                            .machine
                            .apply(at, command, &mut txn)
                            .map_err(|e| StorageIOError::apply(log_id, AnyError::new(&e)))?;
                        responses.push(response);
                    }
                    replies.push(ProposalResponse { responses });
                }
                EntryPayload::Membership(membership) => {
                    new_membership = Some(StoredMembership::new(Some(log_id), membership));
                    replies.push(ProposalResponse::default());
                }
            }
            last_applied = Some(log_id);
        }
        let Some(last_log_id) = last_applied else {
            return Ok(replies);
        };
        self.machine
            .finish(&mut txn)
            .map_err(|e| StorageIOError::apply(last_log_id, AnyError::new(&e)))?;
        let mut writes = txn.into_writes();
        writes.push((
            state_db::key(self.group, SPACE_RAFT, KEY_APPLIED),
            Some(raft_codec::encode(&last_applied)),
        ));
        if let Some(membership) = &new_membership {
            writes.push((
                state_db::key(self.group, SPACE_RAFT, KEY_MEMBERSHIP),
                Some(raft_codec::encode(membership)),
            ));
        }
        // Written behind: the machine's in-memory state already answers, and every reader of
        // sled flushes the queue first (state_writer.rs).
        self.db
            .writer()
            .submit(self.owner, writes)
            .map_err(sm_write_err)?;
        self.applied = last_applied;
        if let Some(membership) = new_membership {
            self.membership = membership;
        }
        Ok(replies)
    }
}

/// Delete all keys of `group`, in batches, except those in the raft space named in `keep`.
/// Blocking.
fn clear_group(tree: &sled::Tree, group: GroupId, keep: &[&[u8]]) -> io::Result<()> {
    let keep: Vec<Vec<u8>> = keep
        .iter()
        .map(|name| state_db::key(group, SPACE_RAFT, name))
        .collect();
    loop {
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for item in tree.scan_prefix(state_db::group_prefix(group)) {
            let (key, _) = item.map_err(io::Error::other)?;
            if keep.iter().any(|k| k.as_slice() == key.as_ref()) {
                continue;
            }
            batch.remove(key);
            n += 1;
            if n == RESTORE_BATCH {
                break;
            }
        }
        if n == 0 {
            return Ok(());
        }
        tree.apply_batch(batch).map_err(io::Error::other)?;
    }
}

/// Replace all keys of `group` by the contents of the snapshot file at `path`, crash-safely:
/// verify the file, set the `installing` marker (and drop the applied id) in one batch, clear,
/// write the records, then write applied + membership and remove the marker in one batch. A
/// crash anywhere before the last batch leaves the marker, and the next open restores again.
async fn restore(tree: sled::Tree, group: GroupId, path: PathBuf) -> io::Result<SnapshotMeta> {
    blocking(move || {
        let meta = snapshot::verify(&path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut mark = sled::Batch::default();
        mark.insert(
            state_db::key(group, SPACE_RAFT, KEY_INSTALLING),
            name.as_bytes(),
        );
        mark.remove(state_db::key(group, SPACE_RAFT, KEY_APPLIED));
        tree.apply_batch(mark).map_err(io::Error::other)?;
        clear_group(&tree, group, &[KEY_INSTALLING])?;
        let mut batch = sled::Batch::default();
        let mut n = 0;
        snapshot::read_records(&path, |key, value| {
            batch.insert(state_db::key(group, state_db::SPACE_DATA, &key), value);
            n += 1;
            if n == RESTORE_BATCH {
                tree.apply_batch(std::mem::take(&mut batch))
                    .map_err(io::Error::other)?;
                n = 0;
            }
            Ok(())
        })?;
        batch.insert(
            state_db::key(group, SPACE_RAFT, KEY_APPLIED),
            raft_codec::encode(&meta.last_log_id).as_ref(),
        );
        batch.insert(
            state_db::key(group, SPACE_RAFT, KEY_MEMBERSHIP),
            raft_codec::encode(&meta.last_membership).as_ref(),
        );
        batch.remove(state_db::key(group, SPACE_RAFT, KEY_INSTALLING));
        tree.apply_batch(batch).map_err(io::Error::other)?;
        Ok(meta)
    })
    .await
}

/// Builds one snapshot. The dump was already taken consistently (on the state-machine task,
/// when the builder was created); building commits it and syncs sled.
pub struct GroupSnapshotBuilder {
    prepared: Result<(PathBuf, SnapshotMeta), StorageError>,
    snapshots: Arc<Mutex<SnapshotDir>>,
    db: StateDb,
}

impl RaftSnapshotBuilder<TypeConfig> for GroupSnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (temp, meta) = std::mem::replace(
            &mut self.prepared,
            Err(snapshot_err(io::Error::other(
                "snapshot builder used twice",
            ))),
        )?;
        let snapshots = self.snapshots.clone();
        let db = self.db.clone();
        let (meta, path) = blocking(move || {
            let committed = snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .commit(&temp, meta)?;
            // sled must cover everything the log may now purge (module docs).
            db.sync()?;
            Ok(committed)
        })
        .await
        .map_err(snapshot_err)?;
        let file = SnapshotFile::open(&path).await.map_err(snapshot_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(file),
        })
    }
}

impl RaftStateMachine<TypeConfig> for GroupStateMachine {
    type SnapshotBuilder = GroupSnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<ProposalResponse>, StorageError>
    where
        I: IntoIterator<Item = Entry> + openraft::OptionalSend,
        I::IntoIter: openraft::OptionalSend,
    {
        self.apply_entries(entries)
    }

    async fn get_snapshot_builder(&mut self) -> GroupSnapshotBuilder {
        let last = self.applied;
        let meta = SnapshotMeta {
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
        };
        let temp = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .temp_path("build");
        let db = self.db.clone();
        let (group, owner) = (self.group, self.owner);
        // The dump runs here, on the state-machine task, so no apply of this group interleaves:
        // sled 0.34 has no point-in-time snapshots. It dumps sled once every applied batch of
        // this instance is written; a failed one fails the snapshot (the log stays unpurged).
        let prepared = blocking(move || {
            db.writer().flush(owner).map_err(io::Error::other)?;
            snapshot::write_dump(db.tree(), group, &meta, &temp)?;
            Ok((temp, meta))
        })
        .await
        .map_err(snapshot_err);
        GroupSnapshotBuilder {
            prepared,
            snapshots: self.snapshots.clone(),
            db: self.db.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        let path = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .temp_path("receive");
        let file = SnapshotFile::create(&path).await.map_err(snapshot_err)?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError> {
        tracing::info!(
            group = self.group,
            last_log = ?meta.last_log_id,
            "installing a snapshot received from the leader"
        );
        let mut data = *snapshot;
        let owned = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .owns_temp(data.path());
        let temp = if owned {
            data.sync().await.map_err(snapshot_err)?;
            data.path().to_path_buf()
        } else {
            // Not one of our receive files (e.g. handed over in-process): copy it in.
            let temp = self
                .snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .temp_path("receive");
            let mut source = data.into_file();
            source
                .seek(io::SeekFrom::Start(0))
                .await
                .map_err(snapshot_err)?;
            let mut copy = SnapshotFile::create(&temp).await.map_err(snapshot_err)?;
            tokio::io::copy(&mut source, &mut copy)
                .await
                .map_err(snapshot_err)?;
            copy.sync().await.map_err(snapshot_err)?;
            temp
        };
        let expected = meta.clone();
        let snapshots = self.snapshots.clone();
        let (meta, path) = blocking(move || {
            let header = snapshot::verify(&temp)?;
            if header.last_log_id != expected.last_log_id
                || header.last_membership != expected.last_membership
            {
                let _ = std::fs::remove_file(&temp);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "snapshot file is at {:?}, openraft installs {:?}",
                        header.last_log_id, expected.last_log_id
                    ),
                ));
            }
            snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .commit(&temp, expected)
        })
        .await
        .map_err(snapshot_err)?;
        // The group's queued batches land before its keys are replaced, never after.
        let db = self.db.clone();
        blocking(move || db.writer().flush_all().map_err(io::Error::other))
            .await
            .map_err(sm_write_err)?;
        restore(self.db.tree().clone(), self.group, path)
            .await
            .map_err(sm_write_err)?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership;
        self.machine.load(&self.view).map_err(sm_read_err)?;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        let current = self
            .snapshots
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .current()
            .cloned();
        let Some((meta, path)) = current else {
            return Ok(None);
        };
        let file = SnapshotFile::open(&path).await.map_err(|e| {
            StorageError::from(StorageIOError::read_snapshot(None, AnyError::new(&e)))
        })?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(file),
        }))
    }
}
