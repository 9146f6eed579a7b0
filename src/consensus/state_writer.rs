//! [`StateWriter`]: writes the state machines' sled batches behind the apply, on one thread per
//! node. Owned by [`StateDb`](super::StateDb); every group's state machine hands it the batch
//! of each openraft `apply` call.
//!
//! Why: a sled batch of a stream's apply call (a message block of tens of KiB, the applied id)
//! costs sled a copy into its log buffer and often a rewrite of a whole leaf; measured on the
//! leader of a 3-node cluster that was more than half of the apply call, and the apply is on
//! the path of every PubAck. Nothing needs those writes at once: a machine's working state is
//! in memory (see [`GroupMachine`](super::GroupMachine)), and sled is only read to rebuild it
//! (`load`), to dump a snapshot, before the log is purged, and by a stream's message store
//! for blocks it knows written (by their ticket, below). So `apply` returns as soon as
//! its batch is queued, and everything that reads the group's sled state first waits until
//! the writer has written what was queued before ([`StateWriter::flush`]).
//!
//! Order and atomicity are unchanged: batches are written in submission order, each batch (or
//! several consecutive ones, merged) in one atomic sled batch, so sled's applied id still
//! never runs ahead of its data. A batch that fails to write fails its *owner* (one state
//! machine instance): the owner's later batches are skipped, its next `submit` or `flush`
//! returns the error, the group stops, and its restart reloads from sled and lets openraft
//! re-apply the entries after sled's applied id (they are still in the log: the log is purged
//! only behind a snapshot, and building one flushes first). A write that panics (sled 0.34
//! panics on some damaged pages) fails its owners the same way; the thread goes on, and
//! should it ever end, its queue closes so that nobody waits for it (`CloseOnExit`).
//!
//! The queue is bounded ([`MAX_QUEUED`] batches): an apply that outruns sled waits for room.
//! The writer gathers ([`GATHER_WINDOW`], `write_queue.rs`): once a batch is queued it waits
//! for more before writing, unless a flush waits or [`MAX_MERGED`] batches are queued, so a
//! trickle of applies (a sync publisher, many streams taking a message each) costs one sled
//! write and one file sync per window, not per apply.
//!
//! A batch may come with [`FileEffects`]: files a machine wrote beside its keys (a stream's
//! message segments) that must be on disk before sled can hold keys pointing into them, so
//! the writer syncs them (`file_sync.rs`) before it writes the batch; and files the batch's keys no
//! longer point into, which may go only once sled holds that durably, so the writer hands
//! them to the next [`StateDb::sync`](super::StateDb::sync) ([`StateWriter::take_unlinks`]).
//!
//! Each submitted batch gets a [`WriteTicket`], increasing in queue order, and the writer
//! publishes the highest ticket it has written ([`StateWriter::written`]): a machine that keeps
//! something in memory only until sled has it (a stream's newest message blocks) checks its
//! batch's ticket against it without waiting.

use std::collections::HashMap;
use std::fs::File;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use super::file_sync;
use super::machine::panic_message;
use super::write_queue::WriteQueue;

/// Batches queued before `submit` waits for the writer.
pub const MAX_QUEUED: usize = 64;
/// Consecutive batches merged into one sled batch, at most.
const MAX_MERGED: usize = 32;
/// How long the writer gathers batches once one is queued, unless a flush waits or
/// [`MAX_MERGED`] are queued (`write_queue.rs`).
pub const GATHER_WINDOW: Duration = Duration::from_millis(10);

/// One state-machine instance submitting batches (a group restarted after a failure is a new
/// owner, so the failure of the old instance does not stick to it).
pub type Owner = u64;

/// A full sled key and its new value (`None`: remove).
pub type Write = (Vec<u8>, Option<Bytes>);

/// The place of a submitted batch in the queue: batches are written in ticket order, and
/// every batch with a ticket at or below [`StateWriter::written`] is in sled (or was skipped
/// after its owner failed).
pub type WriteTicket = u64;

