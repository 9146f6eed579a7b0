//! Fault injection for tests: make the next segment write fail part-way (disk full) or the
//! next fsync fail (I/O error), so tests can check that nothing acknowledged is lost, nothing
//! failed is half-visible after recovery, and the engine keeps working afterwards.
//!
//! Passed in [`LogOptions::fault`](super::LogOptions); checked by the writer thread on every
//! file write and sync. Cheap when nothing is armed (two atomic loads).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const DISARMED: u64 = u64::MAX;

/// Armed faults, each firing once. One per engine under test.
#[derive(Debug)]
pub struct FaultInjector {
    /// Bytes the next segment write may write before it fails with ENOSPC; `DISARMED` if none.
    next_write_fails_after: AtomicU64,
    next_sync_fails: AtomicBool,
    next_truncate_fails: AtomicBool,
    /// Number of faults that fired.
    fired: AtomicU64,
}

impl Default for FaultInjector {
    fn default() -> Self {
        FaultInjector {
            next_write_fails_after: AtomicU64::new(DISARMED),
            next_sync_fails: AtomicBool::new(false),
            next_truncate_fails: AtomicBool::new(false),
            fired: AtomicU64::new(0),
        }
    }
}

impl FaultInjector {
    pub fn new() -> Self {
        Self::default()
    }

    /// The next segment write writes `bytes` bytes (capped at its length) and then fails with
    /// "no space left on device", like a disk filling up mid-batch.
    pub fn fail_next_write_after(&self, bytes: u64) {
        self.next_write_fails_after.store(bytes, Ordering::SeqCst);
    }

    /// The next fdatasync/fsync fails with an I/O error.
    pub fn fail_next_sync(&self) {
        self.next_sync_fails.store(true, Ordering::SeqCst);
    }

    /// The next cut-back of a failed batch fails too, leaving the engine broken.
    pub fn fail_next_truncate(&self) {
        self.next_truncate_fails.store(true, Ordering::SeqCst);
    }

    /// How many armed faults have fired.
    pub fn fired(&self) -> u64 {
        self.fired.load(Ordering::SeqCst)
    }

    /// `Ok(None)`: write normally. `Ok(Some(n))`: write the first `n` bytes, then fail.
    pub(crate) fn on_write(&self, len: usize) -> Option<usize> {
        let limit = self.next_write_fails_after.swap(DISARMED, Ordering::SeqCst);
        if limit == DISARMED {
            return None;
        }
        self.fired.fetch_add(1, Ordering::SeqCst);
        Some((limit.min(len as u64)) as usize)
    }

    pub(crate) fn on_sync(&self) -> io::Result<()> {
        if self.next_sync_fails.swap(false, Ordering::SeqCst) {
            self.fired.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::other("injected fsync failure"));
        }
        Ok(())
    }

    pub(crate) fn on_truncate(&self) -> io::Result<()> {
        if self.next_truncate_fails.swap(false, Ordering::SeqCst) {
            self.fired.fetch_add(1, Ordering::SeqCst);
            return Err(io::Error::other("injected truncate failure"));
        }
        Ok(())
    }

    pub(crate) fn disk_full() -> io::Error {
        io::Error::from_raw_os_error(28)
    }
}
