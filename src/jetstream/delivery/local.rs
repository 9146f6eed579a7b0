//! The leader's own copy of a consumer that delivers without Raft (ADR 0034,
//! `jscore::consumer::local`): an ack-none, memory-storage consumer on a limits stream. Its
//! delivery task advances the copy; ConsumerInfo and the task's own looks (pending counts,
//! heartbeats) read it instead of the replicated state. Held in the consumer's `Activity`,
//! so it goes with the task: a new leader, or a restarted task, starts from the replicated
//! state again.
//!
//! Locking: taken inside the stream view's read lock, never the other way round.

use parking_lot::Mutex;

use crate::jscore::consumer::{ConsumerState, Delivery};
use crate::jscore::stream::StreamState;

#[derive(Debug, Default)]
pub struct LocalCopy {
    copy: Mutex<Option<Box<ConsumerState>>>,
}

impl LocalCopy {
    /// Runs `f` on the consumer as its leader sees it: the copy, brought up to `replicated`
    /// (config, purges), while the consumer still delivers without Raft; else `replicated`
    /// (a copy left from before the stream left limits retention is dropped here already, so
    /// no reader sees a position the next delivery will not start from).
    pub fn read<R>(
        &self,
        replicated: &ConsumerState,
        stream: &StreamState,
        f: impl FnOnce(&ConsumerState) -> R,
    ) -> R {
        let mut copy = self.copy.lock();
        match current(&mut copy, replicated, stream) {
            Some(copy) => f(copy),
            None => f(replicated),
        }
    }

    /// Up to `max_messages` deliveries recorded in the copy (taken from `replicated` first),
    /// or `None` when the consumer's deliveries must be replicated (the copy, if any, is
    /// dropped: from now on the replicated state is the consumer's).
    pub fn deliver(
        &self,
        replicated: &ConsumerState,
        stream: &StreamState,
        max_messages: usize,
        now_nanos: i64,
    ) -> Option<Vec<Delivery>> {
        let mut copy = self.copy.lock();
        if copy.is_none() && replicated.delivers_locally(stream) {
            *copy = Some(Box::new(replicated.clone()));
        }
        let copy = current(&mut copy, replicated, stream)?;
        Some(copy.deliver_next(stream, max_messages, now_nanos))
    }

    /// Forgets the copy: a reset was applied to the replicated state, which delivery
    /// starts from again.
    pub fn forget(&self) {
        *self.copy.lock() = None;
    }
}

/// The copy, brought up to `replicated`, while the consumer delivers without Raft; `None`
/// (and the copy gone) once it does not, or if there is none.
fn current<'a>(
    copy: &'a mut Option<Box<ConsumerState>>,
    replicated: &ConsumerState,
    stream: &StreamState,
) -> Option<&'a mut ConsumerState> {
    if !replicated.delivers_locally(stream) {
        *copy = None;
    }
    let copy = copy.as_deref_mut()?;
    copy.follow(replicated, stream);
    Some(copy)
}
