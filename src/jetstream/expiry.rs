//! `max_age`: one task per node (a task per stream cost each idle stream a task; issue 15)
//! proposes `Expire { now }` to each stream this node leads once its oldest message is due to
//! expire, so every replica removes the same messages at the same log position. The task
//! keeps each stream's next due time in one ordered set and sleeps until the earliest; an
//! applied entry (a new first message, a config change) makes it read that stream's due time
//! again. Leadership (`leadership::start_serving`) adds a stream and cancels it when it ends.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::node_task::NodeTask;
use super::stream::StreamHandle;
use crate::jscore::group::StreamCommand;
use crate::server::ServerShared;

/// Expiry is not worth a proposal more often than this.
const MIN_INTERVAL: Duration = Duration::from_millis(50);
/// How long a stream waits after a failed expiry proposal.
const RETRY_AFTER: Duration = Duration::from_secs(1);

type Added = (Arc<StreamHandle>, CancellationToken);

/// The node's one expiry task, started by the first stream it follows.
#[derive(Debug, Default)]
pub(super) struct Expiry {
    task: NodeTask<Added>,
}

impl Expiry {
    /// Expires `stream`'s messages as they come due, until `stop`.
    pub(super) fn follow(
        &self,
        shared: &Arc<ServerShared>,
        stream: &Arc<StreamHandle>,
        stop: CancellationToken,
    ) {
        self.task.send(shared, (stream.clone(), stop), |added| {
            run(added, shared.shutdown.clone())
        });
    }
}

/// A followed stream.
struct Expiring {
    stream: Arc<StreamHandle>,
    /// An `Expire` of this stream is being proposed: no other until it returns.
    proposing: bool,
    /// After a failed proposal: no new one before this.
    not_before: Option<Instant>,
}

async fn run(mut added: mpsc::UnboundedReceiver<Added>, shutdown: CancellationToken) {
    let mut streams: HashMap<u64, Expiring> = HashMap::new();
    let mut due = Deadlines::default();
    let mut applies = FuturesUnordered::new();
    let mut proposals = FuturesUnordered::<BoxFuture<'static, (u64, bool)>>::new();
    let mut next_id = 0u64;
    loop {
        let first = due.first();
        tokio::select! {
            _ = shutdown.cancelled() => return,
            next = added.recv() => {
                let Some((stream, stop)) = next else { return };
                let id = next_id;
                next_id += 1;
                applies.push(next_apply(id, stream.view().applied(), stop));
                let expiring = Expiring { stream, proposing: false, not_before: None };
                due.set(id, due_at(&expiring));
                streams.insert(id, expiring);
            }
            Some((id, next)) = applies.next() => match next {
                Some((applied, stop)) => {
                    if let Some(expiring) = streams.get(&id) {
                        due.set(id, due_at(expiring));
                    }
                    applies.push(next_apply(id, applied, stop));
                }
                None => {
                    due.set(id, None);
                    streams.remove(&id);
                }
            },
            Some((id, failed)) = proposals.next() => {
                if let Some(expiring) = streams.get_mut(&id) {
                    expiring.proposing = false;
                    expiring.not_before = failed.then(|| Instant::now() + RETRY_AFTER);
                    due.set(id, due_at(expiring));
                }
            }
            _ = sleep_until(first) => {
                for id in due.take_due(Instant::now()) {
                    if let Some(expiring) = streams.get_mut(&id) {
                        expiring.proposing = true;
                        proposals.push(Box::pin(expire(id, expiring.stream.clone())));
                    }
                }
            }
        }
    }
}

/// When `expiring` should be proposed to next, if at all.
fn due_at(expiring: &Expiring) -> Option<Instant> {
    if expiring.proposing {
        return None;
    }
    let at = expiring
        .stream
        .view()
        .read(|group| group.stream().next_expiry_at())?;
    let wait = Duration::from_nanos(at.saturating_sub(super::now_nanos()).max(0) as u64);
    let at = Instant::now() + wait.max(MIN_INTERVAL);
    Some(
        expiring
            .not_before
            .map_or(at, |not_before| at.max(not_before)),
    )
}

/// Waits for stream `id`'s next applied entry; None once `stop` is cancelled or the group
/// is gone.
async fn next_apply(
    id: u64,
    mut applied: watch::Receiver<u64>,
    stop: CancellationToken,
) -> (u64, Option<(watch::Receiver<u64>, CancellationToken)>) {
    let changed = tokio::select! {
        _ = stop.cancelled() => false,
        changed = applied.changed() => changed.is_ok(),
    };
    (id, changed.then_some((applied, stop)))
}

/// Proposes an expiry of stream `id` now; true if it failed.
async fn expire(id: u64, stream: Arc<StreamHandle>) -> (u64, bool) {
    let now = super::now_nanos();
    let result = stream
        .propose_one(StreamCommand::Expire { now_nanos: now })
        .await;
    if let Err(error) = &result {
        tracing::warn!(stream = stream.name(), "expiry failed: {error}");
    }
    (id, result.is_err())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Each followed stream's next due time, in order.
#[derive(Debug, Default)]
struct Deadlines {
    by_id: HashMap<u64, Instant>,
    ordered: BTreeSet<(Instant, u64)>,
}

impl Deadlines {
    /// Sets (or, with None, clears) stream `id`'s due time.
    fn set(&mut self, id: u64, at: Option<Instant>) {
        if let Some(old) = self.by_id.remove(&id) {
            self.ordered.remove(&(old, id));
        }
        if let Some(at) = at {
            self.by_id.insert(id, at);
            self.ordered.insert((at, id));
        }
    }

    fn first(&self) -> Option<Instant> {
        self.ordered.first().map(|(at, _)| *at)
    }

    /// Removes and returns the streams due at `now`.
    fn take_due(&mut self, now: Instant) -> Vec<u64> {
        let mut ids = Vec::new();
        while let Some(&(at, id)) = self.ordered.first() {
            if at > now {
                break;
            }
            self.ordered.pop_first();
            self.by_id.remove(&id);
            ids.push(id);
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deadlines_come_due_in_order_and_a_reset_replaces_the_old_time() {
        let now = Instant::now();
        let mut due = Deadlines::default();
        due.set(1, Some(now + Duration::from_secs(3)));
        due.set(2, Some(now + Duration::from_secs(1)));
        due.set(3, Some(now + Duration::from_secs(2)));
        due.set(3, Some(now + Duration::from_secs(5)));
        due.set(4, Some(now));
        due.set(4, None);
        assert_eq!(due.first(), Some(now + Duration::from_secs(1)));
        assert_eq!(due.take_due(now), Vec::<u64>::new());
        assert_eq!(due.take_due(now + Duration::from_secs(3)), vec![2, 1]);
        assert_eq!(due.first(), Some(now + Duration::from_secs(5)));
        assert_eq!(due.take_due(now + Duration::from_secs(9)), vec![3]);
        assert_eq!(due.first(), None);
    }
}
