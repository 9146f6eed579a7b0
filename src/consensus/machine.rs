//! [`GroupMachine`]: the application state machine of one Raft group (a stream, the meta
//! group), and the read/write handles it gets over its slice of sled.
//!
//! ## The split between consensus and the application
//!
//! Consensus owns *where and when*: the group's key range in sled, applying committed entries in
//! order, writing the applied log id atomically with the machine's writes, snapshots (a dump of
//! the group's keys), installing them, and crash recovery. The machine owns *what*: how a
//! command changes its keys and what it answers.
//!
//! - The machine's durable state **is** its keys in sled. It may keep in-memory indexes or
//!   caches, rebuilt by [`GroupMachine::load`] from a [`MachineView`] when the group starts and
//!   after a snapshot replaced its keys. It needs no snapshot or restore code of its own.
//! - [`GroupMachine::apply`] stages writes in a [`MachineTxn`]. All commands of one `apply`
//!   call of openraft (one or more entries) plus the new applied log id and membership are
//!   written in **one** sled batch, so on reopen sled is self-consistent: its applied index never
//!   runs ahead of its data and vice versa. Reads through the txn see the txn's own staged
//!   writes.
//! - After the last command of the call, [`GroupMachine::finish`] may stage more writes into
//!   the same txn (writes batched across commands), still before the one sled batch.
//! - Apply must be deterministic: same keys + same command → same writes and response, on every
//!   replica. Domain failures are [`Response`]s, never errors; [`MachineError`] is for storage
//!   failures (sled I/O, a stored value that does not decode), which stop the group.
//! - If `apply` returned an error or the batch failed to write, the machine's in-memory state may
//!   be ahead of sled: the group stops (openraft reports a fatal storage error) and must be
//!   restarted, which calls `load` again. The batch is written behind the apply
//!   (`state_writer.rs`), so a failed write stops the group at its next apply or snapshot.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;

use super::state_db::{self, StateDb, PREFIX_LEN, SPACE_DATA};
use super::state_writer::{FileEffects, Write, WriteBehindError, WriteTicket};
use super::types::{Command, GroupId, Response};

/// A storage-level failure inside a state machine.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    #[error("state db: {0}")]
    Db(#[from] sled::Error),
    #[error("state db: {0}")]
    Writer(#[from] WriteBehindError),
    /// A persisted value the machine could not understand.
    #[error("corrupt state: {0}")]
    Corrupt(String),
    /// A committed command the machine could not decode (damage, or a command kind this
    /// build does not know): applying past it would diverge from the other replicas.
    #[error("corrupt state: undecodable command at {at:?}: {source}")]
    UndecodableCommand {
        at: ApplyPosition,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored record (`what`) that did not decode.
    #[error("corrupt state: {what}: {source}")]
    UndecodableRecord {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored record (`what`) under a version byte this build does not know.
    #[error("corrupt state: {what}: unknown value version")]
    UnknownRecordVersion { what: &'static str },
    /// A stored record (`what`) whose bytes do not match the checksum stored with them.
    #[error(
        "corrupt state: {what}: checksum {computed:#010x} does not match the stored {stored:#010x}"
    )]
    Checksum {
        what: &'static str,
        stored: u32,
        computed: u32,
    },
    /// A file the machine keeps beside its keys (`MachineView::files_dir`) failed to be
    /// read or written.
    #[error("group files: {0}")]
    Files(#[from] std::io::Error),
    /// Reading the state store panicked (sled 0.34 panics on some damaged pages).
    #[error("corrupt state: reading the state store panicked: {0}")]
    ReadPanicked(String),
}

impl MachineError {
    /// The error for a command at `at` that failed to decode, for `map_err`: every machine's
    /// `apply` starts by decoding its command this way.
    pub fn undecodable<E>(at: ApplyPosition) -> impl FnOnce(E) -> MachineError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |error| MachineError::UndecodableCommand {
            at,
            source: Box::new(error),
        }
    }

    /// Whether the error says the group's stored state is damaged (rather than the disk
    /// failing, or a command this build does not know): what setting the state aside and
    /// rebuilding it from the peers repairs (ADR 0015, ADR 0018).
    pub fn is_damage(&self) -> bool {
        match self {
            MachineError::Db(sled::Error::Io(e)) => matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::InvalidData
            ),
            MachineError::Db(sled::Error::Corruption { .. }) => true,
            MachineError::Db(_) | MachineError::Writer(_) => false,
            // A file a key points into that is missing or shorter than the key says.
            MachineError::Files(e) => matches!(
                e.kind(),
                std::io::ErrorKind::NotFound
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::InvalidData
            ),
            MachineError::UndecodableCommand { .. } => false,
            MachineError::Corrupt(_)
            | MachineError::UndecodableRecord { .. }
            | MachineError::UnknownRecordVersion { .. }
            | MachineError::Checksum { .. }
            | MachineError::ReadPanicked(_) => true,
        }
    }

    /// The error for a stored record (`what`) that failed to decode, for `map_err`.
    pub fn undecodable_record<E>(what: &'static str) -> impl FnOnce(E) -> MachineError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |error| MachineError::UndecodableRecord {
            what,
            source: Box::new(error),
        }
    }
}

