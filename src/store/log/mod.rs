//! The node-wide durable Raft log: one segmented write-ahead log shared by every Raft group
//! on the node, so that appends from many streams share one fsync (group commit). One
//! [`LogEngine`] per node; the openraft log-storage adapter (in `consensus/`) sits on it.
//!
//! # Files here
//! - `mod.rs`: [`LogEngine`], the public handle (submit, write, reads, stats).
//! - `types.rs`: [`LogOp`], [`MetaKey`], [`LogOptions`], [`LogStats`], [`RecoveryReport`].
//! - `error.rs`: [`LogError`].
//! - `record.rs`: the on-disk format (below), encoding and parsing.
//! - `segment.rs`: segment file names and file operations.
//! - `memtable.rs`: every group's log in memory; validation and undo (unit tests in
//!   `tests_memtable.rs`).
//! - `durable.rs`: what is durable where: segment liveness and checkpoints.
//! - `writer.rs`: the writer thread: group commit, rotation, deletion, compaction, failure
//!   handling; `writer/reclaim.rs`: freeing segments as soon as a drop or purge leaves them
//!   almost dead.
//! - `recovery.rs`: replay at open, torn tails, corruption.
//! - `fault.rs`: fault injection for tests.
//!
//! # Durability contract
//! [`LogEngine::write`] returns (and [`LogEngine::submit`]'s callback runs) only after the ops
//! are written and `fdatasync`ed; creating or deleting a segment also fsyncs the directory.
//! Requests complete in submission order, and a completed request implies every earlier one
//! is durable too (openraft: "all write-IO must be serialized"). The ops of one request are
//! all-or-nothing after a crash. Ops are visible to reads as soon as they are submitted, as
//! openraft requires of `append`; if a write fails they are rolled back.
//!
//! # Group commit
//! One writer thread owns the files. Requests queue on a channel; the writer takes everything
//! queued (up to [`LogOptions::max_batch_bytes`]), writes it with one `pwrite` and one
//! `fdatasync`, then completes the requests. While it syncs, new requests queue up and form
//! the next batch, so under load the fsync count per request falls with concurrency.
//!
//! # On-disk format (version 1, little-endian, append-only: never reorder or reuse a tag)
//! A log directory holds segment files `<id:016x>.wal` with consecutive ids. A segment is:
//!
//! ```text
//! segment header, 24 bytes:
//!   0  magic "JRWL"        4  format version u16 (= 1)   6  reserved u16 (0)
//!   8  segment id u64      16 crc32c(bytes 0..16) u32    20 reserved u32 (0)
//! then records, each a 32-byte header and a payload:
//!   0  header crc u32: crc32c of header bytes 4..32
//!   4  payload length u32 (at most 256 MiB)
//!   8  tag u8              9  flags u8 (bit 0: END_OF_WRITE, bit 1: START_OF_BATCH)
//!   10 reserved u16 (0)
//!   12 group u64           20 index u64                        28 payload crc32c u32
//!   32 payload
//! ```
//!
//! | tag | record        | index field          | payload     |
//! |-----|---------------|----------------------|-------------|
//! | 1   | Append        | entry index          | entry bytes |
//! | 2   | TruncateFrom  | first index removed  | empty       |
//! | 3   | PurgeUpTo     | last index removed   | empty       |
//! | 4   | SetMeta       | [`MetaKey`] code     | value       |
//! | 5   | DropGroup     | 0                    | empty       |
//! | 6   | Seal          | this segment's id    | empty       |
//! | 7   | CorruptMark   | 0                    | empty       |
//! | 8   | Rewrite       | entry index          | entry bytes |
//!
//! The ops of one request are consecutive records; the last has END_OF_WRITE. The first record
//! of a group-commit batch (one `pwrite` + one fsync; also a checkpoint, a seal) has
//! START_OF_BATCH: a batch is written only after the previous one was fsynced. The header has its own CRC so that a damaged payload still leaves group,
//! index and length trusted.
//!
//! *Preallocation*: the writer zero-fills the active segment [`LogOptions::preallocate`]
//! bytes ahead of its writes (up to the segment size), so most batches overwrite blocks that
//! already exist and their `fdatasync` has no new file size to commit (no ext4 journal
//! commit, shared with every other writer of the file system, to wait for). A segment file
//! thus ends in zeros after its last record (and, once a reopen sealed it, after its seal).
//!
//! # Segments, checkpoints and bounded disk
//! When the active segment reaches [`LogOptions::segment_size`], the writer appends a Seal
//! record, fsyncs, and creates the next segment, which starts with a *checkpoint*: the purge
//! mark, meta values and corruption mark of every group (as `PurgeUpTo`, `SetMeta` and
//! `CorruptMark` records, one write unit). A segment older than both the active segment and
//! the oldest live (unpurged, untruncated, undropped) entry of any group is deleted: every
//! non-entry state it held is in the active segment's checkpoint. Each open seals the previous
//! segment and starts a new one, so recovered files are never appended to again.
//!
//! *Compaction* (as raft-engine's rewrite): an idle group that never purges (openraft keeps
//! up to `max_in_snapshot_log_to_keep` entries, and an idle group never snapshots) would pin
//! its oldest segment and every later one. So once more than
//! [`LogOptions::compact_after_segments`] segments exist, the writer appends to the next
//! batch a copy (`Rewrite` records, highest index first) of the whole live log of every group
//! that has an entry in the oldest segment, taken from the memtable after every queued request
//! joined the batch; the old segment is then dead and deleted. Replay puts a copied entry back
//! only if it is missing (its old segment is gone); since segments are deleted oldest first,
//! missing entries are always a prefix of the group's log. A group with more than
//! [`LogOptions::compact_max_entries`] live entries is not copied (it holds that much data
//! anyway, and copying it again and again would only burn disk bandwidth), nor is a corrupt
//! one: they keep their segments until they purge or are dropped.
//!
//! *Reclaim* (`writer/reclaim.rs`): after a batch that purged, truncated or dropped a group,
//! the oldest segments (the active one included) whose live entries belong only to small
//! groups ([`LogOptions::reclaim_max_bytes`] in all) are freed before the batch completes: a
//! new segment is started, those entries are copied into it (the same `Rewrite` records), and
//! the old segments are deleted, when that frees at least [`LogOptions::reclaim_min_bytes`]
//! and 4 times what it copies. So a deleted stream's log leaves the disk as its drop completes,
//! even though the meta group's few unpurged entries sit in the same segments.
//!
//! # Recovery policy
//! Segments are replayed in id order; a request's ops are applied only when its
//! END_OF_WRITE record is seen. Where a segment's remaining bytes are all zero, it ends
//! there: that is preallocated space, never written (no record header is all zeros).
//! - **Torn tail**: damage (short or CRC-failing record, or a write without its end) in the
//!   newest segment, in its final batch (no intact START_OF_BATCH record after it), is the
//!   unsynced last batch of a crash, whose pages may have reached the disk in
//!   any order. It was never acknowledged: the file is cut back to the end of the last
//!   complete write before the damage and the cut is reported in
//!   [`RecoveryReport::torn_tail`]. A newest segment whose header is torn is removed. (Bit rot
//!   in the final batch after it was synced looks the same and is treated the same: no
//!   format can tell the two apart.)
//! - **Damaged payload in the middle** (intact header, payload CRC fails, and another batch
//!   starts after it or it is not the newest segment): reported in [`RecoveryReport::corruptions`]. If
//!   a later record made the data dead (truncate, purge, meta overwrite, drop) nothing is
//!   lost; otherwise the group is marked corrupt ([`RecoveryReport::corrupt_groups`]): reads
//!   return [`LogError::GroupCorrupt`], writes other than `DropGroup` are refused, and the mark
//!   is kept in every checkpoint until the group is dropped, so the node refuses to serve that
//!   stream rather than serve a log with a hole. Never silently skipped.
//! - **A damaged header of an older segment** is rebuilt from the file name (it holds only the
//!   magic, the format version and the id) and reported in
//!   [`RecoveryReport::rebuilt_segment_headers`]; its records are checked as always.
//! - **Damage that cannot be pinned to a group** (a damaged record header, data after a seal,
//!   an older segment without a seal — i.e. truncated —, or a missing segment file): [`LogEngine::open`] fails with [`LogError::Corrupt`] naming
//!   the file and offset. An operator must decide (e.g. wipe the node and re-sync it).
//!
//! # Failed writes
//! Disk full or an I/O error fails the batch and every request queued behind it with
//! [`LogError::WriteFailed`]; the segment is cut back to its last durable length (so the failed
//! batch is not half-visible after a crash) and the memtable rolled back. Nothing previously
//! acknowledged is touched, and the next write is tried afresh. If the cut-back itself fails,
//! the engine is broken: writes return [`LogError::Broken`] until it is reopened. A failed
//! fsync is never retried on the same data (Linux may have dropped the dirty pages): the data
//! is cut away and written again by the next request.
//!
//! # Locks
//! One `RwLock` around the memtable. Submitters take it for writing and send to the writer's
//! queue while holding it, so queue order equals memtable order. The writer takes it only to
//! roll back after a failure. Reads take it for reading. No I/O is done under it.

