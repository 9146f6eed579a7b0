//! [`LogError`]: every way the log engine can fail, typed.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

/// Errors of the [`LogEngine`](super::LogEngine).
///
/// `Clone` because one failed group-commit batch fails every caller in it with the same error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// An I/O error while opening or recovering the log directory.
    #[error("log {action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: Arc<io::Error>,
    },

    /// Writing or syncing a batch failed (disk full, I/O error). Nothing of the batch was
    /// acknowledged, the file was cut back to the last durable offset and the in-memory state
    /// rolled back, so the next write may succeed once the cause is gone.
    #[error("log write failed: {0}")]
    WriteFailed(#[source] Arc<io::Error>),

    /// A write failed and the engine could not restore the file to its last durable state
    /// either; it refuses all writes until the node reopens it (recovery then cuts the tail).
    #[error("log engine is broken after an unrecoverable I/O failure; reopen required: {0}")]
    Broken(#[source] Arc<io::Error>),

    /// The log cannot be trusted at `file`:`offset` and the damage cannot be pinned to a group
    /// (a record header or a whole segment is damaged in the middle of the log). The engine
    /// refuses to open rather than silently drop acknowledged data.
    #[error("log corrupt at {file}:{offset}: {reason}")]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },

    /// Recovery found a damaged record of this group in the middle of the log; the group
    /// refuses reads and writes (except `DropGroup`) so the node does not serve a stream with a
    /// hole in its log. Re-sync the replica from its peers.
    #[error("raft group {group} is corrupt in the log")]
    GroupCorrupt { group: u64 },

    /// `Append` not at the group's next index (logs must stay contiguous).
    #[error("raft group {group}: append at index {got}, expected {expected}")]
    NonContiguous { group: u64, expected: u64, got: u64 },

    /// `TruncateFrom` at or below the group's purged index (purged entries were committed and
    /// can never be truncated).
    #[error("raft group {group}: truncate from {index} but entries up to {purged} are purged")]
    TruncatePurged { group: u64, index: u64, purged: u64 },

    /// An `Append` or `PurgeUpTo` index above `memtable::MAX_INDEX` (2^63 - 1).
    #[error("log index {index} of group {group} is above the highest index a log may hold")]
    IndexTooLarge { group: u64, index: u64 },

    /// An entry or meta value too large for the record format.
    #[error("payload of {len} bytes exceeds the record limit of {max} bytes")]
    PayloadTooLarge { len: usize, max: usize },

    /// Invalid [`LogOptions`](super::LogOptions).
    #[error("invalid log options: {0}")]
    InvalidOptions(String),

    /// Another engine (in this or another process) has the log directory open.
    #[error("log directory {dir} is in use by another engine")]
    Locked { dir: PathBuf },

    /// The writer thread is gone (engine shut down or panicked).
    #[error("log engine is closed")]
    Closed,
}

impl LogError {
    pub(crate) fn io(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        LogError::Io {
            action,
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// True when the error is (or wraps) an out-of-space condition.
    pub fn is_disk_full(&self) -> bool {
        let source = match self {
            LogError::Io { source, .. } => source,
            LogError::WriteFailed(source) | LogError::Broken(source) => source,
            _ => return false,
        };
        source.kind() == io::ErrorKind::StorageFull || source.raw_os_error() == Some(28)
    }
}
