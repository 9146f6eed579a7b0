//! [`WriteQueue`]: the state writer's queue (`state_writer.rs`), bounded, whose one consumer
//! *gathers*: once an item is queued it waits for more, up to a window, before taking them.
//!
//! Why: nothing waits for a write-behind batch (`apply` returns once its batch is queued), yet
//! each sled batch costs an atomic sled write (sled seals and writes its log buffer on one of
//! its IO threads) and an `fdatasync` of the files the batch points into, and each wake of the
//! writer's thread costs a context switch. A sync publisher to an R3 stream queued one batch
//! per message on every node: a tenth of the nodes' CPU per publish went to those writes and
//! wake-ups, on a machine where three nodes share two cores. Gathering for a few milliseconds
//! turns them into one write per window, and the writer's thread wakes once per window.
//!
//! The consumer takes at once, without waiting out the window, when someone waits for the
//! queue (an *urgent* item: a flush), when a batch's worth of items is queued, or when the
//! queue is closed. A producer wakes the consumer only when that changes what it waits for:
//! the first item after an idle wait, the item that fills a batch, an urgent item.
//!
//! Not `gather.rs`'s rule: that one serves stages whose every item has a waiter (a publish's
//! PubAck), so a lone item goes at once; here no item has one until a flush comes, so a fixed
//! window is free.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// The queue was closed: nothing more is taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the write queue is closed")]
pub struct Closed;

/// What the consumer is doing, so a producer knows whether its item needs a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Consumer {
    /// Waiting for a first item.
    Idle,
    /// Has items, waiting for more until the window ends.
    Gathering,
    /// Handling what it took; looks at the queue again when done.
    Busy,
}

struct State<T> {
    items: VecDeque<T>,
    /// Urgent items among `items`.
    urgent: usize,
    closed: bool,
    consumer: Consumer,
}

/// A bounded queue with one gathering consumer. See the module docs.
pub struct WriteQueue<T> {
    state: Mutex<State<T>>,
    /// The consumer waits here.
    work: Condvar,
    /// Producers wait here while the queue is full.
    room: Condvar,
    capacity: usize,
    batch: usize,
    window: Duration,
}

impl<T> WriteQueue<T> {
    /// A queue holding at most `capacity` items, taken at most `batch` at a time, each take
    /// waiting at most `window` for a batch's worth once an item is there.
    pub fn new(capacity: usize, batch: usize, window: Duration) -> WriteQueue<T> {
        assert!(
            batch >= 1 && capacity >= batch,
            "a batch must fit the queue"
        );
        WriteQueue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                urgent: 0,
                closed: false,
                consumer: Consumer::Busy,
            }),
            work: Condvar::new(),
            room: Condvar::new(),
            capacity,
            batch,
            window,
        }
    }

    /// Queue `item` behind everything queued, waiting while the queue is full. An `urgent`
    /// item ends the consumer's gathering.
    pub fn push(&self, item: T, urgent: bool) -> Result<(), Closed> {
        let mut state = self.state.lock();
        while state.items.len() >= self.capacity && !state.closed {
            self.room.wait(&mut state);
        }
        if state.closed {
            return Err(Closed);
        }
        state.items.push_back(item);
        state.urgent += usize::from(urgent);
        let wake = match state.consumer {
            Consumer::Idle => true,
            Consumer::Gathering => urgent || state.items.len() >= self.batch,
            Consumer::Busy => false,
        };
        drop(state);
        if wake {
            self.work.notify_one();
        }
        Ok(())
    }

    /// Take up to a batch of items from the front, in queue order: waits for a first item,
    /// then gathers (see the module docs). `None` once the queue is closed and empty.
    /// `is_urgent` tells which taken items were pushed urgent. For the one consumer.
    pub fn take(&self, is_urgent: impl Fn(&T) -> bool) -> Option<Vec<T>> {
        let mut state = self.state.lock();
        while state.items.is_empty() && !state.closed {
            state.consumer = Consumer::Idle;
            self.work.wait(&mut state);
        }
        if state.items.is_empty() {
            state.consumer = Consumer::Busy;
            return None;
        }
        let deadline = Instant::now() + self.window;
        while state.items.len() < self.batch && state.urgent == 0 && !state.closed {
            state.consumer = Consumer::Gathering;
            if self.work.wait_until(&mut state, deadline).timed_out() {
                break;
            }
        }
        state.consumer = Consumer::Busy;
        let n = state.items.len().min(self.batch);
        let taken: Vec<T> = state.items.drain(..n).collect();
        state.urgent -= taken.iter().filter(|item| is_urgent(item)).count();
        drop(state);
        self.room.notify_all();
        Some(taken)
    }

    /// Take nothing more in; the consumer takes what is queued without gathering, then gets
    /// `None`. Producers waiting for room get [`Closed`].
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.work.notify_all();
        self.room.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::thread;

    const LONG: Duration = Duration::from_secs(600);

    fn urgent(item: &u32) -> bool {
        *item >= 1000
    }

    #[test]
    fn a_full_batch_is_taken_without_waiting_out_the_window() {
        let queue = WriteQueue::new(8, 3, LONG);
        for i in 0..5 {
            queue.push(i, false).unwrap();
        }
        // A window of ten minutes: returning at all shows the take did not wait for it.
        assert_eq!(queue.take(urgent).unwrap(), vec![0, 1, 2]);
    }

    #[test]
    fn an_urgent_item_ends_the_gathering_of_the_items_before_it() {
        let queue = Arc::new(WriteQueue::new(8, 4, LONG));
        queue.push(1, false).unwrap();
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || queue.take(urgent).unwrap())
        };
        // Wait until the consumer gathers, then the urgent item must wake it.
        while queue.state.lock().consumer != Consumer::Gathering {
            thread::yield_now();
        }
        queue.push(1000, true).unwrap();
        assert_eq!(consumer.join().unwrap(), vec![1, 1000]);
        assert_eq!(
            queue.state.lock().urgent,
            0,
            "the urgent count follows the take"
        );
    }

    #[test]
    fn a_lone_item_waits_for_the_window_then_is_taken() {
        let window = Duration::from_millis(20);
        let queue = WriteQueue::new(8, 4, window);
        let started = Instant::now();
        queue.push(7, false).unwrap();
        assert_eq!(queue.take(urgent).unwrap(), vec![7]);
        assert!(started.elapsed() >= window, "taken before its window ended");
    }

    #[test]
    fn a_full_queue_holds_the_producer_until_a_take_makes_room() {
        let queue = Arc::new(WriteQueue::new(2, 2, LONG));
        queue.push(1, false).unwrap();
        queue.push(2, false).unwrap();
        let producer = {
            let queue = queue.clone();
            thread::spawn(move || queue.push(3, false))
        };
        assert_eq!(queue.take(urgent).unwrap(), vec![1, 2]);
        producer.join().unwrap().unwrap();
        queue.close();
        assert_eq!(queue.take(urgent).unwrap(), vec![3]);
    }

    #[test]
    fn close_drains_what_is_queued_then_ends_and_refuses_more() {
        let queue = Arc::new(WriteQueue::new(8, 4, LONG));
        let consumer = {
            let queue = queue.clone();
            thread::spawn(move || {
                let mut seen = Vec::new();
                while let Some(items) = queue.take(urgent) {
                    seen.extend(items);
                }
                seen
            })
        };
        queue.push(1, false).unwrap();
        queue.push(2, false).unwrap();
        queue.close();
        assert_eq!(queue.push(3, false), Err(Closed));
        assert_eq!(consumer.join().unwrap(), vec![1, 2]);
    }
}
