//! [`StateDb`]: the node's sled database that holds the state machines of all its Raft groups
//! (one per node, shared by every group), the key layout of a group in it, and the *real* sync
//! that sled 0.34 does not offer.
//!
//! ## Key layout
//!
//! All groups live in one sled tree, `raft-groups` (sled 0.34 takes one process-wide lock per
//! batch whatever the tree, so per-group trees would buy no concurrency, and many trees are
//! known to bloat sled's files). A key is `group id (u64, big endian) ++ space (u8) ++ rest`:
//!
//! | space | rest | value |
//! |---|---|---|
//! | `0x00` raft | `applied` | last applied log id ([`raft_codec`](super::raft_codec)) |
//! | `0x00` raft | `membership` | last applied membership |
//! | `0x00` raft | `installing` | name of the snapshot file being installed (crash marker) |
//! | `0x00` raft | `snapshot` | metadata of the newest in-place snapshot (`state_machine/`) |
//! | `0x01` data | anything | the group's [`GroupMachine`](super::GroupMachine) keys |
//!
//! A group's keys are contiguous, so its state can be dumped, replaced or dropped as a range,
//! and every `apply` writes the machine's keys and the applied log id in one atomic batch.
//!
//! ## Durability: what gives a real sync in sled 0.34
//!
//! Read from sled 0.34.7's code: `Db::flush()` writes the dirty IO buffers to the `db` file with
//! `pwrite` and then calls `sync_file_range(WAIT_BEFORE | WRITE | WAIT_AFTER)` on the written
//! range (`pagecache/iobuf.rs`). That starts and waits for write-back of those pages but syncs
//! no metadata (file size, extents) and does not flush the device's write cache: it is not a
//! durability guarantee. Only sled's background flusher calls `File::sync_all()` on the `db`
//! file (every `flush_every_ms`, default 500 ms), and large values stored as separate files
//! under `blobs/` are never fsynced at all (`pagecache/blob_io.rs`).
//!
//! [`StateDb::sync`] therefore does what sled does not: `flush()` (so everything written so far
//! is in the `db` file), then `fsync` of the `db` file, of every file in `blobs/`, and of the
//! `blobs/` and database directories. An fsync through our own descriptor syncs the same inode
//! sled writes to, so after it returns every write made before the `flush()` is on stable
//! storage. This is what the background flusher does too, plus the blobs.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;

use super::damage::Damage;
use super::state_writer::StateWriter;
use super::sync_gate::SyncGate;
use super::types::GroupId;

/// Name of the sled tree holding every group's state.
const GROUPS_TREE: &str = "raft-groups";

/// sled's page cache (its default is 1 GiB). Everything hot is elsewhere: the groups' working
/// state is in memory and message bodies are read through the node's own block cache
/// (`jetstream::stream_machine::cache`), so sled's cache only held second copies of the blocks
/// it was given and of those a restart scanned (heaptrack: 42 MB of `Batch::insert` copies at
/// 300 k × 128 B; issue 16). What it still serves: a block's locator (`b/` key) when the block
/// is read from disk, the leaves a write lands in, and a restart's reads. 4 MiB (stop 49) took
/// ~14 MB off the peak of a 10 GB publish over 1000 streams on one node, but the first `kill
/// -9` restart after a publish of one 10 GiB R3 stream served after 1.30 and 1.40 s against
/// 0.94 s with 16 MiB (`bench/HISTORY.md`, stop 49).
const SLED_CACHE_BYTES: u64 = 16 << 20;

/// sled's I/O buffer ("segment") size for a new database (its default is 512 KiB). sled drops
/// a written buffer through epoch-based reclamation, and each of its threads keeps up to 64
/// such drops pending before they run, so the node holds several dozen spent buffers at any
/// time: heaptrack put 103 MB of them at the end of a 10 GiB publish, 57 MB at 4 GiB.
/// Smaller buffers hold proportionally less; every value sled keeps (locators, consumer and
/// stream records) is far below this size.
const SLED_SEGMENT_BYTES: usize = 128 << 10;
/// The size sled databases were created with before [`SLED_SEGMENT_BYTES`]: sled refuses to
/// open a database with any other, so an older one keeps it.
const SLED_LEGACY_SEGMENT_BYTES: usize = 512 << 10;

