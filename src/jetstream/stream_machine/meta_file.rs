//! [`MetaFile`]: where a file stream's metadata chunks go out of memory (ADR 0033), a file
//! without a name in the group's files directory.
//!
//! The file is made by the first chunk sent out (most streams of a node with many small ones
//! never send any: a restart of 1000 streams spent a sixth of its CPU making and unlinking a
//! file each in ext4's inode allocation), and unlinked as soon as it is open: nothing of it
//! outlives the stream state that writes it (a delete, a reload after a snapshot install, a
//! restart or a crash each leave nothing behind, and a reload never shares a file with the
//! state it replaces). Nothing is synced: the spill is a cache the node rebuilds at every
//! start. Appends wait in memory, up to [`WRITE_AT`] bytes, until a flush or the next
//! append past that writes them together (a restore sends thousands of chunks in a row).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::jscore::stream::MetaSpill;

/// Distinguishes the spill files a process opens in one directory before unlinking them.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Appended bytes waiting in memory are written out once they reach this much.
const WRITE_AT: usize = 256 << 10;

#[derive(Debug)]
pub struct MetaFile {
    dir: PathBuf,
    /// None until the first append.
    inner: RwLock<Option<Open>>,
}

#[derive(Debug)]
struct Open {
    file: File,
    /// The bytes in the file; the spill's next, after `waiting`.
    written: u64,
    /// Appended bytes not yet written, the ones after `written`.
    waiting: Vec<u8>,
}

impl Open {
    fn size(&self) -> u64 {
        self.written + self.waiting.len() as u64
    }

    fn write_out(&mut self) -> io::Result<()> {
        if !self.waiting.is_empty() {
            self.file.write_all_at(&self.waiting, self.written)?;
            self.written += self.waiting.len() as u64;
            self.waiting.clear();
        }
        Ok(())
    }
}

impl MetaFile {
    /// A new, empty spill in `dir` (created if missing); its file comes with the first
    /// append.
    pub fn create(dir: &Path) -> io::Result<MetaFile> {
        std::fs::create_dir_all(dir)?;
        Ok(MetaFile {
            dir: dir.to_path_buf(),
            inner: RwLock::new(None),
        })
    }
}

/// A read or compaction of bytes never appended.
fn past_the_end(at: u64, len: u32, size: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("{len} bytes at {at} of a spill of {size}"),
    )
}

/// A new file in `dir` that no name points to.
fn anonymous(dir: &Path) -> io::Result<File> {
    let name = format!(
        "meta-{}-{}.spill",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let path = dir.join(name);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)?;
    Ok(file)
}

impl MetaSpill for MetaFile {
    fn append(&self, bytes: &[u8]) -> io::Result<u64> {
        let mut inner = self.inner.write();
        let open = match &mut *inner {
            Some(open) => open,
            none => none.insert(Open {
                file: anonymous(&self.dir)?,
                written: 0,
                waiting: Vec::new(),
            }),
        };
        let at = open.size();
        open.waiting.extend_from_slice(bytes);
        if open.waiting.len() >= WRITE_AT {
            open.write_out()?;
        }
        Ok(at)
    }

    fn flush(&self) -> io::Result<()> {
        if let Some(open) = &mut *self.inner.write() {
            open.write_out()?;
            // What waited is out: nothing of its size stays with a stream that sends rarely.
            open.waiting = Vec::new();
        }
        Ok(())
    }

    fn read(&self, at: u64, len: u32) -> io::Result<Vec<u8>> {
        let inner = self.inner.read();
        let Some(open) = &*inner else {
            return Err(past_the_end(at, len, 0));
        };
        let end = at + u64::from(len);
        if end > open.size() {
            return Err(past_the_end(at, len, open.size()));
        }
        let mut bytes = vec![0; len as usize];
        // The part in the file, then the part still waiting (flushes write whole appends, so
        // one of the two is empty).
        let in_file = (open.written.saturating_sub(at) as usize).min(bytes.len());
        open.file.read_exact_at(&mut bytes[..in_file], at)?;
        if in_file < bytes.len() {
            let from = (at + in_file as u64 - open.written) as usize;
            let rest = bytes.len() - in_file;
            bytes[in_file..].copy_from_slice(&open.waiting[from..from + rest]);
        }
        Ok(bytes)
    }

