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
//! - **Snapshot, in place** (ADR 0014): sled itself is the snapshot. Building one queues a
//!   `snapshot` mark (its metadata) behind the group's applied batches, then really syncs sled
//!   ([`StateDb::sync`]); only then is it reported to openraft, which purges the log only up to
//!   a snapshot. So every purged entry is covered by durable sled state, and a snapshot costs a
//!   sync, not a copy of the stream: the compactor (`compactor.rs`) takes one whenever the log
//!   grew or state was removed. Snapshots before ADR 0014 were dump files; one that is newer
//!   than the mark stays the current snapshot.
//! - **Sending one** (a follower lags behind the purged log): `get_current_snapshot` dumps the
//!   group's keys as applied now into a file (on the state-machine task, so this group's
//!   applies wait for it; other groups do not), fsynced and renamed into place, and sends that;
//!   its metadata is the mark's when nothing was applied since, else the applied log id. The
//!   next in-place snapshot deletes the file. While openraft reads the initial state at start
//!   ([`DumpGate`]) it gets the mark's metadata and an empty placeholder instead of a dump.
//! - **Install** (a snapshot from the leader): the file is fsynced and committed first; then the
//!   group's keys are replaced under an `installing` marker in sled, so a crash mid-install is
//!   finished from the file on the next open.
//! - **Open**: if sled holds the marker, or is behind the current snapshot file (sled lost
//!   unsynced writes and the log was purged past them), the group's keys are restored from the
//!   snapshot file; then [`GroupMachine::load`] rebuilds the machine's in-memory state.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, EntryPayload, RaftSnapshotBuilder, StorageIOError};
use tokio::io::AsyncSeekExt;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::compactor::{Compactor, LogGrowth};
use super::machine::{ApplyPosition, GroupMachine, MachineError, MachineTxn, MachineView};
use super::raft_codec;
use super::restore::{blocking, clear_group, restore};
use super::snapshot::{self, SnapshotFile};
use super::snapshot_dir::SnapshotDir;
use super::state_db::{
    self, StateDb, KEY_APPLIED, KEY_INSTALLING, KEY_MEMBERSHIP, KEY_SNAPSHOT, SPACE_RAFT,
};
use super::state_writer::Owner;
use super::types::{
    Entry, GroupId, LogId, ProposalResponse, Snapshot, SnapshotMeta, StorageError,
    StoredMembership, TypeConfig,
};

/// [`GroupMachine::load`] with a panic inside it (sled's, on a damaged page) caught, and
/// damage found (a block failing its checksum, a value that does not decode) recorded in the
/// store's damage register, so that the group is set aside and rebuilt rather than retried
/// forever (ADR 0018).
fn load_checked(machine: &mut dyn GroupMachine, view: &MachineView) -> Result<(), MachineError> {
    let result = super::machine::catching(|| machine.load(view)).and_then(|loaded| loaded);
    if let Err(error) = &result {
        if error.is_damage() {
            view.report_damage(format!("loading its state: {error}"));
        }
    }
    result
}

fn sm_read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_state_machine(AnyError::new(&e)).into()
}

fn sm_write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_state_machine(AnyError::new(&e)).into()
}

