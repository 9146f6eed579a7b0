//! [`SyncGate`]: callers that each need "everything written before my call is durable" share
//! one sync instead of running one each, as a write-ahead log's group commit does.
//!
//! A sync that starts after a caller arrived covers that caller: everything it wrote was
//! queued before the sync began. So a caller that finds a sync running waits for it to end,
//! then for the next one, which it runs itself unless another waiter already does. One that
//! finds none running runs one at once. A failed sync covers nobody: its waiters try again.
//!
//! Why (issue 16): every group's snapshot syncs sled (`StateDb::sync`: a flush and at least
//! two fsyncs). With 1000 streams taking messages, a few dozen groups snapshot each second,
//! each paying its own fsyncs on the blocking pool, beside the log's own.

use std::io;

use parking_lot::{Condvar, Mutex};

#[derive(Debug, Default)]
pub struct SyncGate {
    state: Mutex<Gate>,
    done: Condvar,
}

#[derive(Debug, Default)]
struct Gate {
    /// Syncs started so far; the last one is running when `running`.
    started: u64,
    running: bool,
    /// The latest sync that completed without an error.
    succeeded: u64,
}

impl SyncGate {
    /// Returns once a sync (`sync`, run by this caller or another) that started after this
    /// call began has succeeded, or with the error of the one this caller ran. Blocking.
    pub fn run(&self, sync: impl Fn() -> io::Result<()>) -> io::Result<()> {
        let mut gate = self.state.lock();
        // The first sync to start from now on covers this call.
        let covering = gate.started + 1;
        loop {
            if gate.succeeded >= covering {
                return Ok(());
            }
            if gate.running {
                self.done.wait(&mut gate);
                continue;
            }
            gate.started += 1;
            gate.running = true;
            let mine = gate.started;
            drop(gate);
            let result = sync();
            gate = self.state.lock();
            gate.running = false;
            if result.is_ok() {
                gate.succeeded = mine;
            }
            self.done.notify_all();
            // `mine` started after this call began: its outcome is this call's.
            return result;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Barrier};

    use super::*;

    #[test]
    fn callers_share_syncs_and_each_is_covered_by_one_started_after_it() {
        let gate = Arc::new(SyncGate::default());
        // `written`: what callers wrote; `durable`: what the last sync saw when it started.
        let written = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let runs = Arc::new(AtomicU64::new(0));
        let callers = 16;
        let barrier = Arc::new(Barrier::new(callers));
        let threads: Vec<_> = (0..callers)
            .map(|_| {
                let (gate, written, durable, runs, barrier) = (
                    gate.clone(),
                    written.clone(),
                    durable.clone(),
                    runs.clone(),
                    barrier.clone(),
                );
                std::thread::spawn(move || {
                    barrier.wait();
                    for _ in 0..50 {
                        let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                        gate.run(|| {
                            let seen = written.load(Ordering::SeqCst);
                            runs.fetch_add(1, Ordering::SeqCst);
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            durable.fetch_max(seen, Ordering::SeqCst);
                            Ok(())
                        })
                        .unwrap();
                        assert!(
                            durable.load(Ordering::SeqCst) >= mine,
                            "write {mine} not covered"
                        );
                    }
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let runs = runs.load(Ordering::SeqCst);
        assert!(runs < 16 * 50, "{runs} syncs for {} calls", 16 * 50);
    }

    #[test]
    fn a_failed_sync_covers_nobody_and_its_caller_gets_the_error() {
        let gate = SyncGate::default();
        let error = gate.run(|| Err(io::Error::other("disk full")));
        assert_eq!(error.unwrap_err().to_string(), "disk full");
        let runs = AtomicU64::new(0);
        gate.run(|| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the next call syncs again");
    }
}
