//! Replacing a group's sled keys by a snapshot file's, crash-safely (an install from the
//! leader, or sled found behind the current snapshot file at open), and clearing them.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use super::machine::ImportFn;
use super::raft_codec;
use super::snapshot;
use super::state_db::{self, KEY_APPLIED, KEY_INSTALLING, KEY_MEMBERSHIP, SPACE_RAFT};
use super::types::{GroupId, SnapshotMeta};

/// Writes per sled batch when clearing or restoring a group's keys.
const RESTORE_BATCH: usize = 10_000;

/// Run blocking I/O off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(io::Error::other)?
}

/// Delete all keys of `group`, in batches, except those in the raft space named in `keep`.
/// Blocking.
pub(crate) fn clear_group(tree: &sled::Tree, group: GroupId, keep: &[&[u8]]) -> io::Result<()> {
    let keep: Vec<Vec<u8>> = keep
        .iter()
        .map(|name| state_db::key(group, SPACE_RAFT, name))
        .collect();
    loop {
        let mut batch = sled::Batch::default();
        let mut n = 0;
        for item in tree.scan_prefix(state_db::group_prefix(group)) {
            let (key, _) = item.map_err(io::Error::other)?;
            if keep.iter().any(|k| k.as_slice() == key.as_ref()) {
                continue;
            }
            batch.remove(key);
            n += 1;
            if n == RESTORE_BATCH {
                break;
            }
        }
        if n == 0 {
            return Ok(());
        }
        tree.apply_batch(batch).map_err(io::Error::other)?;
    }
}

/// Replace all keys of `group` by the contents of the snapshot file at `path`, crash-safely:
/// verify the file, set the `installing` marker (and drop the applied id) in one batch, clear,
/// write the records, then write applied + membership and remove the marker in one batch. A
/// crash anywhere before the last batch leaves the marker, and the next open restores again.
///
/// Each record goes through `import` (the machine's `stored_value_import`): the files it
/// wrote are synced before the batch holding the values that point into them.
pub(crate) async fn restore(
    tree: sled::Tree,
    group: GroupId,
    path: PathBuf,
    mut import: Box<ImportFn>,
) -> io::Result<SnapshotMeta> {
    blocking(move || {
        let meta = snapshot::verify(&path)?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut mark = sled::Batch::default();
        mark.insert(
            state_db::key(group, SPACE_RAFT, KEY_INSTALLING),
            name.as_bytes(),
        );
        mark.remove(state_db::key(group, SPACE_RAFT, KEY_APPLIED));
        tree.apply_batch(mark).map_err(io::Error::other)?;
        clear_group(&tree, group, &[KEY_INSTALLING])?;
        let mut batch = sled::Batch::default();
        let mut n = 0;
        let mut unsynced: Vec<Arc<File>> = Vec::new();
        snapshot::read_records(&path, |key, value| {
            let imported = import(&key, value).map_err(io::Error::other)?;
            if let Some(file) = imported.sync_first {
                if !unsynced.iter().any(|known| Arc::ptr_eq(known, &file)) {
                    unsynced.push(file);
                }
            }
            batch.insert(
                state_db::key(group, state_db::SPACE_DATA, &key),
                imported.value,
            );
            n += 1;
            if n == RESTORE_BATCH {
                sync_all(&mut unsynced)?;
                tree.apply_batch(std::mem::take(&mut batch))
                    .map_err(io::Error::other)?;
                n = 0;
            }
            Ok(())
        })?;
        sync_all(&mut unsynced)?;
        batch.insert(
            state_db::key(group, SPACE_RAFT, KEY_APPLIED),
            raft_codec::encode(&meta.last_log_id).as_ref(),
        );
        batch.insert(
            state_db::key(group, SPACE_RAFT, KEY_MEMBERSHIP),
            raft_codec::encode(&meta.last_membership).as_ref(),
        );
        batch.remove(state_db::key(group, SPACE_RAFT, KEY_INSTALLING));
        tree.apply_batch(batch).map_err(io::Error::other)?;
        Ok(meta)
    })
    .await
}

/// `fdatasync`s the files imported values point into, before the batch holding them.
fn sync_all(files: &mut Vec<Arc<File>>) -> io::Result<()> {
    for file in files.drain(..) {
        file.sync_data()?;
    }
    Ok(())
}
