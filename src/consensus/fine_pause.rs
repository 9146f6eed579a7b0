//! [`pause`]: a short, precise pause (around a hundred microseconds) for any number of tasks
//! at once, kept by one thread per process.
//!
//! Why: tokio's timers tick in milliseconds, too coarse for the gather rule's pause
//! (`gather.rs`), and spinning would take a core from the clients being waited for. Each
//! pause used to sleep on a thread of tokio's blocking pool. With 1000 streams written at
//! once, up to 1000 ingest and batcher tasks paused together, and the pool grew to ~400
//! threads. Each kept its allocator's thread cache and sled's deferred frees until the pool
//! let it go, 10 s after its last task. jemalloc counted 111 MB of a node's live heap
//! released in the second those threads exited, after 3 M messages over 1000 streams
//! (`bench/HISTORY.md`, "a thread per pause"). One thread now wakes every due pause.
//!
//! The thread is started on first use and lives as long as the process: it sleeps until the
//! earliest pause is due, or until a new pause is due earlier than that. A pause whose task
//! was dropped is simply not heard.

use std::cmp::Ordering;
use std::collections::binary_heap::PeekMut;
use std::collections::BinaryHeap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use tokio::sync::oneshot;

/// Waits `duration`, or a little more (the kernel's timer slack, ~50 µs). Falls back to
/// tokio's timer (millisecond ticks) if the pausing thread could not be started.
pub async fn pause(duration: Duration) {
    let Some(pauses) = pauses() else {
        tokio::time::sleep(duration).await;
        return;
    };
    let (wake, woken) = oneshot::channel();
    let earliest = pauses.queue.lock().push(Instant::now() + duration, wake);
    if earliest {
        pauses.changed.notify_one();
    }
    let _ = woken.await;
}

/// The process's pausing thread and what it waits for.
struct Pauses {
    queue: Mutex<DueQueue<oneshot::Sender<()>>>,
    /// Signalled when a pause due before every other is queued.
    changed: Condvar,
}

fn pauses() -> Option<&'static Pauses> {
    static PAUSES: OnceLock<Option<&'static Pauses>> = OnceLock::new();
    *PAUSES.get_or_init(|| {
        let pauses: &'static Pauses = Box::leak(Box::new(Pauses {
            queue: Mutex::new(DueQueue::default()),
            changed: Condvar::new(),
        }));
        match std::thread::Builder::new()
            .name("jetraft-pause".into())
            .spawn(move || run(pauses))
        {
            Ok(_) => Some(pauses),
            Err(e) => {
                tracing::warn!("cannot start the pausing thread ({e}); pauses use tokio's timer");
                None
            }
        }
    })
}

fn run(pauses: &Pauses) {
    let mut due = Vec::new();
    let mut queue = pauses.queue.lock();
    loop {
        queue.take_due(Instant::now(), &mut due);
        if !due.is_empty() {
            drop(queue);
            for wake in due.drain(..) {
                let _ = wake.send(());
            }
            queue = pauses.queue.lock();
            continue;
        }
        match queue.next_due() {
            Some(at) => {
                pauses.changed.wait_until(&mut queue, at);
            }
            None => pauses.changed.wait(&mut queue),
        }
    }
}

/// Items due at given instants, earliest first (ties in the order queued). Pure.
#[derive(Debug)]
struct DueQueue<T> {
    heap: BinaryHeap<Due<T>>,
    queued: u64,
}

impl<T> Default for DueQueue<T> {
    fn default() -> Self {
        DueQueue {
            heap: BinaryHeap::new(),
            queued: 0,
        }
    }
}

impl<T> DueQueue<T> {
    /// Queues `item` for `at`; true if it is now due before every other item.
    fn push(&mut self, at: Instant, item: T) -> bool {
        let earliest = self.next_due().is_none_or(|next| at < next);
        self.queued += 1;
        self.heap.push(Due {
            at,
            order: self.queued,
            item,
        });
        earliest
    }

    fn next_due(&self) -> Option<Instant> {
        self.heap.peek().map(|due| due.at)
    }

    /// Moves every item due at or before `now` to `out`, earliest first.
    fn take_due(&mut self, now: Instant, out: &mut Vec<T>) {
        while let Some(earliest) = self.heap.peek_mut() {
            if earliest.at > now {
                break;
            }
            out.push(PeekMut::pop(earliest).item);
        }
    }
}

/// One queued item; ordered so that `BinaryHeap`'s greatest is the earliest due.
#[derive(Debug)]
struct Due<T> {
    at: Instant,
    order: u64,
    item: T,
}

impl<T> Due<T> {
    fn key(&self) -> (Instant, u64) {
        (self.at, self.order)
    }
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Due<T> {}

impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Due<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_come_out_earliest_first_and_only_when_due() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut queue = DueQueue::default();
        assert!(
            queue.push(t0 + ms(5), "c"),
            "the first item is the earliest"
        );
        assert!(queue.push(t0 + ms(1), "a"), "due before c");
        assert!(!queue.push(t0 + ms(3), "b"), "not before a");
        assert!(!queue.push(t0 + ms(1), "a2"), "a tie is not earlier");
        assert_eq!(queue.next_due(), Some(t0 + ms(1)));

        let mut out = Vec::new();
        queue.take_due(t0, &mut out);
        assert!(out.is_empty(), "nothing is due yet");
        queue.take_due(t0 + ms(3), &mut out);
        assert_eq!(out, ["a", "a2", "b"], "earliest first, ties in queue order");
        assert_eq!(queue.next_due(), Some(t0 + ms(5)));
        out.clear();
        queue.take_due(t0 + ms(60), &mut out);
        assert_eq!(out, ["c"]);
        assert_eq!(queue.next_due(), None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_pauses_at_once_each_last_at_least_their_duration() {
        let tasks: Vec<_> = (0..2000u64)
            .map(|i| {
                let duration = Duration::from_micros(50 + (i % 7) * 100);
                tokio::spawn(async move {
                    let begun = Instant::now();
                    pause(duration).await;
                    (begun.elapsed(), duration)
                })
            })
            .collect();
        for task in tasks {
            let (paused, duration) = task.await.unwrap();
            assert!(paused >= duration, "{paused:?} < {duration:?}");
        }
    }

    #[tokio::test]
    async fn a_dropped_pause_does_not_stop_the_others() {
        let dropped = tokio::spawn(pause(Duration::from_millis(1)));
        dropped.abort();
        pause(Duration::from_micros(200)).await;
        pause(Duration::from_micros(100)).await;
    }
}
