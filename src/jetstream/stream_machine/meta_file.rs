//! [`MetaFile`]: where a file stream's metadata chunks go out of memory (ADR 0033), a file
//! without a name in the group's files directory.
//!
//! The file is made by the first chunk sent out (most streams of a node with many small ones
//! never send any: a restart of 1000 streams spent a sixth of its CPU making and unlinking a
//! file each in ext4's inode allocation), and unlinked as soon as it is open: nothing of it
//! outlives the stream state that writes it (a delete, a reload after a snapshot install, a
//! restart or a crash each leave nothing behind, and a reload never shares a file with the
//! state it replaces). Nothing is synced: the spill is a cache the node rebuilds at every
//! start.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use crate::jscore::stream::MetaSpill;

/// Distinguishes the spill files a process opens in one directory before unlinking them.
static NEXT: AtomicU64 = AtomicU64::new(0);

#[derive(Debug)]
pub struct MetaFile {
    dir: PathBuf,
    /// The file and its length (where the next chunk goes); none until the first append.
    inner: RwLock<Option<(File, u64)>>,
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
        let (file, size) = match &mut *inner {
            Some(open) => open,
            none => none.insert((anonymous(&self.dir)?, 0)),
        };
        let at = *size;
        file.write_all_at(bytes, at)?;
        *size += bytes.len() as u64;
        Ok(at)
    }

    fn read(&self, at: u64, len: u32) -> io::Result<Vec<u8>> {
        let inner = self.inner.read();
        let Some((file, size)) = &*inner else {
            return Err(past_the_end(at, len, 0));
        };
        if at + u64::from(len) > *size {
            return Err(past_the_end(at, len, *size));
        }
        let mut bytes = vec![0; len as usize];
        file.read_exact_at(&mut bytes, at)?;
        Ok(bytes)
    }

    fn compact(&self, live: &[(u64, u32)]) -> io::Result<Vec<u64>> {
        let mut inner = self.inner.write();
        let Some((old, size)) = &*inner else {
            return match live.first() {
                None => Ok(Vec::new()),
                Some((at, len)) => Err(past_the_end(*at, *len, 0)),
            };
        };
        let file = anonymous(&self.dir)?;
        let mut out = io::BufWriter::new(&file);
        let mut starts = Vec::with_capacity(live.len());
        let mut end = 0u64;
        let mut bytes = Vec::new();
        for (at, len) in live {
            if at + u64::from(*len) > *size {
                return Err(past_the_end(*at, *len, *size));
            }
            bytes.resize(*len as usize, 0);
            old.read_exact_at(&mut bytes, *at)?;
            out.write_all(&bytes)?;
            starts.push(end);
            end += u64::from(*len);
        }
        out.flush()?;
        drop(out);
        *inner = Some((file, end));
        Ok(starts)
    }

    fn clear(&self) -> io::Result<()> {
        if let Some((file, size)) = &mut *self.inner.write() {
            file.set_len(0)?;
            *size = 0;
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
}