fn snapshot_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_snapshot(None, AnyError::new(&e)).into()
}

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
    /// The newest snapshot kept in place: sled itself, synced with every apply up to its
    /// last log id (module docs). The snapshot file, if newer, is the current one instead.
    in_place: Option<SnapshotMeta>,
    dumps: DumpGate,
    /// What was applied since the last snapshot, and what was asked of the compactor.
    growth: LogGrowth,
    compactor: Option<Compactor>,
    /// Held as long as this instance or a snapshot builder of it lives, for the group that
    /// waits until they are gone ([`GroupStateMachine::hold`]).
    held: Option<TaskTrackerToken>,
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
        let mut in_place: Option<SnapshotMeta> = match read(KEY_SNAPSHOT)? {
            Some(bytes) => Some(raft_codec::decode(&bytes).map_err(sm_read_err)?),
            None => None,
        };
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
            let import = machine
                .stored_value_import(&MachineView::new(db.clone(), group))
                .map_err(sm_read_err)?;
            restore(db.tree().clone(), group, path, import)
                .await
                .map_err(sm_write_err)?;
            applied = meta.last_log_id;
            membership = meta.last_membership;
            // The restore cleared the in-place mark with every other key of the group.
            in_place = None;
        }
        let view = MachineView::new(db.clone(), group);
        load_checked(machine.as_mut(), &view).map_err(sm_read_err)?;
        Ok(GroupStateMachine {
            group,
            db,
            view,
            snapshots: Arc::new(Mutex::new(snapshots)),
            machine,
            applied,
            membership,
            owner,
            in_place,
            dumps: DumpGate::default(),
            growth: LogGrowth::default(),
            compactor: None,
            held: None,
        })
    }

    /// Ask `compactor` to keep the group's log small as entries are applied.
    pub fn compact_with(&mut self, compactor: Compactor) {
        self.compactor = Some(compactor);
    }

    /// Hold `token` while this instance, or a snapshot builder it made, lives: they hold the
    /// database, and openraft drops them on tasks of its own (the state-machine task ends
    /// after the Raft core, a snapshot build runs detached), so a stopping group waits for
    /// the token's tracker (`RaftGroup::shutdown`).
    pub fn hold(&mut self, token: TaskTrackerToken) {
        self.held = Some(token);
    }

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

    /// Read access to the group's machine keys.
    pub fn view(&self) -> MachineView {
        self.view.clone()
    }

    /// Delete everything the state machine of `group` stored: its sled keys and its snapshot
    /// directory. For dropping a group that is not running. Blocking.
    ///
    /// The group's files go last, once sled's forgetting the keys that point into them is
    /// durable (`StateDb::sync`): a crash in between leaves files no key points into, which
    /// the next start removes, never keys pointing into removed files.
    pub fn destroy(db: &StateDb, group: GroupId, snapshot_dir: &Path) -> io::Result<()> {
        db.writer().flush_all().map_err(io::Error::other)?;
        clear_group(db.tree(), group, &[])?;
        SnapshotDir::remove_all(snapshot_dir)?;
        if db.files_dir(group).exists() {
            db.sync()?;
            db.discard_files(group)?;
        }
        Ok(())
    }

    fn apply_entries(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<ProposalResponse>, StorageError> {
        let mut replies = Vec::new();
        let mut txn = MachineTxn::new(&self.view);
        let mut last_applied = None;
        let mut new_membership = None;
        let mut applied_bytes = 0u64;
        for entry in entries {
            let log_id = entry.log_id;
            match entry.payload {
                EntryPayload::Blank => replies.push(ProposalResponse::default()),
                EntryPayload::Normal(proposal) => {
                    applied_bytes += proposal
                        .commands
                        .iter()
                        .map(|command| command.payload.len() as u64)
                        .sum::<u64>();
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
        let (mut writes, files) = txn.into_parts();
        let removed_keys = writes.iter().filter(|(_, value)| value.is_none()).count() as u64;
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
        let ticket = self
            .db
            .writer()
            .submit_with(self.owner, writes, files)
            .map_err(sm_write_err)?;
        self.machine.submitted(ticket);
        self.applied = last_applied;
        if let Some(membership) = new_membership {
            self.membership = membership;
        }
        if let Some(reason) = self.growth.applied(applied_bytes, removed_keys) {
            if let Some(compactor) = &self.compactor {
                compactor.request(self.group, reason);
            }
        }
        Ok(replies)
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
        let db = self.db.clone();
        let built = meta.clone();
        let placeholder = blocking(move || {
            // sled must cover everything the log may now purge (module docs).
            db.sync()?;
            let mut snapshots = snapshots
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            snapshots.discard_older_than(&built)?;
            snapshots.placeholder()
        })
        .await
        .map_err(snapshot_err)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(placeholder.open().await.map_err(snapshot_err)?),
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
        let import = self
            .machine
            .stored_value_import(&self.view)
            .map_err(sm_read_err)?;
        restore(self.db.tree().clone(), self.group, path, import)
            .await
            .map_err(sm_write_err)?;
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership;
        // The restore cleared the in-place mark: the received file is the current snapshot.
        self.in_place = None;
        self.growth.snapshot_taken();
        load_checked(self.machine.as_mut(), &self.view).map_err(sm_read_err)?;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
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
                let snapshots = self.snapshots.clone();
                let placeholder = blocking(move || {
                    snapshots
                        .lock()
                        .unwrap_or_else(|poisoned| poisoned.into_inner())
                        .placeholder()
                })
                .await
                .map_err(read_err)?;
                let file = placeholder.open().await.map_err(read_err)?;
                return Ok(Some(Snapshot {
                    meta: mark,
                    snapshot: Box::new(file),
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