/// Where a command sits in the log: the entry's Raft index and the command's position in the
/// entry's [`Proposal`](super::Proposal). Unique and increasing per group; stable across replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ApplyPosition {
    pub index: u64,
    pub position: u32,
}

/// Runs `read` (a read of sled), turning a panic into [`MachineError::ReadPanicked`].
pub(crate) fn catching<T>(read: impl FnOnce() -> T) -> Result<T, MachineError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read))
        .map_err(|panic| MachineError::ReadPanicked(panic_message(&*panic)))
}

/// The text a caught panic carried.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The application state machine of one group. One instance per group on every replica; owned
/// by the group's state-machine task, so `&mut self` calls never race.
pub trait GroupMachine: Send + Sync + 'static {
    /// Rebuild in-memory state from the group's keys. Called once before the first `apply`, and
    /// again after a snapshot replaced all keys.
    fn load(&mut self, view: &MachineView) -> Result<(), MachineError>;

    /// Apply one committed command, staging its writes in `txn`.
    fn apply(
        &mut self,
        at: ApplyPosition,
        command: &Command,
        txn: &mut MachineTxn<'_>,
    ) -> Result<Response, MachineError>;

    /// Called once after the last command of an `apply` call, before `txn` is committed:
    /// lets a machine stage one write for many commands (a stream writes the messages of the
    /// whole call as one block). Responses were already computed; this only stages writes.
    fn finish(&mut self, txn: &mut MachineTxn<'_>) -> Result<(), MachineError> {
        let _ = txn;
        Ok(())
    }

    /// Called after the writes of an `apply` call (the `finish` before it included) were
    /// queued to be written behind, with their batch's ticket: once
    /// [`MachineView::written`] reaches it, sled holds them.
    fn submitted(&mut self, ticket: WriteTicket) {
        let _ = ticket;
    }

    /// Called on the state-machine task when an in-place snapshot of the state as applied
    /// now is taken (the log behind it may go): a quiet moment to compact in-memory state
    /// kept only to make appends cheap (a stream seals its metadata's open tail chunk). Must
    /// change nothing observable.
    fn snapshot_taken(&mut self) {}

    /// How a stored value (machine key, value) leaves in a snapshot: checked, if it carries
    /// its own checksum (a leader must not ship damage it has not read since `load`: a
    /// follower would load it, fail, be rebuilt from the same snapshot, and so on), and
    /// replaced by what it stands for if it points into the group's files (`Some`): a
    /// snapshot carries values only. By default every value leaves as it is.
    fn stored_value_export(&self) -> StoredValueExport {
        Arc::new(|_, _| Ok(None))
    }

    /// The inverse of [`stored_value_export`](Self::stored_value_export), for a snapshot
    /// being installed into the group `view` reads: a value that the machine keeps in its
    /// files (`MachineView::files_dir`) goes there, and what points to it is stored instead.
    /// By default every value is stored as it came.
    fn stored_value_import(&self, view: &MachineView) -> Result<Box<ImportFn>, MachineError> {
        let _ = view;
        Ok(Box::new(|_, value| {
            Ok(Imported {
                value,
                sync_first: None,
            })
        }))
    }
}

