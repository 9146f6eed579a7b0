//! The gather rule: how long a stage that packs queued work into one Raft entry waits for more
//! before closing the entry. One rule for both stages that gather — the stream ingest
//! (`jetstream/publish.rs`, publishes into one batch of appends) and the
//! `ProposalBatcher` (`consensus/batcher.rs`: proposals into one entry).
//!
//! The rule, "while bursty, until quiet": a lone item after a lone item goes out at once (a
//! sync publisher, an idle group pays no delay). While items come in bursts — the batch being
//! gathered or the previous one holds more than one — the stage keeps taking them as long as
//! they arrive less than [`GATHER_IDLE`] apart, for at most [`GATHER_MAX`]. Gathering costs
//! tens of microseconds; a burst split over two entries waits for two fsyncs (milliseconds
//! each) before its last answer, because openraft appends one entry of a group per log flush.
//!
//! ```ignore
//! let mut gathering = bursts.start();
//! loop {
//!     take_what_is_queued(&mut batch);
//!     if batch_is_full || !gathering.pause_for_more(batch.len()).await { break; }
//! }
//! bursts.record(batch.len());
//! ```

use std::time::{Duration, Instant};

/// A burst is over once no item arrived for this long.
pub const GATHER_IDLE: Duration = Duration::from_micros(100);
/// The longest a batch gathers.
pub const GATHER_MAX: Duration = Duration::from_millis(2);

/// What a gathering stage remembers between batches: whether the last batch was a burst.
/// One per gathering task.
#[derive(Debug, Default)]
pub struct Bursts {
    last_batch_len: usize,
}

impl Bursts {
    /// Starts gathering one batch (its first item already taken).
    pub fn start(&self) -> Gathering {
        Gathering {
            started: Instant::now(),
            pauses: 0,
            taken_at_last_pause: 0,
            last_batch_was_burst: self.last_batch_len > 1,
        }
    }

    /// Records the size of the batch just closed, for the next batch's [`Bursts::start`].
    pub fn record(&mut self, batch_len: usize) {
        self.last_batch_len = batch_len;
    }
}

/// One batch being gathered (see the module doc).
#[derive(Debug)]
pub struct Gathering {
    started: Instant,
    pauses: u32,
    taken_at_last_pause: usize,
    last_batch_was_burst: bool,
}

impl Gathering {
    /// Called after taking everything queued, with the batch's size now (the caller closes a
    /// full batch itself). Pauses [`GATHER_IDLE`] and returns true if the batch should take
    /// what arrived meanwhile; false when it should close: not a burst, the burst went quiet
    /// over the last pause, or it has gathered for [`GATHER_MAX`].
    pub async fn pause_for_more(&mut self, taken: usize) -> bool {
        if !self.another_pause(taken, self.started.elapsed()) {
            return false;
        }
        // A short, precise pause that leaves the cores to others, one thread for every
        // pausing task (`fine_pause.rs`).
        super::fine_pause::pause(GATHER_IDLE).await;
        true
    }

    /// The rule itself, `elapsed` since the batch started: whether to pause once more
    /// (recording the pause).
    fn another_pause(&mut self, taken: usize, elapsed: Duration) -> bool {
        let bursty = taken > 1 || self.last_batch_was_burst;
        let quiet = self.pauses > 0 && taken == self.taken_at_last_pause;
        if !bursty || quiet || elapsed >= GATHER_MAX {
            return false;
        }
        self.pauses += 1;
        self.taken_at_last_pause = taken;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EARLY: Duration = Duration::ZERO;

    #[test]
    fn a_lone_item_after_a_lone_batch_closes_at_once() {
        let bursts = Bursts::default();
        assert!(!bursts.start().another_pause(1, EARLY));
    }

    #[test]
    fn a_burst_gathers_until_a_pause_brings_nothing() {
        let mut bursts = Bursts::default();
        let mut gathering = bursts.start();
        assert!(gathering.another_pause(2, EARLY));
        assert!(gathering.another_pause(3, EARLY));
        assert!(
            !gathering.another_pause(3, EARLY),
            "quiet over the last pause"
        );
        bursts.record(3);
        // After a burst even a lone item waits one pause for company.
        let mut next = bursts.start();
        assert!(next.another_pause(1, EARLY));
        assert!(!next.another_pause(1, EARLY));
    }

    #[test]
    fn a_burst_closes_after_gather_max() {
        let mut gathering = Bursts::default().start();
        assert!(gathering.another_pause(2, EARLY));
        assert!(!gathering.another_pause(5, GATHER_MAX));
    }

    #[tokio::test]
    async fn pausing_for_more_returns_after_a_pause() {
        let mut gathering = Bursts::default().start();
        assert!(gathering.pause_for_more(2).await);
        assert!(
            !gathering.pause_for_more(1).await,
            "a lone item closes at once"
        );
    }
}