mod durable;
mod entries;
mod error;
mod fault;
mod memtable;
mod record;
mod recovery;
mod segment;
#[cfg(test)]
mod tests_memtable;
mod types;
mod writer;

#[cfg(test)]
mod tests;

use std::fs::{File, OpenOptions, TryLockError};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle};
use std::{fmt, io};

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

pub use entries::Resident;
pub use error::LogError;
pub use fault::FaultInjector;
pub use types::{Corruption, LogOp, LogOptions, LogStats, MetaKey, RecoveryReport, TornTail};

use memtable::Tables;
use segment::{Counters, Disk};
use writer::{Completion, Request, Writer};

/// State shared by the engine handles and the writer thread.
pub(crate) struct Shared {
    tables: RwLock<Tables>,
    counters: Arc<Counters>,
    /// The payload bytes of every group's entries in `tables`, readable without its lock.
    resident: Resident,
    /// Set once when a failed write could not be cut back; writes are refused from then on.
    broken: OnceLock<Arc<io::Error>>,
}

/// The node's Raft log engine. Cheap to clone; one per node, shared by every Raft group.
#[derive(Clone)]
pub struct LogEngine {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    dir: PathBuf,
    /// `None` only while dropping.
    requests: Option<Sender<Request>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// Exclusive lock on `<dir>/LOCK`, so two engines never write one log. Released when the
    /// last handle is dropped, after the writer thread has finished.
    _lock: File,
}

