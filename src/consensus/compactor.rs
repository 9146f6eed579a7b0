//! [`Compactor`]: keeps every group's Raft log small, so that the write-ahead log holds only
//! what sled does not yet hold durably (docs/adr/0014-log-follows-the-state.md). One per node,
//! one task, shared by every group through [`NodeStorage`](super::NodeStorage).
//!
//! A group's state machine tells it, without blocking, how its log grew since the last
//! snapshot ([`LogGrowth`]); the compactor then, debounced per group:
//!
//! 1. triggers a snapshot (cheap: snapshots stay in sled, `state_machine/`), unless nothing
//!    was applied since the last one; a group that applied only a little since
//!    ([`Reason::Settle`]) waits until it has applied nothing for [`SETTLE_DELAY`] first, so
//!    that a group left alone holds no entries in memory while a busy one costs no extra
//!    rounds;
//! 2. once openraft reports it built, purges the log up to it (`Raft::trigger().purge_log`),
//!    except the entries a follower still needs while it lags by at most `keep_for_lagging`
//!    entries (one lagging further gets a snapshot anyway); the leader itself also never
//!    purges entries a replication is sending;
//! 3. when every group's unpurged entries together pass the node's budget (`log_budget.rs`),
//!    compacts the biggest logs soon, ahead of their own requests;
//! 4. after a removal (purge, limits, acked work-queue messages), lets sled give the removed
//!    keys' space back ([`StateDb::reclaim`]), node-wide and at most once per
//!    [`RECLAIM_EVERY`].
//!
//! Nothing here wakes a quiet group (ADR 0013): the triggers go to openraft directly, not
//! through the pacer, and a quiet group applies nothing, so it asks for nothing after its one
//! [`Reason::Idle`] compaction.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::store::log::LogEngine;

use super::log_budget::{relief, LOG_BUDGET_BYTES};
pub use super::log_growth::{
    LogGrowth, Reason, GROW_BYTES, IDLE_MIN_BYTES, REMOVED_KEYS, SETTLE_MIN_BYTES,
};
use super::log_position::{applied_count, position, purge_target, settled};
use super::state_db::StateDb;
use super::types::{GroupId, NodeId, Raft};

/// How long after its request an idle group compacts.
pub const IDLE_DELAY: Duration = Duration::from_secs(3);
/// How long a group that asks to settle ([`Reason::Settle`]) must have applied nothing before
/// it compacts: its applied index is looked at this long after the request, and again this
/// long after each look that found it moved.
pub const SETTLE_DELAY: Duration = Duration::from_secs(5);
/// How long after its request a grown group compacts: merges a burst of requests.
pub const SOON_DELAY: Duration = Duration::from_millis(50);
/// The least time between two snapshots of one group that the compactor triggers. The log's
/// entries stay in memory until purged: a stream taking 60 MB/s held up to a second of them
/// (and the RSS with them) at 1 s; at 250 ms a publish of 3 M x 1 KiB peaks 60 MB lower at
/// the same rate (`bench/HISTORY.md`, "a restart's load and the log's memory"). Each round
/// costs a sled sync.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);
/// How long the compactor waits for a triggered snapshot before giving up on this round.
const BUILD_WAIT: Duration = Duration::from_secs(10);
/// How often it looks again at a group it waits for.
const POLL: Duration = Duration::from_millis(50);
/// How long a purge held back by a lagging follower is retried (a round every
/// [`IDLE_DELAY`]).
const LAGGING_RETRY: Duration = Duration::from_secs(30);
/// How often the task looks at the node's unpurged log while it is past the budget.
const BUDGET_CHECK: Duration = Duration::from_millis(50);
/// How many of the biggest logs one budget check looks at.
const BUDGET_GROUPS: usize = 4096;
/// The least time between two sled reclaims of the node.
pub const RECLAIM_EVERY: Duration = Duration::from_secs(5);