/// What a batch does to files beside sled (see the module docs), and what runs once it is
/// written.
#[derive(Debug, Default)]
pub struct FileEffects {
    /// Synced (`file_sync::sync_data_all`) before the batch is written.
    pub sync_first: Vec<Arc<File>>,
    /// Removed by the first [`StateDb::sync`](super::StateDb::sync) after the batch is written.
    pub unlink_after_sync: Vec<PathBuf>,
    /// Run on the writer's thread once [`StateWriter::written`] covers the batch (written, or
    /// skipped after its owner failed): a stream lets go of the blocks it kept in memory for
    /// readers until then, even if it applies nothing more.
    pub after_written: Vec<AfterWritten>,
}

/// A call run once a batch is written (see [`FileEffects::after_written`]). It must be short
/// and take no lock held while submitting a batch.
pub struct AfterWritten(pub Box<dyn FnOnce() + Send>);

impl std::fmt::Debug for AfterWritten {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterWritten")
    }
}

impl FileEffects {
    pub fn is_empty(&self) -> bool {
        self.sync_first.is_empty()
            && self.unlink_after_sync.is_empty()
            && self.after_written.is_empty()
    }
}

/// Writing a batch failed; the owner's state in sled stops at its last written batch.
#[derive(Clone, Debug, thiserror::Error)]
pub enum WriteBehindError {
    #[error("state db write failed: {0}")]
    Failed(Arc<sled::Error>),
    #[error("syncing a file beside the state db failed: {0}")]
    FileSync(Arc<std::io::Error>),
    #[error("state db write panicked: {0}")]
    Panicked(Arc<str>),
    #[error("state db writer stopped")]
    Stopped,
}

enum Job {
    Write {
        owner: Owner,
        ticket: WriteTicket,
        writes: Vec<Write>,
        files: FileEffects,
    },
    /// Answered once every job before it was handled.
    Flush(mpsc::SyncSender<()>),
}

#[derive(Default)]
struct Shared {
    /// Owners whose batch failed, with the error.
    failed: Mutex<HashMap<Owner, WriteBehindError>>,
    /// Highest ticket written (or skipped).
    written: AtomicU64,
    /// Highest ticket whose job is over: written (or skipped) and its after-written calls run.
    handled: AtomicU64,
    /// Files no key of a written batch points into any more, for the next sync.
    unlinks: Mutex<Vec<PathBuf>>,
}

/// The node's write-behind queue into sled. See the module docs.
pub struct StateWriter {
    jobs: Arc<WriteQueue<Job>>,
    thread: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
    next_owner: AtomicU64,
    /// The last ticket handed out; held while queueing, so tickets follow queue order.
    last_ticket: Mutex<WriteTicket>,
}

impl std::fmt::Debug for StateWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateWriter").finish_non_exhaustive()
    }
}

impl StateWriter {
    /// Start the writer thread over `tree`.
    pub fn start(tree: sled::Tree) -> std::io::Result<StateWriter> {
        let jobs = Arc::new(WriteQueue::new(MAX_QUEUED, MAX_MERGED, GATHER_WINDOW));
        let shared = Arc::new(Shared::default());
        let thread = thread::Builder::new().name("state-writer".into()).spawn({
            let shared = shared.clone();
            let jobs = jobs.clone();
            move || run(tree, &jobs, shared)
        })?;
        Ok(StateWriter {
            jobs,
            thread: Some(thread),
            shared,
            next_owner: AtomicU64::new(1),
            last_ticket: Mutex::new(0),
        })
    }