impl fmt::Debug for LogEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogEngine")
            .field("dir", &self.inner.dir)
            .finish_non_exhaustive()
    }
}

impl LogEngine {
    /// Open (or create) the log in `dir`, recover it, and start the writer thread.
    pub fn open(dir: &Path, options: LogOptions) -> Result<(LogEngine, RecoveryReport), LogError> {
        if options.segment_size < 4096 {
            return Err(LogError::InvalidOptions(format!(
                "segment_size {} is below 4096 bytes",
                options.segment_size
            )));
        }
        if options.max_batch_bytes == 0 {
            return Err(LogError::InvalidOptions("max_batch_bytes is 0".into()));
        }
        std::fs::create_dir_all(dir)
            .map_err(|error| LogError::io("create directory", dir, error))?;
        let lock = lock_dir(dir)?;
        let recovered = recovery::recover(dir)?;
        let counters = Arc::new(Counters::default());
        let shared = Arc::new(Shared {
            resident: recovered.tables.resident(),
            tables: RwLock::new(recovered.tables),
            counters: Arc::clone(&counters),
            broken: OnceLock::new(),
        });
        let disk = Disk {
            dir: dir.to_path_buf(),
            fault: options.fault.clone(),
            fsync: options.fsync,
            counters,
        };
        let writer = Writer::start(
            disk,
            options,
            Arc::clone(&shared),
            recovered.durable,
            recovered.segments,
            recovered.unsealed_last,
        )?;
        let (sender, receiver) = mpsc::channel();
        let handle = thread::Builder::new()
            .name("jetraft-log-writer".into())
            .spawn(move || writer.run(receiver))
            .map_err(|error| LogError::io("spawn writer thread for", dir, error))?;
        let engine = LogEngine {
            inner: Arc::new(Inner {
                shared,
                dir: dir.to_path_buf(),
                requests: Some(sender),
                writer: Mutex::new(Some(handle)),
                _lock: lock,
            }),
        };
        Ok((engine, recovered.report))
    }

    /// Apply `ops` and return once they are durable (written and fdatasynced).
    ///
    /// Not cancel-safe in the usual sense: once this is polled the ops are submitted, and
    /// dropping the future does not take them back (they are written, unacknowledged).
    pub async fn write(&self, ops: Vec<LogOp>) -> Result<(), LogError> {
        let (done, durable) = tokio::sync::oneshot::channel();
        self.submit(ops, move |result| {
            let _ = done.send(result);
        })?;
        durable.await.map_err(|_| LogError::Closed)?
    }

    /// Like [`write`](Self::write), blocking the calling thread (not for async contexts).
    pub fn write_blocking(&self, ops: Vec<LogOp>) -> Result<(), LogError> {
        let (done, durable) = mpsc::sync_channel(1);
        self.submit(ops, move |result| {
            let _ = done.send(result);
        })?;
        durable.recv().map_err(|_| LogError::Closed)?
    }

    /// Validate and apply `ops` now (readable on return) and queue them for the disk;
    /// `on_durable` runs on the writer thread once they are durable or have failed (keep it
    /// short: send on a channel). An invalid op is returned as an error and nothing is
    /// applied. This is the shape openraft's `append(entries, callback)` wants.
    pub fn submit(
        &self,
        ops: Vec<LogOp>,
        on_durable: impl FnOnce(Result<(), LogError>) + Send + 'static,
    ) -> Result<(), LogError> {
        self.submit_staged(ops, None, on_durable)
    }