/// The node's compactor (see the module docs). Cheap to clone.
#[derive(Clone)]
pub struct Compactor {
    shared: Arc<Shared>,
    /// Outside `shared`: the task waits on it holding only a weak reference to the rest, so
    /// the database closes once the node's handles are gone.
    wake: Arc<Notify>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor").finish_non_exhaustive()
    }
}

struct Shared {
    state: Mutex<State>,
    db: StateDb,
    /// Whose unpurged entries are held against [`LOG_BUDGET_BYTES`].
    log: LogEngine,
}

#[derive(Default)]
struct State {
    /// Every running group of the node, with what it needs to be compacted.
    groups: HashMap<GroupId, Tracked>,
    /// Groups with a compaction under way.
    pending: HashMap<GroupId, Pending>,
    /// When sled should reclaim, if a removal asked for it.
    reclaim_due: Option<Instant>,
    last_reclaim: Option<Instant>,
    /// When the biggest logs were last looked at for the budget.
    budget_checked: Option<Instant>,
    /// The task while it runs: started by the first group or reclaim, ended by
    /// [`Compactor::stop`].
    task: Option<Task>,
}

/// The compactor's running task. While it steps it holds the database (`Shared`), and a
/// reclaim it started runs on a blocking thread it waits for: a shutdown waits for the task
/// itself to end, not for a reclaim alone, so that nothing of it holds sled afterwards.
struct Task {
    handle: tokio::task::JoinHandle<()>,
    /// Set by [`Compactor::stop`]: the task ends at its next turn.
    stop: Arc<AtomicBool>,
}

struct Tracked {
    raft: Raft,
    node: NodeId,
    keep_for_lagging: u64,
    last_snapshot: Option<Instant>,
    /// Since when a lagging follower keeps holding part of the log back.
    held_back_since: Option<Instant>,
}

struct Pending {
    due: Instant,
    reason: Reason,
    step: Step,
    /// A request that came after this round's snapshot was triggered: it needs another round.
    again: Option<Reason>,
    /// A settling round's last look at how many entries the group had applied
    /// ([`applied_count`]); `None` before its first look.
    settle_seen: Option<u64>,
}

#[derive(Clone, Copy)]
enum Step {
    Snapshot,
    AwaitBuild { before: Option<u64>, since: Instant },
    Purge,
}

impl Compactor {
    /// A compactor of the groups whose logs are in `log`, reclaiming sled space in `db`. Its
    /// task starts with the first group.
    pub fn new(db: StateDb, log: LogEngine) -> Compactor {
        Compactor {
            shared: Arc::new(Shared {
                state: Mutex::new(State::default()),
                db,
                log,
            }),
            wake: Arc::new(Notify::new()),
        }
    }

    /// Starts the task unless it runs. Call from a tokio runtime.
    fn run_task(&self, state: &mut State) {
        if state.task.is_none() {
            let stop = Arc::new(AtomicBool::new(false));
            let handle = tokio::spawn(run(
                Arc::downgrade(&self.shared),
                self.wake.clone(),
                stop.clone(),
            ));
            state.task = Some(Task { handle, stop });
        }
    }

    /// Start compacting `group` (on this replica `node`) when it asks. Call from a tokio
    /// runtime (the first call starts the task). A (re)started group whose log holds
    /// `unpurged_bytes` from before is looked at after [`IDLE_DELAY`] if that is worth it.
    pub fn track(
        &self,
        group: GroupId,
        node: NodeId,
        raft: Raft,
        keep_for_lagging: u64,
        unpurged_bytes: u64,
    ) {
        {
            let mut state = self.shared.state.lock();
            state.groups.insert(
                group,
                Tracked {
                    raft,
                    node,
                    keep_for_lagging,
                    last_snapshot: None,
                    held_back_since: None,
                },
            );
            self.run_task(&mut state);
        }
        if unpurged_bytes >= IDLE_MIN_BYTES {
            self.request(group, Reason::Idle);
        } else if unpurged_bytes >= SETTLE_MIN_BYTES {
            self.request(group, Reason::Settle);
        }
    }

