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

mod apply;
mod install;
mod snapshots;

pub use snapshots::{DumpGate, GroupSnapshotBuilder};

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::RaftStateMachine;
use openraft::{AnyError, StorageIOError};
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::compactor::{Compactor, LogGrowth};
use super::machine::{GroupMachine, MachineError, MachineView};
use super::raft_codec;
use super::restore::{blocking, clear_group, restore};
use super::snapshot::SnapshotFile;
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
        self.snapshot_builder()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StorageError> {
        self.begin_receiving().await
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StorageError> {
        self.install(meta, snapshot).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        self.current_snapshot().await
    }
}