    /// [`submit`](Self::submit), with `on_written` run (on the writer thread) once the ops are
    /// written to the segment file, before its fsync: safe from a crash of this process from
    /// then on, not yet from one of the machine. Not run if the write fails.
    pub fn submit_staged(
        &self,
        ops: Vec<LogOp>,
        on_written: Option<Box<dyn FnOnce() + Send + 'static>>,
        on_durable: impl FnOnce(Result<(), LogError>) + Send + 'static,
    ) -> Result<(), LogError> {
        let shared = &self.inner.shared;
        if let Some(cause) = shared.broken.get() {
            return Err(LogError::Broken(cause.clone()));
        }
        if ops.is_empty() {
            if let Some(on_written) = on_written {
                on_written();
            }
            on_durable(Ok(()));
            return Ok(());
        }
        let done: Completion = Box::new(on_durable);
        let mut tables = shared.tables.write();
        let undo = tables.apply_submitted(&ops)?;
        let requests = self.inner.requests.as_ref().ok_or(LogError::Closed)?;
        let request = Request {
            ops,
            rewrites: Vec::new(),
            undo,
            written: on_written,
            done,
        };
        if let Err(mpsc::SendError(request)) = requests.send(request) {
            tables.undo(request.undo);
            return Err(LogError::Closed);
        }
        Ok(())
    }

    /// Entries of `group` with indices in `range` (only those present: purged or not yet
    /// appended indices are skipped).
    pub fn entries(
        &self,
        group: u64,
        range: impl RangeBounds<u64>,
    ) -> Result<Vec<(u64, Bytes)>, LogError> {
        self.inner.shared.tables.read().entries(group, range)
    }

    /// Payload bytes of the entries of `group` still in the log (not purged).
    pub fn live_bytes(&self, group: u64) -> u64 {
        self.inner.shared.tables.read().live_bytes(group)
    }

    /// Payload bytes of every group's entries still in the log (in memory until purged),
    /// counted as they come and go: reading it takes no lock.
    pub fn resident(&self) -> &Resident {
        &self.inner.shared.resident
    }

    /// The `count` groups whose entries hold the most payload bytes, most first, with their
    /// bytes.
    pub fn largest_groups(&self, count: usize) -> Vec<(u64, u64)> {
        self.inner.shared.tables.read().largest(count)
    }

    /// Index of the first entry present, if any.
    pub fn first_index(&self, group: u64) -> Option<u64> {
        self.inner.shared.tables.read().first_index(group)
    }

    /// Index of the last entry present, if any.
    pub fn last_index(&self, group: u64) -> Option<u64> {
        self.inner.shared.tables.read().last_index(group)
    }

    /// Highest index purged so far, if any. The purged log id (with its term) is kept by the
    /// caller under [`MetaKey::LAST_PURGED`].
    pub fn last_purged(&self, group: u64) -> Option<u64> {
        self.inner.shared.tables.read().last_purged(group)
    }

    pub fn meta(&self, group: u64, key: MetaKey) -> Option<Bytes> {
        self.inner.shared.tables.read().meta(group, key)
    }

    /// Every group with any entry, purge mark, meta value or corruption mark, ascending.
    pub fn groups(&self) -> Vec<u64> {
        self.inner.shared.tables.read().groups()
    }

    pub fn is_corrupt(&self, group: u64) -> bool {
        self.inner.shared.tables.read().is_corrupt(group)
    }

    /// Groups marked corrupt by recovery; they refuse reads and writes until dropped.
    pub fn corrupt_groups(&self) -> Vec<u64> {
        self.inner.shared.tables.read().corrupt_groups()
    }

    pub fn stats(&self) -> LogStats {
        self.inner.shared.counters.snapshot()
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }
}

/// Take the exclusive lock of a log directory.
fn lock_dir(dir: &Path) -> Result<File, LogError> {
    let path = dir.join("LOCK");
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| LogError::io("open lock file", &path, error))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(LogError::Locked {
            dir: dir.to_path_buf(),
        }),
        Err(TryLockError::Error(error)) => Err(LogError::io("lock", &path, error)),
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the queue lets the writer finish what is queued and exit.
        drop(self.requests.take());
        if let Some(handle) = self.writer.lock().take() {
            // A completion callback may drop the last handle on the writer thread itself.
            if handle.thread().id() != thread::current().id() {
                let _ = handle.join();
            }
        }
    }
}
