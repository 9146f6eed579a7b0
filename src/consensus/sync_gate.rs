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

use parking_lot::{Condvar, Mutex, MutexGuard};
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
    /// A [`SyncGate::run_async`] caller handed a sync to the blocking pool, which has not
    /// taken it up yet: the other async callers wait for it rather than hand their own.
    handed: bool,
}

impl SyncGate {
    /// Returns once a sync (`sync`, run by this caller or another) that started after this
    /// call began has succeeded, or with the error of the one this caller ran. Blocking.
    pub fn run(&self, sync: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
        let gate = self.state.lock();
        // The first sync to start from now on covers this call.
        let covering = gate.started + 1;
        self.run_covering(gate, covering, sync)
    }

    fn run_covering(
        &self,
        mut gate: MutexGuard<'_, Gate>,
        covering: u64,
        sync: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        loop {
            match gate.turn(covering) {
                Turn::Covered => return Ok(()),
                Turn::Wait => self.done.wait(&mut gate),
                Turn::Run(mine) => {
                    drop(gate);
                    // `mine` started after this call began: its outcome is this call's. A
                    // sync that panics fails like one that errs: were `running` left set,
                    // every later caller (a snapshot build, a stream's removal) would wait
                    // for it forever.
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(sync))
                        .unwrap_or_else(|panic| {
                            let said = super::machine::panic_message(&*panic);
                            Err(io::Error::other(format!("the sync panicked: {said}")))
                        });
                    return self.finish(mine, outcome);
                }
            }
        }
    }

    /// As [`SyncGate::run`], but waiting on the task rather than on a thread. When no sync is
    /// running or about to, this caller hands one to the blocking pool and gets its outcome;
    /// it runs (and wakes the others) even if this future is dropped meanwhile.
    ///
    /// The gate counts a sync as running only once a pool thread runs it: were it marked
    /// before the pool took it up, a full pool of blocking [`run`](SyncGate::run) callers
    /// would wait for a sync that waits for one of their threads.
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
            let hand = {
                let mut gate = self.state.lock();
                if gate.succeeded >= covering {
                    return Ok(());
                }
                let hand = !gate.running && !gate.handed;
                gate.handed |= hand;
                hand
            };
            if hand {
                let this = self.clone();
                return tokio::task::spawn_blocking(move || {
                    let mut gate = this.state.lock();
                    gate.handed = false;
                    // Covers every caller that arrived before the pool took this up.
                    let covering = gate.started + 1;
                    this.run_covering(gate, covering, sync)
                })
                .await
                .map_err(io::Error::other)?;
            }
            ended.await;
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
    use std::time::Duration;

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
    fn a_sync_that_panics_fails_its_caller_and_the_next_caller_syncs_again() {
        let gate = SyncGate::default();
        let error = gate.run(|| panic!("sled said no")).unwrap_err();
        assert!(error.to_string().contains("sled said no"), "{error}");
        let runs = AtomicU64::new(0);
        gate.run(|| {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        })
        .unwrap();
        assert_eq!(runs.load(Ordering::SeqCst), 1, "the gate is free again");
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

    #[test]
    fn blocking_callers_filling_the_pool_do_not_wait_for_a_sync_still_queued_for_it() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .max_blocking_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let gate = Arc::new(SyncGate::default());
        let outcome = runtime.block_on(async {
            // Both pool threads taken by callers of the blocking `run`, held at a signal.
            let (ready_tx, ready_rx) = std::sync::mpsc::channel();
            let mut blockers = Vec::new();
            let mut gos = Vec::new();
            for _ in 0..2 {
                let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
                gos.push(go_tx);
                let (gate, ready) = (gate.clone(), ready_tx.clone());
                blockers.push(tokio::task::spawn_blocking(move || {
                    ready.send(()).unwrap();
                    go_rx.recv().unwrap();
                    gate.run(|| Ok(()))
                }));
            }
            for _ in 0..2 {
                ready_rx.recv_timeout(Duration::from_secs(10)).unwrap();
            }
            // An async caller hands its sync to the full pool, where it waits for a thread.
            let caller = {
                let gate = gate.clone();
                tokio::spawn(async move { gate.run_async(|| Ok(())).await })
            };
            let handed = tokio::time::timeout(Duration::from_secs(10), async {
                while !gate.state.lock().handed {
                    tokio::task::yield_now().await;
                }
            });
            handed.await.expect("the async caller hands its sync");
            for go in gos {
                go.send(()).unwrap();
            }
            tokio::time::timeout(Duration::from_secs(10), async {
                for blocker in blockers {
                    blocker.await.unwrap().unwrap();
                }
                caller.await.unwrap().unwrap();
            })
            .await
        });
        runtime.shutdown_timeout(Duration::from_secs(1));
        assert!(outcome.is_ok(), "the callers waited for each other");
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
