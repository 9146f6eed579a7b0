//! [`logged_if_slow`]: awaits a step that should take milliseconds, and logs a warning naming
//! it each [`SLOW_STEP`] it is still pending, so a stream delete or a group stop that never
//! ends says where it waits instead of leaving a client's request to time out in silence.
//!
//! Why: a CI run once saw every `STREAM.DELETE` of a single node go unanswered for 240 s,
//! and nothing in the node's log told which of the steps behind the reply (the meta
//! proposal, the serialized reconciliation, the group's stop, its log and state removal) it
//! was waiting in.

use std::future::Future;
use std::time::Duration;

/// How long a step may be pending before each warning.
pub const SLOW_STEP: Duration = Duration::from_secs(10);

/// Awaits `step`; while it is pending, logs a warning each [`SLOW_STEP`] naming `what` of
/// `group` and how long it has waited. The step itself is never cut short.
pub async fn logged_if_slow<F: Future>(group: u64, what: &'static str, step: F) -> F::Output {
    logged_if_slow_every(group, what, SLOW_STEP, step).await
}

/// [`logged_if_slow`] with warnings each `every`.
pub async fn logged_if_slow_every<F: Future>(
    group: u64,
    what: &'static str,
    every: Duration,
    step: F,
) -> F::Output {
    tokio::pin!(step);
    let started = tokio::time::Instant::now();
    loop {
        match tokio::time::timeout(every, &mut step).await {
            Ok(output) => {
                let waited = started.elapsed();
                if waited >= every {
                    tracing::warn!(group, step = what, ?waited, "slow step done");
                }
                return output;
            }
            Err(_) => {
                tracing::warn!(group, step = what, waited = ?started.elapsed(), "step still pending");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_step_runs_to_its_end_however_long_it_takes() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let waiting = tokio::spawn(logged_if_slow_every(
            7,
            "a test step",
            Duration::from_millis(10),
            rx,
        ));
        // Many warning periods pass; the step is still awaited, not abandoned.
        for _ in 0..10 {
            tokio::time::advance(Duration::from_millis(10)).await;
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished());
        tx.send(42).unwrap();
        assert_eq!(waiting.await.unwrap().unwrap(), 42);
    }

    #[tokio::test]
    async fn a_quick_step_returns_its_output() {
        assert_eq!(logged_if_slow(1, "quick", async { 5 }).await, 5);
    }
}