/// Key spaces inside a group's key range.
pub(crate) const SPACE_RAFT: u8 = 0x00;
pub(crate) const SPACE_DATA: u8 = 0x01;

/// Keys in the raft space.
pub(crate) const KEY_APPLIED: &[u8] = b"applied";
pub(crate) const KEY_MEMBERSHIP: &[u8] = b"membership";
pub(crate) const KEY_INSTALLING: &[u8] = b"installing";
pub(crate) const KEY_SNAPSHOT: &[u8] = b"snapshot";

/// Length of `group id ++ space`.
pub(crate) const PREFIX_LEN: usize = 9;

/// The node's sled database. Cheap to clone (sled handles are reference counted); one per node.
#[derive(Clone)]
pub struct StateDb {
    db: sled::Db,
    groups: sled::Tree,
    path: Arc<PathBuf>,
    syncs: Arc<AtomicU64>,
    gate: Arc<SyncGate>,
    /// The state machines' batches, written behind their apply (see `state_writer.rs`).
    writer: Arc<StateWriter>,
    /// Groups whose state was found damaged while running (`damage.rs`).
    damage: Arc<Damage>,
    /// Counts this handle until it has let go of sled (the last field, so it is dropped after
    /// the sled handles and the writer): see [`Closing`].
    open: TaskTrackerToken,
}

impl std::fmt::Debug for StateDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateDb").field("path", &self.path).finish()
    }
}

impl StateDb {
    /// Open (or create) the database in `dir`.
    pub fn open(dir: impl AsRef<Path>) -> Result<StateDb, sled::Error> {
        let path = dir.as_ref().to_path_buf();
        // HighThroughput: the state machine writes a key per message; measured ~10 % cheaper
        // per insert than the default space-saving mode (stream_machine apply_cost bench).
        let open = |segment_size| {
            sled::Config::new()
                .path(&path)
                .mode(sled::Mode::HighThroughput)
                .cache_capacity(SLED_CACHE_BYTES)
                .segment_size(segment_size)
                .open()
        };
        let db = match open(SLED_SEGMENT_BYTES) {
            // A database created with sled's default buffer size.
            Err(sled::Error::Unsupported(_)) => open(SLED_LEGACY_SEGMENT_BYTES)?,
            opened => opened?,
        };
        let groups = db.open_tree(GROUPS_TREE)?;
        let writer = StateWriter::start(groups.clone())?;
        let handles = TaskTracker::new();
        handles.close();
        Ok(StateDb {
            db,
            groups,
            path: Arc::new(path),
            syncs: Arc::new(AtomicU64::new(0)),
            gate: Arc::default(),
            writer: Arc::new(writer),
            damage: Arc::new(Damage::default()),
            open: handles.token(),
        })
    }

    /// What waits until this database is closed (see [`Closing`]); holds no handle on it.
    pub fn closing(&self) -> Closing {
        Closing {
            handles: self.open.task_tracker().clone(),
            db_file: self.path.join("db"),
        }
    }

    /// The groups whose state was found damaged since open.
    pub fn damage(&self) -> &Arc<Damage> {
        &self.damage
    }

    /// The tree holding every group's keys. Reads of a group's keys see its applied state
    /// only after [`StateWriter::flush`] (see `state_writer.rs`).
    pub(crate) fn tree(&self) -> &sled::Tree {
        &self.groups
    }

    /// The write-behind queue of the state machines' batches.
    pub(crate) fn writer(&self) -> &StateWriter {
        &self.writer
    }

    /// Directory of the database.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many times [`StateDb::sync`] completed since open.
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Make every write done (or queued to the writer) before this call durable: the writer's
    /// queue, then sled `flush()` plus a real fsync of
    /// sled's files (see the module docs for why `flush()` alone is not enough). Blocking; call
    /// from `spawn_blocking`.
    ///
    /// Then it removes the files written batches no longer point into (`FileEffects`): only
    /// now is sled's forgetting them durable, so a crash cannot leave a key pointing into a
    /// removed file.
    ///
    /// Calls at the same time share syncs ([`SyncGate`]): one that started after a call began
    /// covers it.
    pub fn sync(&self) -> io::Result<()> {
        self.gate.run(|| self.sync_now())
    }

