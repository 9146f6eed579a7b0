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
//!
//! Callers on a tokio task wait without a thread ([`SyncGate::run_async`]): only the one that
//! runs a sync takes one from the blocking pool. When the log's budget asked hundreds of
//! groups to snapshot at once, each used to wait on a pool thread, and the pool grew to
//! ~400 threads that kept their allocator caches for 10 s (`bench/HISTORY.md`, "a thread
//! per waiter").

use std::io;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct SyncGate {
    state: Mutex<Gate>,
    /// Wakes the blocking waiters of [`SyncGate::run`] when a sync ends.
    done: Condvar,
    /// Wakes the waiters of [`SyncGate::run_async`] when a sync ends.
    done_async: Notify,
}

/// What a caller found at the gate.
enum Turn {
    Covered,
    Wait,
    /// Run the sync numbered so.
    Run(u64),
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
    pub fn run(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let mut gate = self.state.lock();
        // The first sync to start from now on covers this call.
        let covering = gate.started + 1;
        loop {
            match gate.turn(covering) {
                Turn::Covered => return Ok(()),
                Turn::Wait => self.done.wait(&mut gate),
                Turn::Run(mine) => {
                    drop(gate);
                    // `mine` started after this call began: its outcome is this call's.
                    return self.finish(mine, sync());
                }
            }
        }
    }

    /// As [`SyncGate::run`], but waiting on the task rather than on a thread; a sync this
    /// caller runs goes to the blocking pool, and ends (and wakes the others) even if this
    /// future is dropped meanwhile.
    pub async fn run_async(
        self: &Arc<Self>,
        sync: impl FnOnce() -> io::Result<()> + Send + 'static,
    ) -> io::Result<()> {
        let covering = self.state.lock().started + 1;
        loop {
            // Registered before the gate is read, so a sync ending in between still wakes it.
            let ended = self.done_async.notified();
            tokio::pin!(ended);
            ended.as_mut().enable();
            let turn = self.state.lock().turn(covering);
            match turn {
                Turn::Covered => return Ok(()),
                Turn::Wait => ended.await,
                Turn::Run(mine) => {
                    let gate = self.clone();
                    return tokio::task::spawn_blocking(move || gate.finish(mine, sync()))
                        .await
                        .map_err(io::Error::other)?;
                }
            }
        }
    }

    /// Records the outcome of sync `mine` and wakes every waiter.
    fn finish(&self, mine: u64, result: io::Result<()>) -> io::Result<()> {
        let mut gate = self.state.lock();
        gate.running = false;
        if result.is_ok() {
            gate.succeeded = mine;
        }
        drop(gate);
        self.done.notify_all();
        self.done_async.notify_waiters();
        result
    }
}

impl Gate {
    /// What a caller covered by the first sync numbered `covering` or later does now; a
    /// caller told to run one has it marked running.
    fn turn(&mut self, covering: u64) -> Turn {
        if self.succeeded >= covering {
            return Turn::Covered;
        }
        if self.running {
            return Turn::Wait;
        }
        self.started += 1;
        self.running = true;
        Turn::Run(self.started)
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn async_and_blocking_callers_share_syncs_and_are_each_covered() {
        let gate = Arc::new(SyncGate::default());
        let written = Arc::new(AtomicU64::new(0));
        let durable = Arc::new(AtomicU64::new(0));
        let runs = Arc::new(AtomicU64::new(0));
        let sync = {
            let (written, durable, runs) = (written.clone(), durable.clone(), runs.clone());
            move || {
                let seen = written.load(Ordering::SeqCst);
                runs.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(300));
                durable.fetch_max(seen, Ordering::SeqCst);
                Ok(())
            }
        };
        let tasks: Vec<_> = (0..200u64)
            .map(|i| {
                let (gate, written, durable, sync) =
                    (gate.clone(), written.clone(), durable.clone(), sync.clone());
                tokio::spawn(async move {
                    let mine = written.fetch_add(1, Ordering::SeqCst) + 1;
                    if i % 10 == 0 {
                        tokio::task::spawn_blocking(move || gate.run(sync))
                            .await
                            .unwrap()
                            .unwrap();
                    } else {
                        gate.run_async(sync).await.unwrap();
                    }
                    assert!(
                        durable.load(Ordering::SeqCst) >= mine,
                        "write {mine} not covered"
                    );
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let runs = runs.load(Ordering::SeqCst);
        assert!(runs < 200, "{runs} syncs for 200 calls");
    }

    #[tokio::test]
    async fn an_async_caller_dropped_while_its_sync_runs_does_not_stall_the_gate() {
        let gate = Arc::new(SyncGate::default());
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let first = {
            let gate = gate.clone();
            tokio::spawn(async move {
                gate.run_async(move || {
                    started_tx.send(()).unwrap();
                    release_rx.recv().unwrap();
                    Ok(())
                })
                .await
            })
        };
        tokio::task::spawn_blocking(move || started_rx.recv().unwrap())
            .await
            .unwrap();
        first.abort();
        release_tx.send(()).unwrap();
        let runs = Arc::new(AtomicU64::new(0));
        let counted = runs.clone();
        gate.run_async(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .await
        .unwrap();
        assert_eq!(
            runs.load(Ordering::SeqCst),
            1,
            "a later caller runs its own sync"
        );
    }
}