/// (machine key, value) → the value to store instead, and a file it points into that must be
/// synced before the value is written. See [`GroupMachine::stored_value_import`].
pub type ImportFn = dyn FnMut(&[u8], Vec<u8>) -> Result<Imported, MachineError> + Send;

/// What a value of a received snapshot becomes (see [`ImportFn`]).
pub struct Imported {
    pub value: Vec<u8>,
    pub sync_first: Option<Arc<std::fs::File>>,
}

/// See [`GroupMachine::stored_value_export`].
pub type StoredValueExport = Arc<ExportFn>;
/// (machine key, value) → the value to dump instead, if any.
pub type ExportFn = dyn Fn(&[u8], &[u8]) -> Result<Option<Bytes>, MachineError> + Send + Sync;

/// Read access to one group's keys as they are in sled (without any pending txn): each read
/// first waits until the node's write-behind queue has written every applied batch (see
/// `state_writer.rs`), so it sees everything applied before it. That wait makes reads costly;
/// they are for `load` (and tests), not for hot paths. Cheap to clone; usable from any task.
/// Keys are the machine's own: the group prefix is stripped.
#[derive(Clone)]
pub struct MachineView {
    db: StateDb,
    group: GroupId,
}

impl MachineView {
    pub(crate) fn new(db: StateDb, group: GroupId) -> Self {
        MachineView { db, group }
    }

    /// The group this view reads.
    pub fn group(&self) -> GroupId {
        self.group
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, MachineError> {
        self.db.writer().flush_all()?;
        self.read(key)
    }

    /// The value of `key` as sled holds it now, without waiting for the write-behind queue:
    /// for keys the caller knows are written (their batch's ticket is at or below
    /// [`written`](Self::written)), on paths that must not wait for the queue.
    pub fn get_written(&self, key: &[u8]) -> Result<Option<Bytes>, MachineError> {
        self.read(key)
    }

    /// One key from sled. A panic inside sled (0.34 panics on some damaged pages) is caught
    /// here, the boundary between the serving path and the store, and becomes
    /// [`MachineError::ReadPanicked`]: the reader's request fails, the node keeps running.
    fn read(&self, key: &[u8]) -> Result<Option<Bytes>, MachineError> {
        let key = state_db::key(self.group, SPACE_DATA, key);
        let tree = self.db.tree();
        let value = catching(|| tree.get(&key))??;
        Ok(value.map(|v| Bytes::copy_from_slice(&v)))
    }

    /// Records that this group's stored state is damaged (see `damage.rs`): the node's
    /// supervisor sets it aside and rebuilds it, or takes the stream offline.
    pub fn report_damage(&self, reason: impl std::fmt::Display) {
        self.db.damage().report(self.group, reason);
    }

    /// Why this group's stored state is damaged, if it was found so.
    pub fn damage(&self) -> Option<String> {
        self.db.damage().reason(self.group)
    }

    /// `paths` (files of this group's) are removed after the next durable sync of the
    /// state db: no key in sled points into them now, but until that sync a crash could
    /// bring back keys that did.
    pub fn unlink_after_sync(&self, paths: Vec<std::path::PathBuf>) {
        self.db.writer().unlink_after_sync(paths);
    }

    /// Where this group's machine keeps files beside its keys (`StateDb::files_dir`).
    pub fn files_dir(&self) -> std::path::PathBuf {
        self.db.files_dir(self.group)
    }

    /// The highest write ticket in sled (see [`GroupMachine::submitted`]).
    pub fn written(&self) -> WriteTicket {
        self.db.writer().written()
    }

    /// All keys starting with `prefix`, in key order.
    pub fn scan_prefix(
        &self,
        prefix: &[u8],
    ) -> impl DoubleEndedIterator<Item = Result<(Vec<u8>, Bytes), MachineError>> + use<> {
        let unflushed = self.db.writer().flush_all().err();
        let items = self
            .db
            .tree()
            .scan_prefix(state_db::key(self.group, SPACE_DATA, prefix))
            .map(|item| {
                let (key, value) = item?;
                Ok((key[PREFIX_LEN..].to_vec(), Bytes::copy_from_slice(&value)))
            });
        unflushed
            .map(|error| Err(error.into()))
            .into_iter()
            .chain(items)
    }
}

/// Writes staged by [`GroupMachine::apply`]; committed by consensus in one atomic sled batch
/// together with the applied log id.
pub struct MachineTxn<'a> {
    view: &'a MachineView,
    /// Machine key → new value, `None` = delete. A map so reads see staged writes and the last
    /// write of a key wins.
    staged: BTreeMap<Vec<u8>, Option<Bytes>>,
    /// Files beside the keys that the batch needs on disk first, or frees (`FileEffects`).
    files: FileEffects,
}