    /// [`StateDb::sync`] for a tokio task: waits for a covering sync without holding a thread
    /// of the blocking pool (only a sync it runs itself takes one).
    pub async fn sync_async(&self) -> io::Result<()> {
        let db = self.clone();
        self.gate.run_async(move || db.sync_now()).await
    }

    fn sync_now(&self) -> io::Result<()> {
        self.writer.flush_all().map_err(io::Error::other)?;
        let unlinks = self.writer.take_unlinks();
        let flushed = self.db.flush();
        release_spent_buffers();
        flushed.map_err(io::Error::other)?;
        sync_file(&self.path.join("db"))?;
        let blobs = self.path.join("blobs");
        if blobs.is_dir() {
            for entry in std::fs::read_dir(&blobs)? {
                let entry = entry?;
                if entry.file_type()?.is_file() {
                    sync_file(&entry.path())?;
                }
            }
            sync_dir(&blobs)?;
        }
        sync_dir(&self.path)?;
        let mut dirs: Vec<PathBuf> = Vec::new();
        for path in unlinks {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => tracing::warn!(path = %path.display(), error = %e, "removing a file"),
            }
            if let Some(dir) = path.parent() {
                if !dirs.iter().any(|known| known == dir) {
                    dirs.push(dir.to_path_buf());
                }
            }
        }
        for dir in dirs.iter().filter(|dir| dir.is_dir()) {
            sync_dir(dir)?;
        }
        self.syncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The directory where `group`'s machine may keep files beside its keys (a stream's
    /// message segments). Inside the database's directory, so that whatever moves or removes
    /// the node's state (quarantine, a rebuild) takes them along; removed with the group
    /// (`GroupStateMachine::destroy`).
    pub fn files_dir(&self, group: GroupId) -> PathBuf {
        self.path.join(FILES_DIR).join(format!("{group:016x}"))
    }

    /// Removes `group`'s files directory, whose keys are gone durably: renamed out of the
    /// way at once, then deleted by a thread of its own (freeing 2 GiB of segment files
    /// took 3.4 s here, which a stream delete would otherwise wait for). What a stop cuts
    /// short, the next open removes (`remove_files_of_keyless_groups`).
    pub fn discard_files(&self, group: GroupId) -> io::Result<()> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos());
        let trash = self
            .path
            .join(FILES_DIR)
            .join(format!("{TRASH_PREFIX}{group:016x}-{nanos}"));
        std::fs::rename(self.files_dir(group), &trash)?;
        std::thread::Builder::new()
            .name("discard-files".into())
            .spawn(move || {
                if let Err(error) = std::fs::remove_dir_all(&trash) {
                    tracing::warn!(path = %trash.display(), %error, "removing a dropped group's files");
                }
            })?;
        Ok(())
    }

    /// Removes the files directories of groups without a key in sled (a drop that stopped
    /// between forgetting the keys and removing the files, `GroupStateMachine::destroy`) and
    /// what `discard_files` had not finished deleting. At open, before any group starts.
    pub fn remove_files_of_keyless_groups(&self) -> io::Result<()> {
        let root = self.path.join(FILES_DIR);
        for name in dir_names(&root)? {
            if name.starts_with(TRASH_PREFIX) {
                std::fs::remove_dir_all(root.join(name))?;
            }
        }
        for group in self.groups_with_files()? {
            let keyless = self
                .groups
                .scan_prefix(group_prefix(group))
                .next()
                .transpose()
                .map_err(io::Error::other)?
                .is_none();
            if keyless {
                std::fs::remove_dir_all(self.files_dir(group))?;
            }
        }
        Ok(())
    }

    /// Every group that has a files directory.
    fn groups_with_files(&self) -> io::Result<Vec<GroupId>> {
        Ok(dir_names(&self.path.join(FILES_DIR))?
            .iter()
            .filter_map(|name| GroupId::from_str_radix(name, 16).ok())
            .collect())
    }
}

/// The UTF-8 names in `dir` (none if it does not exist).
pub fn dir_names(dir: &Path) -> io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut names = Vec::new();
    for entry in entries {
        if let Ok(name) = entry?.file_name().into_string() {
            names.push(name);
        }
    }
    Ok(names)
}

/// Below the database's directory: one directory per group with files (`files_dir`).
const FILES_DIR: &str = "files";
/// The names `discard_files` gives directories on their way out.
const TRASH_PREFIX: &str = ".discarded-";

