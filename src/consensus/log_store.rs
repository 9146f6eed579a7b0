//! [`GroupLogStore`]: openraft's `RaftLogStorage` (and `RaftLogReader`) for one Raft group,
//! over the node-wide write-ahead log ([`LogEngine`]). One per group on every replica; clones
//! share state (openraft uses a clone as the replication log reader).
//!
//! What goes where in the engine (group id = the Raft group id):
//!
//! | openraft | engine |
//! |---|---|
//! | entry at index i | `Append { index: i, payload: raft_codec(Entry) }` |
//! | `truncate(log_id)` | `TruncateFrom { index }` |
//! | `purge(log_id)` | `PurgeUpTo { index }` + `SetMeta(LAST_PURGED, raft_codec(log_id))` in one write |
//! | `save_vote` | `SetMeta(VOTE, raft_codec(vote))` |
//! | `save_committed` | `SetMeta(COMMITTED, raft_codec(log_id))`, carried by the group's next write |
//!
//! Durability: `append` submits the entries (readable at once, as openraft requires). On a
//! follower it calls openraft's `LogFlushed` callback from the engine's completion, after the
//! batch was fdatasynced, so its answer to the leader counts a durable copy. On the leader
//! (this store saved a committed vote for its own node) it calls it once the batch is
//! *written* (page cache, before the fsync): openraft 0.9 waits for that callback before it
//! replicates the entries, so the leader's fsync would otherwise run in series with the
//! followers' instead of beside them. The leader's own copy may then count toward the commit
//! before it is durable; what is acknowledged to a client waits for it too ([`Durable`], the
//! group's fsynced index, awaited by the proposal batcher), so an acknowledged entry is on
//! the disks of a quorum either way. vote, truncate and purge return only once durable. The engine completes
//! requests in submission order, so the group's IO is serialized as openraft demands. Group
//! commit comes from the engine: appends of all groups queued while it syncs share the next
//! fsync.
//!
//! `save_committed` is openraft's optional optimisation (re-apply committed entries after a
//! restart); it is not worth an fsync of its own, so it rides along with the group's next write
//! (or [`GroupLogStore::flush_committed`]). The persisted value may lag, never lead.

use std::fmt::Debug;
use std::io;
use std::ops::RangeBounds;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, OptionalSend, RaftLogReader, StorageIOError};
use parking_lot::Mutex;

use super::raft_codec;
use super::types::{Entry, GroupId, LogId, NodeId, StorageError, TypeConfig, Vote};
use crate::store::log::{LogEngine, LogError, LogOp, MetaKey};

fn read_logs_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

fn write_logs_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

/// Committed log id not yet persisted, shared by the clones of one store.
#[derive(Debug, Default)]
struct CommittedState {
    /// Newest committed id openraft reported.
    latest: Option<LogId>,
    /// True if `latest` is not yet in a submitted write.
    dirty: bool,
}

/// How far a group's log is durable on this node (fsynced), and whether a write failed (then
/// it never gets further).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Durable {
    pub index: u64,
    pub failed: bool,
}

/// The Raft log of one group. See the module docs.
#[derive(Clone)]
pub struct GroupLogStore {
    group: GroupId,
    node: NodeId,
    engine: LogEngine,
    committed: Arc<Mutex<CommittedState>>,
    /// This node leads under the vote saved last: appends are its own entries.
    leads: Arc<AtomicBool>,
    durable: Arc<tokio::sync::watch::Sender<Durable>>,
}

impl Debug for GroupLogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupLogStore")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl GroupLogStore {
    pub fn new(group: GroupId, node: NodeId, engine: LogEngine) -> GroupLogStore {
        // What recovery found counts as durable: the engine wrote it before this start.
        let recovered = Durable {
            index: engine.last_index(group).unwrap_or(0),
            failed: false,
        };
        GroupLogStore {
            group,
            node,
            engine,
            committed: Arc::default(),
            leads: Arc::default(),
            durable: Arc::new(tokio::sync::watch::channel(recovered).0),
        }
    }

    /// Follows how far the group's log is durable here.
    pub fn durable(&self) -> tokio::sync::watch::Receiver<Durable> {
        self.durable.subscribe()
    }

    pub fn group(&self) -> GroupId {
        self.group
    }

    /// Persist the committed log id if openraft advanced it since the last write (for example
    /// before a clean shutdown).
    pub async fn flush_committed(&self) -> Result<(), LogError> {
        let ops = self.with_committed(Vec::new());
        if ops.is_empty() {
            return Ok(());
        }
        self.engine.write(ops).await
    }

    /// Prepend the pending committed id, if any, to `ops`.
    fn with_committed(&self, mut ops: Vec<LogOp>) -> Vec<LogOp> {
        let mut committed = self.committed.lock();
        if committed.dirty {
            committed.dirty = false;
            ops.insert(
                0,
                LogOp::SetMeta {
                    group: self.group,
                    key: MetaKey::COMMITTED,
                    value: raft_codec::encode(&committed.latest),
                },
            );
        }
        ops
    }

    fn decode_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: MetaKey,
    ) -> Result<Option<T>, StorageError> {
        match self.engine.meta(self.group, key) {
            Some(bytes) => raft_codec::decode::<T>(&bytes)
                .map(Some)
                .map_err(read_logs_err),
            None => Ok(None),
        }
    }

    fn last_purged_log_id(&self) -> Result<Option<LogId>, StorageError> {
        self.decode_meta::<LogId>(MetaKey::LAST_PURGED)
    }
}

