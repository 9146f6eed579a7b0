//! [`sync_data_all`]: make several files' data durable at once, for the state writer
//! (`state_writer.rs`), which must have every segment file a batch points into on disk before
//! it writes the batch.
//!
//! Why in parallel: one `fdatasync` costs a device round trip whatever it writes (a cache
//! flush behind the data), and a merged batch of many streams' apply calls holds one segment
//! file per stream. One after another, a batch of 32 one-message appends to 32 streams spent
//! about 12 ms in syncs on this VM's disk (≈380 µs each), which capped a publisher spread
//! over 1000 streams at ≈2,500 messages a second; issued from several threads the device
//! takes them together (≈140 µs each with 16 at once, measured with 64 files of one 1 KiB
//! append each).
//!
//! Why one commit for many files (Linux, from [`SHARED_COMMIT_FROM`] files on): even in
//! parallel, each `fdatasync` ends in a journal commit and a cache flush of its own; the
//! publisher over 1000 streams then ran at 9.5–9.7 k msgs/s, 15.5–15.7 k with one `syncfs`
//! instead, and 16.7–17.8 k with no file syncs at all (`bench/HISTORY.md`, "one commit for
//! many files"). So one `syncfs` per file system writes every dirty page, waits for it,
//! commits the metadata (a grown file's size) and flushes the device's cache once for all the
//! files. It reports write-back errors for the file system as a whole, so each file is then
//! asked for its own with `sync_file_range(SYNC_FILE_RANGE_WAIT_AFTER)`: nothing left to
//! write, it only reads the file's write-back error cursor, the one `fdatasync` reads. (Writing
//! each file's pages with `sync_file_range` before the `syncfs` instead gained nothing: 9.8–10 k
//! msgs/s.) `syncfs` also writes whatever else is dirty on that file system (the node's other
//! files; other processes' if they share it). What a sync guarantees is unchanged: each file's
//! data is on disk when its result is `Ok`.

use std::fs::File;
use std::io;
use std::sync::Arc;

/// Most syncs in flight at once. Beyond 16 the measurement above gained nothing.
const MAX_THREADS: usize = 16;

/// From this many files on, one `syncfs` per file system makes them durable together (see
/// the module docs); fewer are each `fdatasync`ed.
const SHARED_COMMIT_FROM: usize = 4;

/// Makes the data of every file of `files` durable; the results in the same order.
pub fn sync_data_all(files: &[Arc<File>]) -> Vec<io::Result<()>> {
    #[cfg(target_os = "linux")]
    if files.len() >= SHARED_COMMIT_FROM {
        return commit_together(files);
    }
    fdatasync_in_parallel(files)
}

/// A failed commit, kept to fail each file of its file system (`io::Error` is not `Clone`).
#[cfg(target_os = "linux")]
type CommitError = (io::ErrorKind, String);

/// One `syncfs` per file system, then each file's own write-back errors (module docs).
#[cfg(target_os = "linux")]
fn commit_together(files: &[Arc<File>]) -> Vec<io::Result<()>> {
    use std::os::unix::fs::MetadataExt;

    // Each file system's device and what its commit returned.
    let mut committed: Vec<(u64, Result<(), CommitError>)> = Vec::new();
    files
        .iter()
        .map(|file| {
            let device = file.metadata()?.dev();
            let at = match committed.iter().position(|(done, _)| *done == device) {
                Some(at) => at,
                None => {
                    let commit = linux::syncfs(file).map_err(|e| (e.kind(), e.to_string()));
                    committed.push((device, commit));
                    committed.len() - 1
                }
            };
            if let Err((kind, message)) = &committed[at].1 {
                return Err(io::Error::new(*kind, format!("syncfs: {message}")));
            }
            linux::write_back_error(file)
        })
        .collect()
}

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::File;
    use std::io;
    use std::os::fd::AsRawFd;

    fn check(rc: libc::c_int) -> io::Result<()> {
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Writes every dirty page of the file system holding `file`, commits it and flushes its
    /// device's cache.
    pub fn syncfs(file: &File) -> io::Result<()> {
        // SAFETY: a plain system call on a descriptor `file` keeps open for its duration.
        check(unsafe { libc::syncfs(file.as_raw_fd()) })
    }

    /// The file's write-back error since this descriptor last looked, if any: waits for pages
    /// under write-back (none after a `syncfs`) and writes nothing.
    pub fn write_back_error(file: &File) -> io::Result<()> {
        let flags = libc::SYNC_FILE_RANGE_WAIT_AFTER;
        // SAFETY: as above.
        check(unsafe { libc::sync_file_range(file.as_raw_fd(), 0, 0, flags) })
    }
}

/// `fdatasync`s every file of `files`; the results in the same order. One file is synced on
/// the calling thread; several, on up to [`MAX_THREADS`] scoped threads (the caller's among
/// them), each taking a share of the files.
fn fdatasync_in_parallel(files: &[Arc<File>]) -> Vec<io::Result<()>> {
    if files.len() <= 1 {
        return files.iter().map(|file| file.sync_data()).collect();
    }
    let share = files.len().div_ceil(MAX_THREADS.min(files.len()));
    let sync_share = |share: &[Arc<File>]| -> Vec<io::Result<()>> {
        share.iter().map(|file| file.sync_data()).collect()
    };
    let mut shares = files.chunks(share);
    let own = shares.next().unwrap_or_default();
    std::thread::scope(|scope| {
        let others: Vec<_> = shares
            .map(|share| {
                std::thread::Builder::new()
                    .name("segment-sync".into())
                    .spawn_scoped(scope, move || sync_share(share))
            })
            .collect();
        let mut results = sync_share(own);
        for (other, share) in others.into_iter().zip(files.chunks(share).skip(1)) {
            match other {
                Ok(handle) => results.extend(handle.join().unwrap_or_else(|_| {
                    (0..share.len())
                        .map(|_| Err(io::Error::other("a sync thread panicked")))
                        .collect()
                })),
                // No thread to spare: this one syncs that share too.
                Err(_) => results.extend(sync_share(share)),
            }
        }
        results
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn every_file_is_synced_and_answered_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for count in [0, 1, 2, 17, 40] {
            let files: Vec<Arc<File>> = (0..count)
                .map(|i| {
                    let mut file = File::create(dir.path().join(format!("{count}-{i}"))).unwrap();
                    file.write_all(&[i as u8; 100]).unwrap();
                    Arc::new(file)
                })
                .collect();
            let results = sync_data_all(&files);
            assert_eq!(results.len(), count);
            assert!(results.iter().all(Result::is_ok), "{count} files");
        }
    }

    #[test]
    fn a_file_that_cannot_sync_fails_alone_in_its_place() {
        let dir = tempfile::tempdir().unwrap();
        let good = |name: &str| Arc::new(File::create(dir.path().join(name)).unwrap());
        // A pipe's write end: fdatasync on it is EINVAL.
        let (_reader, writer) = std::io::pipe().unwrap();
        let pipe: File = std::os::fd::OwnedFd::from(writer).into();
        let mut files: Vec<Arc<File>> = (0..20).map(|i| good(&i.to_string())).collect();
        files.insert(7, Arc::new(pipe));
        let results = sync_data_all(&files);
        assert_eq!(results.len(), 21);
        for (i, result) in results.iter().enumerate() {
            assert_eq!(result.is_err(), i == 7, "file {i}: {result:?}");
        }
    }
}