impl<'a> MachineTxn<'a> {
    pub(crate) fn new(view: &'a MachineView) -> Self {
        MachineTxn {
            view,
            staged: BTreeMap::new(),
            files: FileEffects::default(),
        }
    }

    /// The value of `key`: staged in this txn, else as in sled.
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>, MachineError> {
        match self.staged.get(key) {
            Some(staged) => Ok(staged.clone()),
            None => self.view.get(key),
        }
    }

    pub fn insert(&mut self, key: impl Into<Vec<u8>>, value: impl Into<Bytes>) {
        self.staged.insert(key.into(), Some(value.into()));
    }

    pub fn remove(&mut self, key: impl Into<Vec<u8>>) {
        self.staged.insert(key.into(), None);
    }

    /// `file` (in the group's [`MachineView::files_dir`]) holds data keys of this txn point
    /// into: it is synced before they are written.
    pub fn sync_before(&mut self, file: Arc<std::fs::File>) {
        if !self.files.sync_first.iter().any(|f| Arc::ptr_eq(f, &file)) {
            self.files.sync_first.push(file);
        }
    }

    /// No key points into `path` once this txn is written: it is removed after the next
    /// durable sync of the state db.
    pub fn unlink_after_sync(&mut self, path: std::path::PathBuf) {
        self.files.unlink_after_sync.push(path);
    }

    /// Run `call` once the batch of this txn is written (`FileEffects::after_written`).
    pub fn after_written(&mut self, call: impl FnOnce() + Send + 'static) {
        self.files
            .after_written
            .push(super::state_writer::AfterWritten(Box::new(call)));
    }

    /// Read-only view of the committed state (does not see staged writes).
    pub fn view(&self) -> &MachineView {
        self.view
    }

    /// Number of staged writes.
    pub fn len(&self) -> usize {
        self.staged.len()
    }

    pub fn is_empty(&self) -> bool {
        self.staged.is_empty()
    }

    /// Move the staged writes into `batch` with their full sled keys.
    pub(crate) fn into_writes(self) -> Vec<Write> {
        self.into_parts().0
    }

    /// The staged writes with their full sled keys, and what they do to files.
    pub(crate) fn into_parts(self) -> (Vec<Write>, FileEffects) {
        let group = self.view.group;
        let writes = self
            .staged
            .into_iter()
            .map(|(key, value)| (state_db::key(group, SPACE_DATA, &key), value))
            .collect();
        (writes, self.files)
    }
}