impl RaftLogReader<TypeConfig> for GroupLogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let raw = self
            .engine
            .entries(self.group, range)
            .map_err(read_logs_err)?;
        raw.iter()
            .map(|(_, payload)| raft_codec::decode::<Entry>(payload).map_err(read_logs_err))
            .collect()
    }
}

impl RaftLogStorage<TypeConfig> for GroupLogStore {
    type LogReader = GroupLogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged_log_id = self.last_purged_log_id()?;
        let last_log_id = match self.engine.last_index(self.group) {
            Some(index) => {
                let entries = self
                    .engine
                    .entries(self.group, index..=index)
                    .map_err(read_logs_err)?;
                let (_, payload) = entries.first().ok_or_else(|| {
                    read_logs_err(io::Error::other(format!(
                        "group {}: last entry {index} vanished",
                        self.group
                    )))
                })?;
                Some(
                    raft_codec::decode::<Entry>(payload)
                        .map_err(read_logs_err)?
                        .log_id,
                )
            }
            None => last_purged_log_id,
        };
        Ok(LogState {
            last_purged_log_id,
            last_log_id,
        })
    }

    async fn get_log_reader(&mut self) -> GroupLogStore {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let ops = self.with_committed(vec![LogOp::SetMeta {
            group: self.group,
            key: MetaKey::VOTE,
            value: raft_codec::encode(vote),
        }]);
        // Appends follow the vote saved before them: a new leader's (ours or another's) or a
        // candidate's. Not leading until the write is durable, then as the vote says.
        self.leads.store(false, Ordering::Release);
        self.engine
            .write(ops)
            .await
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)))?;
        let ours = vote.is_committed() && vote.leader_id().voted_for() == Some(self.node);
        self.leads.store(ours, Ordering::Release);
        Ok(())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        match self.engine.meta(self.group, MetaKey::VOTE) {
            Some(bytes) => raft_codec::decode(&bytes)
                .map(Some)
                .map_err(|e| StorageIOError::read_vote(AnyError::new(&e)).into()),
            None => Ok(None),
        }
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut state = self.committed.lock();
        if committed > state.latest {
            state.latest = committed;
            state.dirty = true;
        }
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        let pending = self.committed.lock().latest;
        let persisted: Option<LogId> = self
            .decode_meta::<Option<LogId>>(MetaKey::COMMITTED)?
            .flatten();
        Ok(pending.max(persisted))
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let group = self.group;
        // Entries at or below the purge mark are committed and covered by a snapshot already;
        // openraft does not send them in normal operation, but its storage suite does (after
        // `get_initial_state` purged up to the state machine). The engine keeps logs
        // contiguous after the mark, so they are dropped rather than appended.
        let purged = self.engine.last_purged(group);
        let ops: Vec<LogOp> = entries
            .into_iter()
            .filter(|entry| Some(entry.log_id.index) > purged)
            .map(|entry| LogOp::Append {
                group,
                index: entry.log_id.index,
                payload: raft_codec::encode(&entry),
            })
            .collect();
        let last = ops.iter().rev().find_map(|op| match op {
            LogOp::Append { index, .. } => Some(*index),
            _ => None,
        });
        let ops = self.with_committed(ops);
        let durable = self.durable.clone();
        let note_durable = move |result: &Result<(), LogError>| match result {
            Ok(()) => {
                durable.send_if_modified(|d| match last {
                    Some(last) if last > d.index => {
                        d.index = last;
                        true
                    }
                    _ => false,
                });
            }
            Err(_) => {
                durable.send_modify(|d| d.failed = true);
            }
        };
        if !self.leads.load(Ordering::Acquire) {
            return self
                .engine
                .submit(ops, move |result| {
                    note_durable(&result);
                    callback.log_io_completed(result.map_err(io::Error::other));
                })
                .map_err(write_logs_err);
        }
        // The leader's own entries: openraft hears of them once written (module docs).
        let callback = Arc::new(Mutex::new(Some(callback)));
        let on_written = {
            let callback = callback.clone();
            move || {
                if let Some(callback) = callback.lock().take() {
                    callback.log_io_completed(Ok(()));
                }
            }
        };
        self.engine
            .submit_staged(ops, Some(Box::new(on_written)), move |result| {
                note_durable(&result);
                // The write itself failed: openraft has not heard yet.
                if let Some(callback) = callback.lock().take() {
                    callback.log_io_completed(result.map_err(io::Error::other));
                }
            })
            .map_err(write_logs_err)
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let ops = self.with_committed(vec![LogOp::TruncateFrom {
            group: self.group,
            index: log_id.index,
        }]);
        self.engine.write(ops).await.map_err(write_logs_err)?;
        let below = log_id.index.saturating_sub(1);
        self.durable.send_if_modified(|d| {
            let higher = d.index > below;
            d.index = d.index.min(below);
            higher
        });
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        if self.last_purged_log_id()? >= Some(log_id) {
            return Ok(());
        }
        let ops = self.with_committed(vec![
            LogOp::PurgeUpTo {
                group: self.group,
                index: log_id.index,
            },
            LogOp::SetMeta {
                group: self.group,
                key: MetaKey::LAST_PURGED,
                value: raft_codec::encode(&log_id),
            },
        ]);
        self.engine.write(ops).await.map_err(write_logs_err)
    }
}
