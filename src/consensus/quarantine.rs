//! Quarantine: damaged state is moved aside, never deleted, so it can be examined; the node
//! then starts over with an empty store and is rebuilt from its peers (ADR 0015).
//!
//! ```text
//! <data dir>/quarantine/<unix seconds>-<nanos>/log/        the write-ahead log as it was
//! <data dir>/quarantine/<unix seconds>-<nanos>/state/      the sled database as it was
//! <data dir>/quarantine/<unix seconds>-<nanos>/snapshots/
//! <data dir>/quarantine/<unix seconds>-<nanos>/REASON      why
//! ```
//!
//! A single group's damage is quarantined as a copy of the log segments (they hold every
//! group; the group's own records are then dropped from the live log) and the reason.

use std::io;
use std::path::{Path, PathBuf};

/// The directory names of a node's store that a whole-store quarantine moves.
const STORE_PARTS: [&str; 3] = ["log", "state", "snapshots"];

/// A fresh quarantine directory under `data_dir`, with `reason` written in it.
fn new_dir(data_dir: &Path, reason: &str) -> io::Result<PathBuf> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let dir =
        data_dir
            .join("quarantine")
            .join(format!("{}-{:09}", now.as_secs(), now.subsec_nanos()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("REASON"), format!("{reason}\n"))?;
    Ok(dir)
}

/// Moves the node's whole store (log, sled, snapshots) under a new quarantine directory and
/// returns it. The caller has made the groups amnesiac first.
pub fn quarantine_store(data_dir: &Path, reason: &str) -> io::Result<PathBuf> {
    let dir = new_dir(data_dir, reason)?;
    for part in STORE_PARTS {
        let from = data_dir.join(part);
        if from.exists() {
            std::fs::rename(&from, dir.join(part))?;
        }
    }
    super::state_db::sync_dir(&dir)?;
    super::state_db::sync_dir(data_dir)?;
    Ok(dir)
}

/// Copies the node's log segments (the damaged group's records among them) under a new
/// quarantine directory and returns it; the caller then drops the group from the live store.
pub fn quarantine_group_log(data_dir: &Path, reason: &str) -> io::Result<PathBuf> {
    let dir = new_dir(data_dir, reason)?;
    let log = data_dir.join("log");
    let copy = dir.join("log");
    std::fs::create_dir_all(&copy)?;
    if let Ok(entries) = std::fs::read_dir(&log) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                std::fs::copy(entry.path(), copy.join(entry.file_name()))?;
            }
        }
    }
    super::state_db::sync_dir(&dir)?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_moves_aside_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        for part in STORE_PARTS {
            std::fs::create_dir_all(dir.path().join(part)).unwrap();
            std::fs::write(dir.path().join(part).join("f"), part).unwrap();
        }
        let moved = quarantine_store(dir.path(), "sled: bad crc").unwrap();
        for part in STORE_PARTS {
            assert!(!dir.path().join(part).exists());
            assert_eq!(
                std::fs::read(moved.join(part).join("f")).unwrap(),
                part.as_bytes()
            );
        }
        let reason = std::fs::read_to_string(moved.join("REASON")).unwrap();
        assert!(reason.contains("bad crc"));
    }
}
