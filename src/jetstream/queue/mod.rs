//! A bounded queue from an internal subscriber to the task that serves it (the JetStream API
//! inbox, a stream's ack batcher).
//!
//! An item counts against the bound from the moment it is pushed until its consumer is done
//! with it — the `Taken` batch holding it is dropped — so the bound covers work in progress,
//! not only what waits: a consumer that spawns a task per item cannot grow memory past it.
//!
//! Pushing never blocks (subscribers run on a publishing client's read loop): a full queue
//! refuses the item and the caller decides what to do with it — drop it (acks), or also drop
//! everything waiting (`QueueSender::drain`, the API inbox as nats-server does). `Dropped`
//! counts what was thrown away and says when to warn about it.
//!
//! One consumer. Dropping the sender closes the queue: the receiver gets what was still
//! waiting, then `None`. Dropping the receiver closes it too: pushes are refused as `Closed`.

mod dropped;
#[cfg(test)]
mod tests;

pub use dropped::Dropped;

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// Why `push` refused an item (which it gives back).
#[derive(Debug, thiserror::Error)]
pub enum PushError<T> {
    #[error("queue is full")]
    Full(T),
    #[error("queue is closed")]
    Closed(T),
}

#[derive(Debug)]
struct State<T> {
    waiting: VecDeque<T>,
    /// Items handed to the consumer and not yet released (see `Taken`).
    taken: usize,
    closed: bool,
}

#[derive(Debug)]
struct Shared<T> {
    state: Mutex<State<T>>,
    ready: Notify,
    limit: usize,
}

impl<T> Shared<T> {
    fn close(&self) {
        self.state.lock().closed = true;
        self.ready.notify_one();
    }
}

/// A queue holding at most `limit` items (waiting or taken); see the module doc.
pub fn bounded<T>(limit: usize) -> (QueueSender<T>, QueueReceiver<T>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            waiting: VecDeque::new(),
            taken: 0,
            closed: false,
        }),
        ready: Notify::new(),
        limit,
    });
    (
        QueueSender {
            shared: shared.clone(),
        },
        QueueReceiver { shared },
    )
}

/// The producing side (not `Clone`: one owner, whose drop closes the queue).
#[derive(Debug)]
pub struct QueueSender<T> {
    shared: Arc<Shared<T>>,
}

impl<T> QueueSender<T> {
    /// Queues `item` unless the queue holds `limit` items already or is closed. Returns how
    /// many items the queue holds with it.
    pub fn push(&self, item: T) -> Result<usize, PushError<T>> {
        let pending = {
            let mut state = self.shared.state.lock();
            if state.closed {
                return Err(PushError::Closed(item));
            }
            let pending = state.waiting.len() + state.taken;
            if pending >= self.shared.limit {
                return Err(PushError::Full(item));
            }
            state.waiting.push_back(item);
            pending + 1
        };
        self.shared.ready.notify_one();
        Ok(pending)
    }

    /// Drops every waiting item (not those the consumer took); returns how many.
    pub fn drain(&self) -> usize {
        let waiting = std::mem::take(&mut self.shared.state.lock().waiting);
        waiting.len() // dropped here, outside the lock
    }

    /// Items waiting or taken.
    pub fn pending(&self) -> usize {
        let state = self.shared.state.lock();
        state.waiting.len() + state.taken
    }

    pub fn is_closed(&self) -> bool {
        self.shared.state.lock().closed
    }
}

impl<T> Drop for QueueSender<T> {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// The consuming side.
#[derive(Debug)]
pub struct QueueReceiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> QueueReceiver<T> {
    /// Takes up to `max` waiting items (at least one), waiting for the first; `None` once
    /// the queue is closed and empty. Cancel-safe: items leave the queue only in the poll
    /// that returns them.
    pub async fn recv_many(&mut self, max: usize) -> Option<Taken<T>> {
        let shared = &self.shared;
        loop {
            let notified = shared.ready.notified();
            tokio::pin!(notified);
            // Registered before looking, so a push after the look wakes us.
            notified.as_mut().enable();
            if let Some(taken) = take(shared, max) {
                return Some(taken);
            }
            if shared.state.lock().closed {
                return None;
            }
            notified.await;
        }
    }

    /// Takes up to `max` waiting items without waiting; `None` if none wait.
    pub fn try_recv_many(&mut self, max: usize) -> Option<Taken<T>> {
        take(&self.shared, max)
    }
}

/// Moves up to `max` (at least one) waiting items into a `Taken`.
fn take<T>(shared: &Arc<Shared<T>>, max: usize) -> Option<Taken<T>> {
    let mut state = shared.state.lock();
    let count = state.waiting.len().min(max.max(1));
    if count == 0 {
        return None;
    }
    let items: Vec<T> = state.waiting.drain(..count).collect();
    state.taken += count;
    drop(state);
    Some(Taken {
        items,
        count,
        shared: shared.clone(),
    })
}

impl<T> Drop for QueueReceiver<T> {
    fn drop(&mut self) {
        self.shared.close();
    }
}

/// Items the consumer took: they count against the queue's bound until this is dropped.
#[derive(Debug)]
pub struct Taken<T> {
    items: Vec<T>,
    count: usize,
    shared: Arc<Shared<T>>,
}

impl<T> Taken<T> {
    /// The items, releasing their places in the queue.
    pub fn into_items(mut self) -> Vec<T> {
        std::mem::take(&mut self.items)
    }
}

impl<T> std::ops::Deref for Taken<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.items
    }
}

impl<T> Drop for Taken<T> {
    fn drop(&mut self) {
        let mut state = self.shared.state.lock();
        state.taken = state.taken.saturating_sub(self.count);
    }
}