    /// Stop compacting `group` (it stops or is dropped).
    pub fn untrack(&self, group: GroupId) {
        let mut state = self.shared.state.lock();
        state.groups.remove(&group);
        state.pending.remove(&group);
    }

    /// `group` asks to be compacted for `reason`. Never blocks.
    pub fn request(&self, group: GroupId, reason: Reason) {
        request(&self.shared, group, reason);
        self.wake.notify_one();
    }

    /// Let sled give back removed keys' space soon (a dropped group's): at the next
    /// reclaim the node allows, at most one every [`RECLAIM_EVERY`], so that deleting many
    /// streams one after another costs a few reclaims, not one each. Call from a tokio
    /// runtime.
    pub fn reclaim_soon(&self) {
        let now = Instant::now();
        {
            let mut state = self.shared.state.lock();
            let earliest = state.last_reclaim.map_or(now, |at| at + RECLAIM_EVERY);
            let due = state.reclaim_due.map_or(earliest, |due| due.min(earliest));
            state.reclaim_due = Some(due.max(now));
            self.run_task(&mut state);
        }
        self.wake.notify_one();
    }

    /// Ends the task and waits until it has ended, dropping the planned reclaim (one under
    /// way finishes first): for a shutdown, after the groups stopped, so that nothing of the
    /// compactor holds the database once the node's handles are dropped (a reopen finds
    /// sled's lock free). A group tracked later starts the task again.
    pub async fn stop(&self) {
        let task = {
            let mut state = self.shared.state.lock();
            state.reclaim_due = None;
            state.task.take()
        };
        let Some(task) = task else {
            return;
        };
        task.stop.store(true, Ordering::Release);
        self.wake.notify_one();
        if let Err(e) = task.handle.await {
            tracing::warn!(error = %e, "compaction task failed");
        }
    }
}

/// Record that `group` asks to be compacted for `reason` (see [`Compactor::request`]).
fn request(shared: &Shared, group: GroupId, reason: Reason) {
    ask(&mut shared.state.lock(), group, reason, Instant::now());
}

/// [`request`] under the lock the caller holds.
fn ask(state: &mut State, group: GroupId, reason: Reason, now: Instant) {
    let Some(tracked) = state.groups.get(&group) else {
        return;
    };
    let due = due_after(now, tracked.last_snapshot, reason);
    match state.pending.get_mut(&group) {
        Some(pending) if matches!(pending.step, Step::Snapshot) => {
            pending.reason = pending.reason.max(reason);
            pending.due = pending.due.min(due);
        }
        Some(pending) => pending.again = pending.again.max(Some(reason)),
        None => {
            state.pending.insert(
                group,
                Pending {
                    due,
                    reason,
                    step: Step::Snapshot,
                    again: None,
                    settle_seen: None,
                },
            );
        }
    }
}

/// Past the node's log budget, ask the biggest logs to compact soon ([`relief`]), at most
/// once every [`BUDGET_CHECK`]; returns whether the logs are past it (the task then looks
/// again after [`BUDGET_CHECK`]; below it, the groups' own requests wake the task).
fn check_budget(shared: &Shared) -> bool {
    let resident = shared.log.resident().bytes();
    let now = Instant::now();
    let due = {
        let mut state = shared.state.lock();
        let due = state
            .budget_checked
            .is_none_or(|at| now.duration_since(at) >= BUDGET_CHECK);
        if due && resident > LOG_BUDGET_BYTES {
            state.budget_checked = Some(now);
        }
        due
    };
    if due && resident > LOG_BUDGET_BYTES {
        let largest = shared.log.largest_groups(BUDGET_GROUPS);
        let chosen = relief(resident, LOG_BUDGET_BYTES, &largest);
        if !chosen.is_empty() {
            tracing::debug!(
                resident,
                groups = chosen.len(),
                "compaction: log budget exceeded"
            );
        }
        let mut state = shared.state.lock();
        for group in chosen {
            // A round past its snapshot already frees what this one would.
            let busy = state
                .pending
                .get(&group)
                .is_some_and(|pending| !matches!(pending.step, Step::Snapshot));
            if !busy {
                ask(&mut state, group, Reason::Grew, now);
            }
        }
    }
    resident > LOG_BUDGET_BYTES
}