    fn compact(&self, live: &[(u64, u32)]) -> io::Result<Vec<u64>> {
        let mut inner = self.inner.write();
        let Some(old) = &mut *inner else {
            return match live.first() {
                None => Ok(Vec::new()),
                Some((at, len)) => Err(past_the_end(*at, *len, 0)),
            };
        };
        old.write_out()?;
        let file = anonymous(&self.dir)?;
        let mut out = io::BufWriter::new(&file);
        let mut starts = Vec::with_capacity(live.len());
        let mut end = 0u64;
        let mut bytes = Vec::new();
        for (at, len) in live {
            if at + u64::from(*len) > old.written {
                return Err(past_the_end(*at, *len, old.written));
            }
            bytes.resize(*len as usize, 0);
            old.file.read_exact_at(&mut bytes, *at)?;
            out.write_all(&bytes)?;
            starts.push(end);
            end += u64::from(*len);
        }
        out.flush()?;
        drop(out);
        *inner = Some(Open {
            file,
            written: end,
            waiting: Vec::new(),
        });
        Ok(starts)
    }

    fn clear(&self) -> io::Result<()> {
        if let Some(open) = &mut *self.inner.write() {
            open.waiting = Vec::new();
            open.file.set_len(0)?;
            open.written = 0;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_read_back_compact_and_clear_leaving_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let spill = MetaFile::create(&dir.path().join("g")).unwrap();
        assert_eq!(std::fs::read_dir(dir.path().join("g")).unwrap().count(), 0);
        // Nothing appended yet: no file, nothing to read, nothing to compact.
        assert!(spill.inner.read().is_none());
        assert!(spill.read(0, 1).is_err());
        assert_eq!(spill.compact(&[]).unwrap(), Vec::<u64>::new());
        assert!(spill.compact(&[(0, 1)]).is_err());
        spill.clear().unwrap();
        assert!(spill.inner.read().is_none(), "a clear makes no file");
        let a = spill.append(b"first").unwrap();
        let b = spill.append(b"second!").unwrap();
        let c = spill.append(b"third").unwrap();
        assert!(spill.inner.read().is_some(), "the first append made it");
        assert_eq!(spill.read(b, 7).unwrap(), b"second!");
        assert!(spill.compact(&[(c, 6)]).is_err(), "past the end");
        assert!(spill.read(c, 6).is_err(), "past the end");
        let starts = spill.compact(&[(c, 5), (a, 5)]).unwrap();
        assert_eq!(starts, vec![0, 5]);
        assert_eq!(spill.read(0, 5).unwrap(), b"third");
        assert_eq!(spill.read(5, 5).unwrap(), b"first");
        assert!(spill.read(10, 1).is_err(), "the garbage went");
        assert_eq!(spill.append(b"x").unwrap(), 10);
        spill.clear().unwrap();
        assert!(spill.read(0, 1).is_err());
        assert_eq!(spill.append(b"y").unwrap(), 0);
        assert_eq!(std::fs::read_dir(dir.path().join("g")).unwrap().count(), 0);
    }

    #[test]
    fn appends_wait_in_memory_until_a_flush_or_enough_of_them() {
        let dir = tempfile::tempdir().unwrap();
        let spill = MetaFile::create(dir.path()).unwrap();
        let on_disk = |spill: &MetaFile| {
            let inner = spill.inner.read();
            let open = inner.as_ref().unwrap();
            (
                open.written,
                open.file.metadata().unwrap().len(),
                open.waiting.len(),
            )
        };
        let a = spill.append(b"alpha").unwrap();
        let b = spill.append(b"beta").unwrap();
        assert_eq!(on_disk(&spill), (0, 0, 9), "both wait");
        assert_eq!(spill.read(b, 4).unwrap(), b"beta", "read from memory");
        spill.flush().unwrap();
        assert_eq!(on_disk(&spill), (9, 9, 0));
        assert_eq!(spill.inner.read().as_ref().unwrap().waiting.capacity(), 0);
        let c = spill.append(b"gamma").unwrap();
        assert_eq!(c, 9);
        // A read across what is written and what waits.
        assert_eq!(spill.read(b, 9).unwrap(), b"betagamma");
        assert_eq!(spill.read(a, 5).unwrap(), b"alpha");
        assert!(spill.read(c, 6).is_err(), "past the end");
        // Enough waiting goes out by itself.
        let big = vec![7u8; WRITE_AT];
        let d = spill.append(&big).unwrap();
        assert_eq!(on_disk(&spill).2, 0);
        assert_eq!(spill.read(d, 3).unwrap(), [7, 7, 7]);
        // A compaction keeps what waited too; a clear drops it.
        let e = spill.append(b"delta").unwrap();
        let starts = spill.compact(&[(e, 5), (c, 5)]).unwrap();
        assert_eq!(starts, vec![0, 5]);
        assert_eq!(spill.read(0, 10).unwrap(), b"deltagamma");
        spill.append(b"epsilon").unwrap();
        spill.clear().unwrap();
        assert_eq!(on_disk(&spill), (0, 0, 0));
        assert_eq!(spill.append(b"z").unwrap(), 0);
    }
}
