//! `StreamView`: the in-memory state of one stream group, shared between the group's
//! machine (the only writer, while applying committed entries) and the front (readers:
//! API handlers, delivery, publish). One per stream group on every replica.
//!
//! Readers take the read lock briefly and never across an `.await`. `changed()` lets the
//! front wait for the next applied entry (new messages for a waiting pull request).
//!
//! The state holds each message's metadata; its headers and payload come from the group's
//! [`MessageStore`]: [`StreamView::message`] reads the metadata under the lock and the body
//! after releasing it (the delivery path), [`StreamView::body`] reads a body for a reader
//! that holds the lock (direct and message gets, as nats-server reads under its stream
//! lock; the machine never waits on that lock for long, see `bodies.rs`).

use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use super::bodies::MessageStore;
use crate::jscore::group::StreamGroup;
use crate::jscore::stream::{MsgInfo, StoredMsg};

#[derive(Debug, Clone)]
pub struct StreamView {
    state: Arc<RwLock<StreamGroup>>,
    applied: watch::Receiver<u64>,
    store: Arc<MessageStore>,
}

/// The machine's side of a `StreamView`: write access and the applied-entry signal.
#[derive(Debug)]
pub struct StreamViewWriter {
    state: Arc<RwLock<StreamGroup>>,
    applied: watch::Sender<u64>,
}

impl StreamView {
    pub fn new(group: StreamGroup, store: Arc<MessageStore>) -> (StreamViewWriter, StreamView) {
        let state = Arc::new(RwLock::new(group));
        let (sender, receiver) = watch::channel(0);
        (
            StreamViewWriter {
                state: state.clone(),
                applied: sender,
            },
            StreamView {
                state,
                applied: receiver,
                store,
            },
        )
    }

    /// Runs `f` on the current state under the read lock.
    pub fn read<R>(&self, f: impl FnOnce(&StreamGroup) -> R) -> R {
        f(&self.state.read())
    }

    /// Stored message `seq` whole: its metadata read under the lock, its body after. `None`
    /// when it is not stored (or was removed between the two).
    pub fn message(&self, seq: u64) -> Option<StoredMsg> {
        let (subject, ts_nanos) = self.read(|group| {
            let msg = group.stream().get(seq)?;
            Some((msg.subject.to_string(), msg.ts_nanos))
        })?;
        let body = self.store.body(seq)?;
        Some(StoredMsg {
            subject,
            headers: body.headers,
            payload: body.payload,
            ts_nanos,
        })
    }

    /// Stored messages `seqs` whole (`None` for one not stored): the metadata of all under
    /// one read lock, then the bodies.
    pub fn messages(&self, seqs: &[u64]) -> Vec<Option<StoredMsg>> {
        let metas: Vec<Option<(String, i64)>> = self.read(|group| {
            let stream = group.stream();
            seqs.iter()
                .map(|seq| {
                    let msg = stream.get(*seq)?;
                    Some((msg.subject.to_string(), msg.ts_nanos))
                })
                .collect()
        });
        let bodies = self.store.bodies(
            seqs.iter()
                .zip(&metas)
                .filter(|(_, meta)| meta.is_some())
                .map(|(seq, _)| *seq),
        );
        let mut bodies = bodies.into_iter();
        metas
            .into_iter()
            .map(|meta| {
                let (subject, ts_nanos) = meta?;
                let body = bodies.next()??;
                Some(StoredMsg {
                    subject,
                    headers: body.headers,
                    payload: body.payload,
                    ts_nanos,
                })
            })
            .collect()
    }

    /// Stored message `seq` whole, for a caller holding the read lock that found `msg`.
    pub fn whole(&self, seq: u64, msg: MsgInfo<'_>) -> Option<StoredMsg> {
        let body = self.store.body(seq)?;
        Some(StoredMsg {
            subject: msg.subject.to_string(),
            headers: body.headers,
            payload: body.payload,
            ts_nanos: msg.ts_nanos,
        })
    }

    pub fn store(&self) -> &Arc<MessageStore> {
        &self.store
    }

    /// A receiver that changes whenever the machine applied an entry (the value is the
    /// last applied Raft index).
    pub fn applied(&self) -> watch::Receiver<u64> {
        self.applied.clone()
    }
}

impl StreamViewWriter {
    /// Runs `f` on the current state under the read lock (the machine, while staging).
    pub fn read<R>(&self, f: impl FnOnce(&StreamGroup) -> R) -> R {
        f(&self.state.read())
    }

    /// Runs `f` with write access (the machine, while applying).
    pub fn write<R>(&self, f: impl FnOnce(&mut StreamGroup) -> R) -> R {
        f(&mut self.state.write())
    }

    /// Replaces the whole state (after `load`).
    pub fn replace(&self, group: StreamGroup) {
        *self.state.write() = group;
    }

    /// Signals readers that entry `index` was applied.
    pub fn mark_applied(&self, index: u64) {
        self.applied.send_replace(index);
    }
}
