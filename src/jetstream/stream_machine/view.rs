//! `StreamView`: the in-memory state of one stream group, shared between the group's
//! machine (the only writer, while applying committed entries) and the front (readers:
//! API handlers, delivery, publish). One per stream group on every replica.
//!
//! Readers take the read lock briefly and never across an `.await`. `changed()` lets the
//! front wait for the next applied entry (new messages for a waiting pull request).

use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::watch;

use crate::jscore::group::StreamGroup;

#[derive(Debug, Clone)]
pub struct StreamView {
    state: Arc<RwLock<StreamGroup>>,
    applied: watch::Receiver<u64>,
}

/// The machine's side of a `StreamView`: write access and the applied-entry signal.
#[derive(Debug)]
pub struct StreamViewWriter {
    state: Arc<RwLock<StreamGroup>>,
    applied: watch::Sender<u64>,
}

impl StreamView {
    pub fn new(group: StreamGroup) -> (StreamViewWriter, StreamView) {
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
            },
        )
    }

    /// Runs `f` on the current state under the read lock.
    pub fn read<R>(&self, f: impl FnOnce(&StreamGroup) -> R) -> R {
        f(&self.state.read())
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
