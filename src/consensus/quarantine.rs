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
//! group; the group's own records are then dropped from the live log), the group's keys in
//! sled as far as they still read (`state-<group>.bin`: u32 key length, key, u32 value
//! length, value, all little endian), and the reason.

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

/// Quarantines one group: [`quarantine_group_log`], then the group's sled keys (every space)
/// written to `state-<group>.bin` until the first key that does not read (a damaged page may
/// fail or panic; what was read is kept and the failure noted in `REASON`). The caller then
/// drops the group from the live store.
pub fn quarantine_group(
    data_dir: &Path,
    reason: &str,
    state: &super::state_db::StateDb,
    group: super::types::GroupId,
) -> io::Result<PathBuf> {
    use std::io::Write;
    let dir = quarantine_group_log(data_dir, reason)?;
    let mut out = io::BufWriter::new(std::fs::File::create(
        dir.join(format!("state-{group}.bin")),
    )?);
    let prefix = super::state_db::group_prefix(group);
    let mut keys = state.tree().scan_prefix(prefix);
    let unreadable = loop {
        match super::machine::catching(|| keys.next()) {
            Ok(None) => break None,
            Ok(Some(Ok((key, value)))) => {
                for part in [&key[..], &value[..]] {
                    out.write_all(&(part.len() as u32).to_le_bytes())?;
                    out.write_all(part)?;
                }
            }
            Ok(Some(Err(error))) => break Some(error.to_string()),
            Err(error) => break Some(error.to_string()),
        }
    };
    out.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()?;
    if let Some(error) = unreadable {
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(dir.join("REASON"))?;
        writeln!(file, "the group's keys in sled stopped reading at: {error}")?;
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

    #[test]
    fn a_groups_keys_are_copied_aside_and_no_other() {
        use crate::consensus::state_db::{key, StateDb, SPACE_DATA};
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path().join("state")).unwrap();
        db.tree()
            .insert(key(5, SPACE_DATA, b"b/1"), &b"block"[..])
            .unwrap();
        db.tree()
            .insert(key(6, SPACE_DATA, b"b/1"), &b"other"[..])
            .unwrap();
        let moved = quarantine_group(dir.path(), "block 1: checksum", &db, 5).unwrap();
        let dump = std::fs::read(moved.join("state-5.bin")).unwrap();
        let mut expected = Vec::new();
        for part in [&key(5, SPACE_DATA, b"b/1")[..], b"block"] {
            expected.extend_from_slice(&(part.len() as u32).to_le_bytes());
            expected.extend_from_slice(part);
        }
        assert_eq!(dump, expected);
        // The live keys stay: the caller drops the group.
        assert!(db.tree().get(key(5, SPACE_DATA, b"b/1")).unwrap().is_some());
    }
}