/// Tree of the throwaway writes of [`StateDb::reclaim`]; empty between calls.
const RECLAIM_TREE: &str = "reclaim-churn";
/// [`StateDb::reclaim`] writes (and removes) this many values of [`RECLAIM_VALUE_LEN`] bytes:
/// 4 MiB of log, eight of sled's 512 KiB segments. Measured on sled 0.34.7 (70 MB of 64 KiB
/// values removed): 1 MiB of churn let the blob files go but left the `db` file at its
/// size, 4 MiB let both go (db 29 → 4 MB, blobs 132 → 1 MB), in under a second.
const RECLAIM_VALUES: u64 = 1024;
const RECLAIM_VALUE_LEN: usize = 4096;

impl StateDb {
    /// Give back the disk space of keys removed before this call (a dropped group's). Blocking.
    ///
    /// sled 0.34 frees space only as its log moves on: the blob file of a replaced node is
    /// deleted when the log segment that recorded the replacement is sealed, and a segment is
    /// reused or cut from the end of the `db` file only once later segments were written. On
    /// a node that goes idle after a stream delete that never happens, and neither `flush()`
    /// nor `drop_tree` changes it (measured). So this moves the log on by itself: it writes
    /// and removes a few MiB of throwaway values in a tree of its own, then flushes; sled's
    /// background flusher then deletes the blobs and truncates the file.
    pub fn reclaim(&self) -> io::Result<()> {
        self.writer.flush_all().map_err(io::Error::other)?;
        let churn = self.db.open_tree(RECLAIM_TREE).map_err(io::Error::other)?;
        let value = vec![0u8; RECLAIM_VALUE_LEN];
        for n in 0..RECLAIM_VALUES {
            let key = n.to_be_bytes();
            churn
                .insert(key, value.as_slice())
                .map_err(io::Error::other)?;
            churn.remove(key).map_err(io::Error::other)?;
        }
        let flushed = self.db.flush();
        release_spent_buffers();
        flushed.map_err(io::Error::other)?;
        Ok(())
    }
}

/// Hands the I/O buffers sled let go of on this thread to its collector at once; called by
/// every thread of ours that writes or flushes sled (the state writer after each batch, a
/// sync or reclaim after its flush). sled retires a sealed buffer (128 KiB,
/// [`SLED_SEGMENT_BYTES`]) by deferring its drop into the calling thread's bag in crossbeam's
/// epoch collector, and a bag goes to the collector only once it holds 64 such drops: the
/// state writer and the blocking pool's syncing threads kept a few hundred spent buffers
/// alive between them (31–33 MB at the peak of a publish over 1000 streams, heaptrack, issue
/// 16). The flush moves the bag to the shared queue and collects what the epoch allows.
pub(crate) fn release_spent_buffers() {
    crossbeam_epoch::pin().flush();
}

/// Waits until a [`StateDb`] is closed: every handle dropped, then sled's file closed, so the
/// database opens again at once (a node restarted in the same process finds sled's lock
/// free). sled 0.34 closes its file on its own IO threads, just after the last handle went
/// (a buffer write or a file truncation still queued there holds it), and offers no way to
/// join them; its lock on the file goes exactly then, so the wait ends by taking that lock
/// (blocking, not polling). Holds no handle itself: awaited while one is kept, it waits for
/// that one.
pub struct Closing {
    handles: TaskTracker,
    db_file: PathBuf,
}

impl Closing {
    /// Whether no handle is left (sled may still be closing its file).
    pub fn unheld(&self) -> bool {
        self.handles.is_empty()
    }

    pub async fn wait(self) -> io::Result<()> {
        self.handles.wait().await;
        let db_file = self.db_file;
        tokio::task::spawn_blocking(move || File::open(&db_file)?.lock())
            .await
            .map_err(io::Error::other)?
    }
}

