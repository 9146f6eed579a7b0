//! [`SnapshotDir`]: the snapshot directory of one group (the files' format is `snapshot.rs`).
//!
//! `<index:020>-<seq:020>.snap` are committed snapshots (the greatest name is current; older ones
//! are deleted once a newer one is committed), `*.tmp` are being built or received and are
//! deleted on open.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::snapshot::read_meta;
use super::state_db;
use super::types::SnapshotMeta;

/// The snapshot directory of one group: at most one committed snapshot (the current one) plus
/// temporaries. Owned by the group's state machine.
#[derive(Debug)]
pub(crate) struct SnapshotDir {
    dir: PathBuf,
    current: Option<(SnapshotMeta, PathBuf)>,
    next_tmp: AtomicU64,
}

impl SnapshotDir {
    /// Open (create) `dir`, delete leftovers of interrupted builds and receives, and find the
    /// current snapshot. Blocking.
    pub fn open(dir: PathBuf) -> io::Result<SnapshotDir> {
        fs::create_dir_all(&dir)?;
        let mut committed = Vec::new();
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("tmp") => fs::remove_file(&path)?,
                Some("snap") => committed.push(path),
                _ => {}
            }
        }
        committed.sort();
        let mut current = None;
        // Newest first; a file whose header does not read is skipped (it would have been
        // renamed into place only after its fsync, so this is damage, not a crash artefact).
        while let Some(path) = committed.pop() {
            match read_meta(&path) {
                Ok(meta) => {
                    current = Some((meta, path));
                    break;
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "unreadable snapshot file skipped")
                }
            }
        }
        Ok(SnapshotDir {
            dir,
            current,
            next_tmp: AtomicU64::new(0),
        })
    }

    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current (newest committed) snapshot.
    pub fn current(&self) -> Option<&(SnapshotMeta, PathBuf)> {
        self.current.as_ref()
    }

    /// A fresh path for a file being built or received.
    pub fn temp_path(&self, kind: &str) -> PathBuf {
        let n = self.next_tmp.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{kind}-{n}-{}.tmp", unique_suffix()))
    }

    /// True if `path` is a temporary file of this directory (a received snapshot that can be
    /// renamed into place).
    pub fn owns_temp(&self, path: &Path) -> bool {
        path.parent() == Some(self.dir.as_path())
            && path.extension().and_then(|e| e.to_str()) == Some("tmp")
    }

    /// Make the fsynced temporary file `temp` with `meta` the current snapshot: rename it into
    /// place, fsync the directory, delete older snapshots. Blocking.
    ///
    /// If a newer snapshot was committed meanwhile (an install raced a build), `temp` is deleted
    /// and the newer one stays current. Returns the current snapshot.
    pub fn commit(
        &mut self,
        temp: &Path,
        meta: SnapshotMeta,
    ) -> io::Result<(SnapshotMeta, PathBuf)> {
        if let Some((current, path)) = &self.current {
            if current.last_log_id > meta.last_log_id {
                fs::remove_file(temp)?;
                return Ok((current.clone(), path.clone()));
            }
        }
        let index = meta.last_log_id.map(|id| id.index + 1).unwrap_or(0);
        let path = self
            .dir
            .join(format!("{index:020}-{:020}.snap", unique_suffix()));
        fs::rename(temp, &path)?;
        state_db::sync_dir(&self.dir)?;
        if let Some((_, old)) = self.current.replace((meta.clone(), path.clone())) {
            if old != path {
                fs::remove_file(&old)?;
            }
        }
        Ok((meta, path))
    }

    /// Delete the current snapshot file if it is older than `meta`, an in-place snapshot
    /// that supersedes it (`state_machine/snapshots.rs`). Blocking.
    pub fn discard_older_than(&mut self, meta: &SnapshotMeta) -> io::Result<()> {
        if self
            .current
            .as_ref()
            .is_some_and(|(current, _)| current.last_log_id < meta.last_log_id)
        {
            if let Some((_, path)) = self.current.take() {
                fs::remove_file(&path)?;
                state_db::sync_dir(&self.dir)?;
            }
        }
        Ok(())
    }

    /// Delete the directory and everything in it (the group is being dropped). Blocking.
    pub fn remove_all(dir: &Path) -> io::Result<()> {
        match fs::remove_dir_all(dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// Monotonic-enough suffix so names sort by creation: nanoseconds since the epoch.
fn unique_suffix() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consensus::snapshot::{test_meta as meta, write_dump};

    #[test]
    fn directory_keeps_only_the_newest_committed_snapshot() {
        let root = tempfile::tempdir().unwrap();
        let db = sled::Config::new().temporary(true).open().unwrap();
        let tree = db.open_tree("t").unwrap();
        let mut snaps = SnapshotDir::open(root.path().join("g")).unwrap();
        assert!(snaps.current().is_none());
        for index in [3, 8] {
            let temp = snaps.temp_path("build");
            write_dump(&tree, 1, &meta(index), &temp).unwrap();
            snaps.commit(&temp, meta(index)).unwrap();
        }
        let leftover = snaps.temp_path("receive");
        fs::write(&leftover, b"partial").unwrap();
        let snaps = SnapshotDir::open(root.path().join("g")).unwrap();
        assert_eq!(snaps.current().unwrap().0, meta(8));
        let files: Vec<_> = fs::read_dir(snaps.dir()).unwrap().collect();
        assert_eq!(files.len(), 1, "old snapshot and temp file are gone");
    }
}
