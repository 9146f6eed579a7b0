//! The writer thread: the single owner of the segment files. It gathers every request queued
//! since its last fsync into one batch, writes the batch with one `pwrite` and makes it durable
//! with one `fdatasync` (group commit), then completes the requests in submission order. It
//! also seals and rotates segments, writes checkpoints, deletes dead segments, and compacts:
//! when too many segments exist, the groups that keep the oldest one alive get their live
//! entries copied into the active segment (Rewrite records), appended to a batch behind every
//! request submitted so far, so the copy describes exactly the log at its position.
//!
//! On a failed write or sync it cuts the active segment back to the last durable length, rolls
//! the memtable back by undoing every request not yet durable (the failed batch and everything
//! queued behind it, newest first), and fails them all; the next request starts afresh. If even
//! the cut-back fails the engine is marked broken and refuses writes until it is reopened.

use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::mem;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLockWriteGuard;
use tracing::{debug, error, warn};

use super::durable::DurableIndex;
use super::error::LogError;
use super::memtable::{Tables, Undo};
use super::record::{
    self, FLAG_END_OF_WRITE, FLAG_START_OF_BATCH, RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use super::segment::{Counters, Disk};
use super::types::{LogOp, LogOptions};
use super::Shared;

/// The write buffer an idle writer keeps: a batch of a few small requests fits.
const IDLE_BUF_BYTES: usize = 256 << 10;
/// A batch's records are written out each time this many bytes of them are encoded (one
/// compaction's rewrites held 16.8 MB encoded whole, heaptrack, issue 16).
const WRITE_PIECE_BYTES: usize = 1 << 20;

mod reclaim;

/// A batch written by reclaim (the requests it took from the queue and its copy) and the
/// outcome of its write: the segment it went to.
type Reclaimed = (Vec<Request>, io::Result<u64>);

/// Called once with the outcome of a request, on the writer thread: keep it short.
pub(crate) type Completion = Box<dyn FnOnce(Result<(), LogError>) + Send + 'static>;
/// Called once a request's records were written to the segment file (in the page cache, not
/// yet fsynced), on the writer thread; never if the write failed.
pub(crate) type Written = Box<dyn FnOnce() + Send + 'static>;

/// One `write`/`submit` call, already applied to the memtable; or a compaction copy.
pub(crate) struct Request {
    pub ops: Vec<LogOp>,
    /// Compaction copies: (group, index, payload), each group's entries highest index first.
    pub rewrites: Vec<(u64, u64, Bytes)>,
    pub undo: Vec<Undo>,
    pub written: Option<Written>,
    pub done: Completion,
}

impl Request {
    fn encoded_len(&self) -> usize {
        let ops: usize = self.ops.iter().map(record::encoded_len).sum();
        let rewrites: usize = self
            .rewrites
            .iter()
            .map(|(_, _, payload)| RECORD_HEADER_LEN + payload.len())
            .sum();
        ops + rewrites
    }

    fn record_count(&self) -> usize {
        self.ops.len() + self.rewrites.len()
    }
}

/// The segment being appended to.
struct Active {
    id: u64,
    file: File,
    /// Durable length: everything before it was fsynced.
    len: u64,
    /// The file's length: zero-filled beyond `len` (`LogOptions::preallocate`).
    zeroed: u64,
}

pub(crate) struct Writer {
    disk: Disk,
    options: LogOptions,
    shared: Arc<Shared>,
    durable: DurableIndex,
    /// Segment files on disk, ascending; the active one (if any) is the last.
    segments: VecDeque<u64>,
    /// `None` after a seal until the next segment is created.
    active: Option<Active>,
    next_segment_id: u64,
    /// A segment was created since dead segments were last deleted.
    rotated: bool,
    /// Compaction found a group too big to copy out of this segment; retried after a purge.
    compaction_declined: Option<u64>,
    buf: Vec<u8>,
}

impl Writer {
    /// Set up on open: seal the segment the last run was writing, start a fresh segment (with
    /// a checkpoint) and delete what recovery left dead.
    pub fn start(
        disk: Disk,
        options: LogOptions,
        shared: Arc<Shared>,
        durable: DurableIndex,
        segments: Vec<u64>,
        unsealed_last: Option<(u64, u64)>,
    ) -> Result<Writer, LogError> {
        let next_segment_id = segments.last().map_or(1, |id| id + 1);
        let mut writer = Writer {
            disk,
            options,
            shared,
            durable,
            segments: segments.into(),
            active: None,
            next_segment_id,
            rotated: false,
            compaction_declined: None,
            buf: Vec::new(),
        };
        if let Some((id, len)) = unsealed_last {
            let file = writer
                .disk
                .open_for_write(id)
                .map_err(|error| writer.open_error("open segment", error))?;
            writer.active = Some(Active {
                id,
                file,
                len,
                zeroed: len,
            });
            writer
                .seal_active()
                .map_err(|error| writer.open_error("seal segment", error))?;
        }
        writer
            .create_segment()
            .map_err(|error| writer.open_error("create segment", error))?;
        writer.delete_dead_segments();
        Ok(writer)
    }

    fn open_error(&self, action: &'static str, error: io::Error) -> LogError {
        LogError::io(action, &self.disk.dir, error)
    }

    /// The thread body: runs until every engine handle is dropped and the queue is empty.
    pub fn run(mut self, requests: Receiver<Request>) {
        while let Some(first) = self.next_request(&requests) {
            let mut bytes = first.encoded_len();
            let mut batch = vec![first];
            while bytes < self.options.max_batch_bytes {
                match requests.try_recv() {
                    Ok(request) => {
                        bytes += request.encoded_len();
                        batch.push(request);
                    }
                    Err(_) => break,
                }
            }
            if let Some(cause) = self.shared.broken.get() {
                let error = LogError::Broken(cause.clone());
                self.fail(batch, &requests, error);
                continue;
            }
            self.add_compaction(&mut batch, &requests);
            match self.write_batch(&mut batch) {
                Ok(segment) => {
                    let freed = self.settle(&batch, segment);
                    // Reclaim (and settle its batch, which deletes the segments it freed)
                    // before completing, as dead segments are deleted: a caller that saw
                    // its drop or purge complete sees the space freed.
                    let reclaimed = if freed {
                        self.reclaim(&requests)
                            .map(|reclaimed| self.settle_reclaimed(reclaimed))
                    } else {
                        None
                    };
                    Self::complete(batch);
                    match reclaimed {
                        Some(Ok(batch)) => Self::complete(batch),
                        // The copy fails with the requests queued into its batch.
                        Some(Err((batch, cause))) => self.failed(batch, &requests, cause),
                        None => {}
                    }
                }
                Err(cause) => self.failed(batch, &requests, cause),
            }
        }
    }

    /// The next request, waiting for one if the queue is empty; `None` once every engine
    /// handle is gone. Before it waits, a write buffer grown by a burst is let go (up to
    /// [`LogOptions::max_batch_bytes`] and one request: 6 MB held by an idle node after a
    /// publish of 1 KiB messages, heaptrack, issue 16).
    fn next_request(&mut self, requests: &Receiver<Request>) -> Option<Request> {
        match requests.try_recv() {
            Ok(request) => Some(request),
            Err(TryRecvError::Disconnected) => None,
            Err(TryRecvError::Empty) => {
                if self.buf.capacity() > IDLE_BUF_BYTES {
                    self.buf = Vec::with_capacity(IDLE_BUF_BYTES);
                }
                requests.recv().ok()
            }
        }
    }

    /// A batch's write or fsync failed: cut back, roll back, fail it and the queue behind it.
    fn failed(&mut self, batch: Vec<Request>, requests: &Receiver<Request>, cause: io::Error) {
        Counters::add(&self.disk.counters.failed_batches, 1);
        warn!(error = %cause, "log write failed");
        let error = self.recover_from_failure(cause);
        self.fail(batch, requests, error);
    }

    /// Settle a batch written by [`reclaim`](Self::reclaim), or hand back its failure.
    fn settle_reclaimed(
        &mut self,
        (batch, written): Reclaimed,
    ) -> Result<Vec<Request>, (Vec<Request>, io::Error)> {
        match written {
            Ok(segment) => {
                self.settle(&batch, segment);
                Ok(batch)
            }
            Err(cause) => Err((batch, cause)),
        }
    }

    /// Write and fsync one batch; returns the segment it went to.
    fn write_batch(&mut self, batch: &mut [Request]) -> io::Result<u64> {
        if self
            .active
            .as_ref()
            .is_some_and(|active| active.len >= self.options.segment_size)
        {
            self.seal_active()?;
        }
        if self.active.is_none() {
            self.create_segment()?;
        }
        self.buf.clear();
        // Written out in pieces of about WRITE_PIECE_BYTES, all synced together below: a batch
        // of rewrites (a compaction's or a reclaim's live entries) is not encoded whole first.
        let start = self.active.as_ref().expect("segment created above").len;
        let mut encoded = 0u64;
        let mut flags = FLAG_START_OF_BATCH;
        for request in batch.iter() {
            let last = request.record_count() - 1;
            for (position, op) in request.ops.iter().enumerate() {
                if position == last {
                    flags |= FLAG_END_OF_WRITE;
                }
                record::encode_op(&mut self.buf, op, flags);
                flags = 0;
            }
            let offset = request.ops.len();
            for (position, (group, index, payload)) in request.rewrites.iter().enumerate() {
                if offset + position == last {
                    flags |= FLAG_END_OF_WRITE;
                }
                record::encode_rewrite(&mut self.buf, *group, *index, payload, flags);
                flags = 0;
                if self.buf.len() >= WRITE_PIECE_BYTES {
                    self.write_piece(start + encoded)?;
                    encoded += self.buf.len() as u64;
                    self.buf.clear();
                }
            }
        }
        self.write_piece(start + encoded)?;
        encoded += self.buf.len() as u64;
        let active = self.active.as_mut().expect("segment created above");
        for request in batch.iter_mut() {
            if let Some(written) = request.written.take() {
                written();
            }
        }
        self.disk.sync(&active.file)?;
        active.len += encoded;
        Counters::add(&self.disk.counters.batches, 1);
        Ok(active.id)
    }

    /// Writes `buf` at `at` in the active segment, zeroing the stretch ahead of it first (see
    /// [`LogOptions::preallocate`]).
    fn write_piece(&mut self, at: u64) -> io::Result<()> {
        let active = self.active.as_mut().expect("a segment is active");
        let end = at + self.buf.len() as u64;
        if end > active.zeroed && self.options.preallocate > 0 {
            // Zero the next stretch; this batch's fdatasync makes it (and the new file size)
            // durable, and the batches after it only overwrite.
            let ahead = (end + self.options.preallocate).min(self.options.segment_size);
            let to = end.max(ahead);
            self.disk.write_zeros(&active.file, active.zeroed, to)?;
            active.zeroed = to;
        }
        self.disk.write_at(&active.file, &self.buf, at)
    }

    /// Record a durable batch in the durable index and the counters, and delete the segments
    /// it left dead. Returns whether its ops purged, truncated or dropped a group (so
    /// [`reclaim`](Self::reclaim) may free more).
    fn settle(&mut self, batch: &[Request], segment: u64) -> bool {
        let counters = Arc::clone(&self.disk.counters);
        let mut frees_space = false;
        let mut removed_entries = false;
        for request in batch {
            for op in &request.ops {
                self.durable.apply(op, segment);
                match op {
                    LogOp::Append { .. } => Counters::add(&counters.appends, 1),
                    LogOp::TruncateFrom { .. }
                    | LogOp::PurgeUpTo { .. }
                    | LogOp::DropGroup { .. } => {
                        frees_space = true;
                        removed_entries = true;
                    }
                    LogOp::SetMeta { .. } => {}
                }
            }
            Counters::add(&counters.ops, request.ops.len() as u64);
            if !request.rewrites.is_empty() {
                for (group, index, _) in &request.rewrites {
                    self.durable.rewrite(*group, *index, segment);
                }
                Counters::add(&counters.rewritten_entries, request.rewrites.len() as u64);
                frees_space = true;
            } else {
                Counters::add(&counters.writes, 1);
            }
        }
        if frees_space {
            self.compaction_declined = None;
        }
        // Delete before completing, so a caller that saw its purge complete sees the space
        // freed. Rare (at most once per segment), so the added latency does not matter.
        if frees_space || self.rotated {
            self.delete_dead_segments();
        }
        removed_entries
    }

    /// Run the completions of a settled batch, in submission order.
    fn complete(batch: Vec<Request>) {
        for request in batch {
            (request.done)(Ok(()));
        }
    }

    /// After a failed write: restore the active segment to its durable length. Returns the
    /// error to give the failed requests.
    fn recover_from_failure(&mut self, cause: io::Error) -> LogError {
        let cause = Arc::new(cause);
        let Some(active) = &mut self.active else {
            return LogError::WriteFailed(cause);
        };
        // The cut drops the zero-filled stretch too; it is filled again by the next batch.
        active.zeroed = active.len;
        match self.disk.cut_back(&active.file, active.len) {
            Ok(()) => LogError::WriteFailed(cause),
            Err(cut_error) => {
                error!(error = %cut_error, "cannot cut the log back after a failed write; refusing writes until reopened");
                let _ = self.shared.broken.set(Arc::new(cut_error));
                LogError::Broken(cause)
            }
        }
    }

    /// Fail `batch` and everything queued behind it: none of it is durable, and the queued
    /// requests were validated against state that included the failed ones.
    fn fail(&mut self, mut batch: Vec<Request>, requests: &Receiver<Request>, error: LogError) {
        {
            let mut tables = self.shared.tables.write();
            // Submitters send while holding this lock, so after taking it every request
            // applied to the tables is in the queue.
            while let Ok(request) = requests.try_recv() {
                batch.push(request);
            }
            for request in batch.iter_mut().rev() {
                tables.undo(mem::take(&mut request.undo));
            }
        }
        for request in batch {
            (request.done)(Err(error.clone()));
        }
    }

    /// Seal the active segment: its last record says it is complete, so recovery can tell a
    /// truncated old segment from a finished one.
    fn seal_active(&mut self) -> io::Result<()> {
        let active = self.active.as_ref().expect("an active segment to seal");
        self.buf.clear();
        record::encode_seal(&mut self.buf, active.id);
        let written = self
            .disk
            .write_at(&active.file, &self.buf, active.len)
            .and_then(|()| self.disk.sync(&active.file));
        if let Err(error) = written {
            if let Err(cut_error) = self.disk.cut_back(&active.file, active.len) {
                let _ = self.shared.broken.set(Arc::new(cut_error));
            }
            if let Some(active) = self.active.as_mut() {
                active.zeroed = active.len;
            }
            return Err(error);
        }
        self.active = None;
        Ok(())
    }

    /// Create the next segment: header and checkpoint, fsynced, then the directory fsynced.
    fn create_segment(&mut self) -> io::Result<()> {
        let id = self.next_segment_id;
        self.buf.clear();
        record::encode_segment_header(&mut self.buf, id);
        self.durable.encode_checkpoint(&mut self.buf);
        let created = self.disk.create(id).and_then(|file| {
            self.disk.write_at(&file, &self.buf, 0)?;
            self.disk.sync(&file)?;
            self.disk.sync_dir()?;
            Ok(file)
        });
        match created {
            Ok(file) => {
                debug_assert!(self.buf.len() >= SEGMENT_HEADER_LEN);
                self.segments.push_back(id);
                self.next_segment_id += 1;
                self.rotated = true;
                self.active = Some(Active {
                    id,
                    file,
                    len: self.buf.len() as u64,
                    zeroed: self.buf.len() as u64,
                });
                Ok(())
            }
            Err(error) => {
                // A half-created newest segment is harmless (recovery drops a torn one, and a
                // complete checkpoint replays to the state it describes) but remove it anyway.
                let _ = self.disk.remove(id).and_then(|()| self.disk.sync_dir());
                Err(error)
            }
        }
    }

    /// Delete every segment older than both the active one and the oldest live entry. The
    /// active segment starts with a checkpoint, so meta and purge marks survive.
    fn delete_dead_segments(&mut self) {
        let Some(active) = &self.active else {
            return;
        };
        self.rotated = false;
        let keep_from = self
            .durable
            .oldest_live_segment()
            .map_or(active.id, |(oldest, _)| oldest.min(active.id));
        while let Some(&oldest) = self.segments.front() {
            if oldest >= keep_from {
                break;
            }
            // Oldest first, each removal made durable before the next: after a crash the
            // files left are always a consecutive run, so recovery can treat a gap as damage.
            match self.disk.remove(oldest) {
                Ok(()) => {}
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => {
                    // Retried later; an extra old segment only costs disk space.
                    warn!(segment = oldest, error = %error, "cannot delete dead log segment");
                    break;
                }
            }
            self.segments.pop_front();
            if let Err(error) = self.disk.sync_dir() {
                warn!(error = %error, "cannot sync the log directory after deleting a segment");
                break;
            }
        }
    }

    /// Compact if too many segments exist: append to `batch` a copy of the live entries of
    /// every group that keeps the oldest segment alive. The copy is taken from the memtable
    /// under its lock after moving every queued request into the batch, so it sits behind
    /// every request whose effects it includes, and describes the log exactly at its position
    /// (if the batch fails, the copy fails with it).
    fn add_compaction(&mut self, batch: &mut Vec<Request>, requests: &Receiver<Request>) {
        Counters::set(
            &self.disk.counters.segments_on_disk,
            self.segments.len() as u64,
        );
        if self.segments.len() <= self.options.compact_after_segments {
            return;
        }
        let Some(active) = &self.active else {
            return;
        };
        let Some((oldest, _)) = self.durable.oldest_live_segment() else {
            return;
        };
        if oldest >= active.id || self.compaction_declined == Some(oldest) {
            return;
        }
        let groups = self.durable.groups_in(oldest);
        let tables = self.shared.tables.write();
        let too_big = groups
            .iter()
            .any(|group| tables.entry_count(*group) > self.options.compact_max_entries);
        // A corrupt group cannot be copied; it keeps its segments until it is dropped.
        if too_big || groups.iter().any(|group| tables.is_corrupt(*group)) {
            debug!(
                segment = oldest,
                "log compaction declined: a big or corrupt group"
            );
            self.compaction_declined = Some(oldest);
            return;
        }
        queue_rewrites(tables, groups, requests, batch);
    }
}

/// Queues, behind every request already sent, a copy of the live entries of `groups`.
/// `tables` is the memtable's write lock, taken by the caller before this drains `requests`:
/// submitters send under that lock, so every request applied to the tables is in the queue by
/// then, and the copy, taken under the same lock, describes the log exactly at its position in
/// the batch. A group absent from the tables was dropped by a queued request, which frees its
/// segments anyway.
fn queue_rewrites(
    tables: RwLockWriteGuard<'_, Tables>,
    groups: impl IntoIterator<Item = u64>,
    requests: &Receiver<Request>,
    batch: &mut Vec<Request>,
) {
    while let Ok(request) = requests.try_recv() {
        batch.push(request);
    }
    let mut rewrites = Vec::new();
    for group in groups {
        let entries = tables.entries_for_rewrite(group).unwrap_or_default();
        let copies = entries.into_iter().rev();
        rewrites.extend(copies.map(|(index, payload)| (group, index, payload)));
    }
    drop(tables);
    if !rewrites.is_empty() {
        batch.push(Request {
            ops: Vec::new(),
            rewrites,
            undo: Vec::new(),
            written: None,
            done: Box::new(|_| {}),
        });
    }
}