    /// A fresh owner id for a state machine instance.
    pub fn new_owner(&self) -> Owner {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    /// Queue `writes` to be written as one atomic batch after everything queued before. Waits
    /// only while the queue is full. Fails if an earlier batch of `owner` failed. Returns the
    /// batch's ticket.
    pub fn submit(
        &self,
        owner: Owner,
        writes: Vec<Write>,
    ) -> Result<WriteTicket, WriteBehindError> {
        self.submit_with(owner, writes, FileEffects::default())
    }

    /// [`submit`](Self::submit), with what the batch does to files beside sled.
    pub fn submit_with(
        &self,
        owner: Owner,
        writes: Vec<Write>,
        files: FileEffects,
    ) -> Result<WriteTicket, WriteBehindError> {
        self.check(owner)?;
        let mut last = self.last_ticket.lock();
        let ticket = *last + 1;
        self.jobs
            .push(
                Job::Write {
                    owner,
                    ticket,
                    writes,
                    files,
                },
                false,
            )
            .map_err(|_| WriteBehindError::Stopped)?;
        *last = ticket;
        Ok(ticket)
    }

    /// The highest ticket whose batch is written: every batch up to it is in sled.
    pub fn written(&self) -> WriteTicket {
        self.shared.written.load(Ordering::Acquire)
    }

    /// Wait until everything queued before this call is written (or skipped after a failure).
    /// Blocking. Nothing queued is nothing to wait for: a group's load reads sled key after
    /// key, and a round trip to the writer's thread each was a fifth of a restart's CPU.
    pub fn flush_all(&self) -> Result<(), WriteBehindError> {
        if self.shared.handled.load(Ordering::Acquire) >= *self.last_ticket.lock() {
            return Ok(());
        }
        let (done, wait) = mpsc::sync_channel(1);
        // Urgent: the writer stops gathering and writes what is queued before it at once.
        self.jobs
            .push(Job::Flush(done), true)
            .map_err(|_| WriteBehindError::Stopped)?;
        wait.recv().map_err(|_| WriteBehindError::Stopped)
    }

    /// [`flush_all`](Self::flush_all), then the error of `owner`'s failed batch if one failed.
    pub fn flush(&self, owner: Owner) -> Result<(), WriteBehindError> {
        self.flush_all()?;
        self.check(owner)
    }

    /// The files written batches no longer point into (see [`FileEffects`]): the caller
    /// removes them once sled holds everything written so far durably.
    pub fn take_unlinks(&self) -> Vec<PathBuf> {
        std::mem::take(&mut *self.shared.unlinks.lock())
    }

    /// Files no key points into, written or queued (see [`FileEffects`]), for the next sync.
    pub fn unlink_after_sync(&self, paths: Vec<PathBuf>) {
        self.shared.unlinks.lock().extend(paths);
    }

    /// Forget `owner` (its state machine is gone).
    pub fn release(&self, owner: Owner) {
        self.shared.failed.lock().remove(&owner);
    }

    fn check(&self, owner: Owner) -> Result<(), WriteBehindError> {
        match self.shared.failed.lock().get(&owner) {
            Some(error) => Err(error.clone()),
            None => Ok(()),
        }
    }
}

impl Drop for StateWriter {
    fn drop(&mut self) {
        // Closing the queue ends the thread once it wrote what was queued; joining it releases
        // its handle on the database before the database closes.
        self.jobs.close();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(tree: sled::Tree, jobs: &WriteQueue<Job>, shared: Arc<Shared>) {
    let _closing = CloseOnExit(jobs);
    let mut pending = Merged::default();
    while let Some(taken) = jobs.take(|job| matches!(job, Job::Flush(_))) {
        // Consecutive writes go into one sled batch; a flush is answered once the writes
        // queued before it are written.
        for job in taken {
            match job {
                Job::Write {
                    owner,
                    ticket,
                    writes,
                    files,
                } => {
                    pending.owners.push(owner);
                    pending.batches.push((writes, files));
                    pending.last_ticket = ticket;
                }
                Job::Flush(done) => {
                    std::mem::take(&mut pending).write(&tree, &shared);
                    let _ = done.send(());
                }
            }
        }
        std::mem::take(&mut pending).write(&tree, &shared);
    }
}

/// However the writer's thread ends, its queue closes and what is left in it goes: a flush
/// or submit waiting for the thread, or coming later, fails with
/// [`WriteBehindError::Stopped`] instead of waiting for a thread that is gone.
struct CloseOnExit<'a>(&'a WriteQueue<Job>);

impl Drop for CloseOnExit<'_> {
    fn drop(&mut self) {
        self.0.close();
        // Taken without gathering once closed; a dropped flush's sender wakes its waiter.
        while self.0.take(|_| false).is_some() {}
    }
}

/// Consecutive write jobs taken together, written as one sled batch.
#[derive(Default)]
struct Merged {
    owners: Vec<Owner>,
    batches: Vec<(Vec<Write>, FileEffects)>,
    last_ticket: WriteTicket,
}

impl Merged {
    fn write(mut self, tree: &sled::Tree, shared: &Shared) {
        if self.batches.is_empty() {
            return;
        }
        let after: Vec<AfterWritten> = self
            .batches
            .iter_mut()
            .flat_map(|(_, effects)| effects.after_written.drain(..))
            .collect();
        let owners = self.owners.clone();
        let wrote = catch_unwind(AssertUnwindSafe(|| {
            write(tree, shared, self.owners, self.batches)
        }));
        if let Err(panic) = wrote {
            // As a failed batch: its owners stop, the node and every other group go on (a
            // dead writer thread would leave every later flush waiting forever).
            let said: Arc<str> = panic_message(&*panic).into();
            tracing::error!(panic = %said, "state db batch panicked; its groups stop");
            let mut failed = shared.failed.lock();
            for owner in owners {
                failed.insert(owner, WriteBehindError::Panicked(said.clone()));
            }
        }
        shared.written.store(self.last_ticket, Ordering::Release);
        for AfterWritten(call) in after {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(call)) {
                let said = panic_message(&*panic);
                tracing::error!(panic = %said, "a call after a state db write panicked");
            }
        }
        shared.handled.store(self.last_ticket, Ordering::Release);
    }
}

