//! `IngestProgress`: how far a stream's ingest task got with the publishes queued for it, so
//! that a request arriving after a publish sees the publish.
//!
//! A publish and a later request on the same connection reach a stream by two roads: the
//! publish through the stream's ingest queue (`publish.rs`), the request through the API
//! inbox. nats-server stores a publish to a one-replica stream in the publisher's read loop,
//! before it reads the connection's next message; its clients rely on that, e.g. twenty
//! publishes whose acks are not awaited, then `CONSUMER.CREATE` and a `no_wait` fetch that
//! expects the twenty, or a republish target read right after the origin's PubAck.
//!
//! So the ingest subscriber counts every publish it queues (`queued`), and the ingest task
//! every publish it is done with (`settled`: applied and answered, refused, or staged as an
//! atomic batch member). A request takes the count queued when it is handled (`mark`) and
//! waits (`settled_to`) until the task settled that many: the publishes that came before it
//! on any connection are then applied (or answered with an error). The wait is bounded: a
//! task that stops with publishes still queued (its node stops leading) answers none of
//! them, and the request goes on without them.
//!
//! One per `StreamHandle`: two counters and a `Notify`, no task (ADR 0027).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Longest a request waits for the publishes queued before it.
pub const SETTLE_BOUND: Duration = Duration::from_secs(2);

#[derive(Debug, Default)]
pub struct IngestProgress {
    /// Publishes handed to the ingest task's queue (or counted as settled at once when the
    /// queue refused them).
    queued: AtomicU64,
    /// Publishes the ingest task is done with.
    settled: AtomicU64,
    settled_changed: Notify,
}

impl IngestProgress {
    /// A publish is about to enter the ingest queue: counted before it can be settled, so a
    /// mark taken after its hand-over covers it.
    pub fn queued(&self) {
        self.queued.fetch_add(1, Ordering::SeqCst);
    }

    /// The ingest task is done with `count` publishes (or the queue did not take them).
    pub fn settled(&self, count: u64) {
        if count == 0 {
            return;
        }
        self.settled.fetch_add(count, Ordering::SeqCst);
        self.settled_changed.notify_waiters();
    }

    /// What a request handled now must wait for.
    pub fn mark(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }

    /// Whether every publish counted by `mark` is settled.
    pub fn is_settled(&self, mark: u64) -> bool {
        self.settled.load(Ordering::SeqCst) >= mark
    }

    /// Waits until every publish counted by `mark` is settled, at most `bound`; false if the
    /// bound ran out first.
    pub async fn settled_to(&self, mark: u64, bound: Duration) -> bool {
        let waiting = async {
            loop {
                let changed = self.settled_changed.notified();
                if self.is_settled(mark) {
                    return;
                }
                changed.await;
            }
        };
        tokio::time::timeout(bound, waiting).await.is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_mark_waits_for_what_was_queued_before_it_only() {
        let progress = Arc::new(IngestProgress::default());
        assert!(progress.settled_to(progress.mark(), Duration::ZERO).await);
        progress.queued();
        progress.queued();
        let mark = progress.mark();
        progress.queued();
        assert!(!progress.is_settled(mark));
        let waiter = {
            let progress = progress.clone();
            tokio::spawn(async move { progress.settled_to(mark, Duration::from_secs(30)).await })
        };
        progress.settled(1);
        assert!(!progress.is_settled(mark));
        progress.settled(1);
        assert!(waiter.await.unwrap(), "woken once two were settled");
        assert!(!progress.is_settled(progress.mark()), "the third is not");
    }

    #[tokio::test]
    async fn the_wait_is_bounded() {
        let progress = IngestProgress::default();
        progress.queued();
        let mark = progress.mark();
        assert!(!progress.settled_to(mark, Duration::from_millis(50)).await);
    }
}