/// When a round asked for `reason` at `now` may snapshot: after its delay, and no sooner than
/// [`MIN_INTERVAL`] after the group's last round.
fn due_after(now: Instant, last_snapshot: Option<Instant>, reason: Reason) -> Instant {
    let delay = match reason {
        Reason::Settle => SETTLE_DELAY,
        Reason::Idle => IDLE_DELAY,
        Reason::Grew | Reason::Removed => SOON_DELAY,
    };
    let earliest = last_snapshot.map(|at| at + MIN_INTERVAL);
    earliest.map_or(now + delay, |earliest| earliest.max(now + delay))
}

/// The compactor's task: ends once every [`Compactor`] handle is gone, or when stopped
/// ([`Compactor::stop`]).
async fn run(shared: Weak<Shared>, wake: Arc<Notify>, stop: Arc<AtomicBool>) {
    loop {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let next = {
            let Some(strong) = shared.upgrade() else {
                return;
            };
            let pressed = check_budget(&strong);
            let state = strong.state.lock();
            let next_group = state.pending.values().map(|p| p.due).min();
            let next = match (next_group, state.reclaim_due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let recheck = pressed.then(|| Instant::now() + BUDGET_CHECK);
            match (next, recheck) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        };
        let now = Instant::now();
        if next.is_none_or(|due| due > now) {
            // A bounded wait, so that the task notices when the node's handles are gone.
            let wait = next.map_or(Duration::from_secs(1), |due| due - now);
            let _ = tokio::time::timeout(wait, wake.notified()).await;
            continue;
        }
        let Some(strong) = shared.upgrade() else {
            return;
        };
        step_due_groups(&strong).await;
        reclaim_if_due(&strong).await;
    }
}

/// Advance every group whose compaction step is due.
async fn step_due_groups(shared: &Shared) {
    let now = Instant::now();
    let due: Vec<Due> = {
        let state = shared.state.lock();
        state
            .pending
            .iter()
            .filter(|(_, pending)| pending.due <= now)
            .filter_map(|(group, pending)| {
                let tracked = state.groups.get(group)?;
                Some(Due {
                    group: *group,
                    raft: tracked.raft.clone(),
                    node: tracked.node,
                    keep: tracked.keep_for_lagging,
                    step: pending.step,
                    settling: (pending.reason == Reason::Settle).then_some(pending.settle_seen),
                })
            })
            .collect()
    };
    for Due {
        group,
        raft,
        node,
        keep,
        step,
        settling,
    } in due
    {
        let at = position(&raft, node);
        let outcome = match step {
            Step::Snapshot if settling.is_some_and(|seen| !settled(seen, applied_count(&at))) => {
                Outcome::Busy(applied_count(&at))
            }
            Step::Snapshot if at.applied > at.snapshot => match raft.trigger().snapshot().await {
                Ok(()) => Outcome::Next(Step::AwaitBuild {
                    before: at.snapshot,
                    since: now,
                }),
                Err(e) => {
                    tracing::debug!(group, error = %e, "compaction: snapshot not triggered");
                    Outcome::Done { held_back: false }
                }
            },
            Step::Snapshot => Outcome::Next(Step::Purge),
            Step::AwaitBuild { before, since } => {
                if at.snapshot > before || now.duration_since(since) > BUILD_WAIT {
                    Outcome::Next(Step::Purge)
                } else {
                    Outcome::Wait
                }
            }
            Step::Purge => {
                let target = purge_target(&at, keep);
                if let Some(target) = target.filter(|target| Some(*target) > at.purged) {
                    if let Err(e) = raft.trigger().purge_log(target).await {
                        tracing::debug!(group, error = %e, "compaction: purge not triggered");
                    }
                }
                Outcome::Done {
                    held_back: target < at.snapshot,
                }
            }
        };
        finish_step(shared, group, outcome, now);
    }
}

/// A group whose round has a step due, as [`step_due_groups`] takes it.
struct Due {
    group: GroupId,
    raft: Raft,
    node: NodeId,
    keep: u64,
    step: Step,
    /// For a settling round: its last look ([`Pending::settle_seen`]).
    settling: Option<Option<u64>>,
}

/// What one step of a group's round came to.
enum Outcome {
    /// Look again after [`POLL`].
    Wait,
    /// A settling group applied since the last look (it has applied this many entries now):
    /// look again after [`SETTLE_DELAY`].
    Busy(u64),
    Next(Step),
    /// The round is over; `held_back` if a lagging follower kept part of the log.
    Done {
        held_back: bool,
    },
}

/// Record the outcome of one step of `group`'s round. A round held back by a lagging follower
/// is followed by another (an [`Reason::Idle`] one) for up to [`LAGGING_RETRY`], since the
/// follower may catch up or fall far enough behind to get a snapshot instead.
fn finish_step(shared: &Shared, group: GroupId, outcome: Outcome, now: Instant) {
    let mut state = shared.state.lock();
    let Some(pending) = state.pending.get_mut(&group) else {
        return;
    };
    match outcome {
        Outcome::Wait => pending.due = now + POLL,
        Outcome::Busy(applied) => {
            pending.settle_seen = Some(applied);
            pending.due = now + SETTLE_DELAY;
        }
        Outcome::Next(step) => {
            pending.step = step;
            pending.due = match step {
                Step::AwaitBuild { .. } => now + POLL,
                _ => now,
            };
        }
        Outcome::Done { held_back } => {
            let (reason, mut again) = (pending.reason, pending.again);
            state.pending.remove(&group);
            if let Some(tracked) = state.groups.get_mut(&group) {
                tracked.last_snapshot = Some(now);
                if !held_back {
                    tracked.held_back_since = None;
                } else if now.duration_since(*tracked.held_back_since.get_or_insert(now))
                    < LAGGING_RETRY
                {
                    again = again.max(Some(Reason::Idle));
                }
                if let Some(again) = again {
                    let next = Pending {
                        due: due_after(now, Some(now), again),
                        reason: again,
                        step: Step::Snapshot,
                        again: None,
                        settle_seen: None,
                    };
                    state.pending.insert(group, next);
                }
            }
            if reason == Reason::Removed {
                let earliest = state.last_reclaim.map_or(now, |at| at + RECLAIM_EVERY);
                let due = state
                    .reclaim_due
                    .map_or(earliest, |due| due.min(earliest))
                    .max(now);
                state.reclaim_due = Some(due);
            }
        }
    }
}

/// Let sled give back removed keys' space, if a removal asked for it and it is time.
async fn reclaim_if_due(shared: &Arc<Shared>) {
    let now = Instant::now();
    {
        let mut state = shared.state.lock();
        if state.reclaim_due.is_none_or(|due| due > now) {
            return;
        }
        state.reclaim_due = None;
        state.last_reclaim = Some(now);
    }
    let db = shared.db.clone();
    let reclaimed = tokio::task::spawn_blocking(move || db.reclaim()).await;
    match reclaimed {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "compaction: sled reclaim failed"),
        Err(e) => tracing::warn!(error = %e, "compaction: sled reclaim panicked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settle_is_looked_at_after_its_delay() {
        let now = Instant::now();
        assert_eq!(due_after(now, None, Reason::Settle), now + SETTLE_DELAY);
        let last = now - Duration::from_millis(100);
        assert_eq!(
            due_after(now, Some(last), Reason::Grew),
            last + MIN_INTERVAL
        );
    }
}