fn write(
    tree: &sled::Tree,
    shared: &Shared,
    owners: Vec<Owner>,
    merged: Vec<(Vec<Write>, FileEffects)>,
) {
    let mut batch = sled::Batch::default();
    let mut written = Vec::with_capacity(owners.len());
    let mut unlinks = Vec::new();
    // Keys may point into these files only once they are on disk: every file of the merged
    // batches (once each, batches of owners failed before aside), synced together.
    let mut files: Vec<Arc<File>> = Vec::new();
    {
        let failed = shared.failed.lock();
        for (owner, (_, effects)) in owners.iter().zip(&merged) {
            if failed.contains_key(owner) {
                continue;
            }
            for file in &effects.sync_first {
                if !files.iter().any(|done| Arc::ptr_eq(done, file)) {
                    files.push(file.clone());
                }
            }
        }
    }
    let synced = file_sync::sync_data_all(&files);
    {
        let mut failed = shared.failed.lock();
        for (owner, (writes, effects)) in owners.into_iter().zip(merged) {
            // Batches an owner queued after its failure are skipped: sled keeps its state as
            // of the last good batch.
            if failed.contains_key(&owner) {
                continue;
            }
            let sync_failed = effects.sync_first.iter().find_map(|file| {
                let at = files.iter().position(|done| Arc::ptr_eq(done, file))?;
                synced[at].as_ref().err()
            });
            if let Some(error) = sync_failed {
                tracing::error!(%error, "syncing a group's files failed; the group stops");
                let error = std::io::Error::new(error.kind(), error.to_string());
                failed.insert(owner, WriteBehindError::FileSync(Arc::new(error)));
                continue;
            }
            for (key, value) in writes {
                match value {
                    Some(value) => batch.insert(key, value.as_ref()),
                    None => batch.remove(key),
                }
            }
            unlinks.extend(effects.unlink_after_sync);
            written.push(owner);
        }
    }
    let applied = tree.apply_batch(batch);
    super::state_db::release_spent_buffers();
    if let Err(error) = applied {
        tracing::error!(%error, "state db batch failed; its groups stop");
        let error = WriteBehindError::Failed(Arc::new(error));
        let mut failed = shared.failed.lock();
        for owner in written {
            failed.insert(owner, error.clone());
        }
        return;
    }
    if !unlinks.is_empty() {
        shared.unlinks.lock().extend(unlinks);
    }
}

#[cfg(test)]
#[path = "tests_state_writer.rs"]
mod tests;
