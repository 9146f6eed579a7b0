//! Segment files: naming, listing, and the few file operations the writer performs on them
//! (positioned write, fdatasync, cut back, directory fsync), each passing through the test
//! fault injector and counted in the stats.
//!
//! A segment is named `<id as 16 hex digits>.wal`; ids are consecutive, the highest is the
//! active one. Files with other names in the directory are ignored.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::fault::FaultInjector;
use super::types::LogStats;

const SUFFIX: &str = ".wal";

pub(crate) fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}{SUFFIX}"))
}

fn parse_segment_name(name: &str) -> Option<u64> {
    let hex = name.strip_suffix(SUFFIX)?;
    if hex.len() != 16 || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// Ids of the segment files in `dir`, ascending.
pub(crate) fn list_segments(dir: &Path) -> io::Result<Vec<u64>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(id) = entry.file_name().to_str().and_then(parse_segment_name) {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// Counters behind [`LogStats`]; one per engine, shared by the writer and `stats()`.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub writes: AtomicU64,
    pub appends: AtomicU64,
    pub ops: AtomicU64,
    pub bytes: AtomicU64,
    pub batches: AtomicU64,
    pub fsyncs: AtomicU64,
    pub segments_created: AtomicU64,
    pub segments_deleted: AtomicU64,
    pub failed_batches: AtomicU64,
    pub rewritten_entries: AtomicU64,
    pub segments_on_disk: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, amount: u64) {
        counter.fetch_add(amount, Ordering::Relaxed);
    }

    pub fn set(counter: &AtomicU64, value: u64) {
        counter.store(value, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> LogStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        LogStats {
            writes: get(&self.writes),
            appends: get(&self.appends),
            ops: get(&self.ops),
            bytes: get(&self.bytes),
            batches: get(&self.batches),
            fsyncs: get(&self.fsyncs),
            segments_created: get(&self.segments_created),
            segments_deleted: get(&self.segments_deleted),
            failed_batches: get(&self.failed_batches),
            rewritten_entries: get(&self.rewritten_entries),
            segments_on_disk: get(&self.segments_on_disk),
        }
    }
}

/// The file operations of the writer, with fault injection and counting.
#[derive(Debug)]
pub(crate) struct Disk {
    pub dir: PathBuf,
    pub fault: Option<Arc<FaultInjector>>,
    /// `LogOptions::fsync`: when false, `sync` and `sync_dir` do nothing.
    pub fsync: bool,
    pub counters: Arc<Counters>,
}

impl Disk {
    /// Write all of `buf` at `offset` (pwrite: no file position to get out of step).
    pub fn write_at(&self, file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
        if let Some(written) = self
            .fault
            .as_ref()
            .and_then(|fault| fault.on_write(buf.len()))
        {
            file.write_all_at(&buf[..written], offset)?;
            Counters::add(&self.counters.bytes, written as u64);
            return Err(FaultInjector::disk_full());
        }
        file.write_all_at(buf, offset)?;
        Counters::add(&self.counters.bytes, buf.len() as u64);
        Ok(())
    }

    /// Zero-fill `from..to` of `file` (preallocation ahead of the writes; see
    /// `LogOptions::preallocate`). Not counted in the written bytes, and not subject to the
    /// injected write faults, which model the data writes.
    pub fn write_zeros(&self, file: &File, from: u64, to: u64) -> io::Result<()> {
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let mut offset = from;
        while offset < to {
            let len = (to - offset).min(ZEROS.len() as u64) as usize;
            file.write_all_at(&ZEROS[..len], offset)?;
            offset += len as u64;
        }
        Ok(())
    }

    /// fdatasync: data and the metadata needed to read it (the file size) reach the disk.
    pub fn sync(&self, file: &File) -> io::Result<()> {
        if let Some(fault) = &self.fault {
            fault.on_sync()?;
        }
        if !self.fsync {
            return Ok(());
        }
        file.sync_data()?;
        Counters::add(&self.counters.fsyncs, 1);
        Ok(())
    }

    /// Cut `file` back to `len` and make the cut durable.
    pub fn cut_back(&self, file: &File, len: u64) -> io::Result<()> {
        if let Some(fault) = &self.fault {
            fault.on_truncate()?;
        }
        file.set_len(len)?;
        self.sync(file)
    }

    /// fsync the directory, so created and removed segment files survive a crash.
    pub fn sync_dir(&self) -> io::Result<()> {
        if !self.fsync {
            return Ok(());
        }
        sync_dir(&self.dir)?;
        Counters::add(&self.counters.fsyncs, 1);
        Ok(())
    }

    /// Create (or replace a leftover of) segment `id`, opened for writing.
    pub fn create(&self, id: u64) -> io::Result<File> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(segment_path(&self.dir, id))?;
        Counters::add(&self.counters.segments_created, 1);
        Ok(file)
    }

    pub fn open_for_write(&self, id: u64) -> io::Result<File> {
        OpenOptions::new()
            .write(true)
            .open(segment_path(&self.dir, id))
    }

    /// The length of segment file `id`.
    pub fn len(&self, id: u64) -> io::Result<u64> {
        Ok(fs::metadata(segment_path(&self.dir, id))?.len())
    }

    pub fn remove(&self, id: u64) -> io::Result<()> {
        fs::remove_file(segment_path(&self.dir, id))?;
        Counters::add(&self.counters.segments_deleted, 1);
        Ok(())
    }
}

pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_strangers_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        for id in [3u64, 1, 0xabc] {
            File::create(segment_path(dir.path(), id)).unwrap();
        }
        File::create(dir.path().join("notes.txt")).unwrap();
        File::create(dir.path().join("12.wal")).unwrap();
        assert_eq!(list_segments(dir.path()).unwrap(), vec![1, 3, 0xabc]);
        assert_eq!(parse_segment_name("000000000000000g.wal"), None);
    }
}