fn sync_file(path: &Path) -> io::Result<()> {
    match File::open(path) {
        Ok(file) => file.sync_all(),
        // A blob garbage-collected by sled between read_dir and open: nothing to sync.
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// fsync a directory so that file creations, renames and deletions in it are durable.
pub(crate) fn sync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

/// The first `PREFIX_LEN` bytes of every key of `group` in `space`.
pub(crate) fn prefix(group: GroupId, space: u8) -> [u8; PREFIX_LEN] {
    let mut out = [0u8; PREFIX_LEN];
    out[..8].copy_from_slice(&group.to_be_bytes());
    out[8] = space;
    out
}

/// The prefix of all keys of `group`, whatever their space.
pub(crate) fn group_prefix(group: GroupId) -> [u8; 8] {
    group.to_be_bytes()
}

/// Full sled key of `rest` in `space` of `group`.
pub(crate) fn key(group: GroupId, space: u8, rest: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX_LEN + rest.len());
    out.extend_from_slice(&prefix(group, space));
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_of_a_group_are_contiguous_and_ordered_by_space() {
        assert!(key(1, SPACE_RAFT, b"zzz") < key(1, SPACE_DATA, b""));
        assert!(key(1, SPACE_DATA, &[0xff; 4]) < key(2, SPACE_RAFT, b""));
        assert!(key(7, SPACE_DATA, b"k").starts_with(&group_prefix(7)));
    }

    #[test]
    fn files_go_after_the_sync_and_with_keyless_groups() {
        use super::super::state_writer::FileEffects;
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).unwrap();
        let kept = db.files_dir(1);
        let dropped = db.files_dir(2);
        for files in [&kept, &dropped] {
            std::fs::create_dir_all(files).unwrap();
            std::fs::write(files.join("a"), b"x").unwrap();
        }
        let writer = db.writer();
        let owner = writer.new_owner();
        let effects = FileEffects {
            sync_first: vec![Arc::new(File::open(kept.join("a")).unwrap())],
            unlink_after_sync: vec![kept.join("a")],
            after_written: Vec::new(),
        };
        writer
            .submit_with(
                owner,
                vec![(key(1, SPACE_DATA, b"k"), Some(b"1"[..].into()))],
                effects,
            )
            .unwrap();
        writer.flush_all().unwrap();
        assert!(kept.join("a").exists(), "removed before a sync");
        db.sync().unwrap();
        assert!(!kept.join("a").exists());
        // A discard cut short by a stop: renamed, not yet deleted.
        let trash = dir
            .path()
            .join(FILES_DIR)
            .join(format!("{TRASH_PREFIX}3-1"));
        std::fs::create_dir_all(&trash).unwrap();
        db.remove_files_of_keyless_groups().unwrap();
        assert!(kept.exists(), "group 1 has a key");
        assert!(!dropped.exists(), "group 2 has none");
        assert!(!trash.exists());
        db.discard_files(1).unwrap();
        assert!(!kept.exists(), "renamed at once");
    }

    #[test]
    fn a_database_made_with_sleds_default_buffer_size_still_opens() {
        let dir = tempfile::tempdir().unwrap();
        let legacy = sled::Config::new().path(dir.path()).open().unwrap();
        legacy.insert(b"k", &b"v"[..]).unwrap();
        legacy.flush().unwrap();
        drop(legacy);
        let db = StateDb::open(dir.path()).unwrap();
        assert_eq!(db.db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        drop(db);
        // A new database gets the smaller buffers: sled would refuse the legacy size for it.
        let fresh = tempfile::tempdir().unwrap();
        drop(StateDb::open(fresh.path()).unwrap());
        let refused = sled::Config::new()
            .path(fresh.path())
            .segment_size(SLED_LEGACY_SEGMENT_BYTES)
            .open();
        assert!(matches!(refused, Err(sled::Error::Unsupported(_))));
    }

    #[test]
    fn sync_makes_writes_durable_and_counts() {
        let dir = tempfile::tempdir().unwrap();
        let db = StateDb::open(dir.path()).unwrap();
        db.tree()
            .insert(key(1, SPACE_DATA, b"a"), &b"1"[..])
            .unwrap();
        // A large value goes to sled's blob files, which sled itself never fsyncs.
        db.tree()
            .insert(key(1, SPACE_DATA, b"big"), vec![7u8; 1 << 20])
            .unwrap();
        db.sync().unwrap();
        assert_eq!(db.syncs(), 1);
        drop(db);
        let db = StateDb::open(dir.path()).unwrap();
        assert_eq!(
            db.tree()
                .get(key(1, SPACE_DATA, b"big"))
                .unwrap()
                .unwrap()
                .len(),
            1 << 20
        );
    }
}
