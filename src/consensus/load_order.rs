//! [`LoadOrder`]: which replicas of a group load their state first when a node starts.
//!
//! Every replica of a group loads its machine's state before its Raft instance runs (a
//! stream's load rebuilds each message's metadata: ~0.45 s of CPU for 10 GiB of 1 KiB
//! messages). After a restart of a whole cluster the leader before it leads again from its
//! committed vote and serves once a quorum holds its first entry, so what it waits for is its
//! own load and that of enough followers to make the quorum; the other followers' loads only
//! take CPU from those. Three nodes sharing two cores loaded one R3 stream of 10 GiB in
//! 0.8–0.9 s each, where one node alone loads it in 0.45 s.
//!
//! So a replica that its stored vote and membership place outside that quorum (a follower of
//! a committed leader, not among the lowest-numbered followers the leader needs) loads
//! [`LoadOrder::Behind`]: on a thread of its own at a lower CPU priority (nice
//! [`BEHIND_NICE`]), which takes nothing from the others while they load and runs at full
//! speed once they are done. Priority is all it changes: every replica loads, applies and
//! votes as before, and a guess proven wrong (the leader's node did not come back) costs at
//! most what a load at equal priority did.

use std::collections::BTreeSet;

use super::types::{NodeId, Vote};

/// How much a load [`Behind`](LoadOrder::Behind) adds to the thread's nice value (0 is the
/// default, 19 the lowest priority).
pub const BEHIND_NICE: libc::c_int = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadOrder {
    /// Loads at the process's priority: the leader, and the followers its quorum needs.
    First,
    /// Loads at a lower priority (see the module docs).
    Behind,
}

impl LoadOrder {
    /// The order of `node`'s replica of a group whose stored vote is `vote` and whose stored
    /// voters are `voters`.
    pub fn of(node: NodeId, vote: Option<&Vote>, voters: &BTreeSet<NodeId>) -> LoadOrder {
        let Some(leader) = vote
            .filter(|vote| vote.is_committed())
            .and_then(|vote| vote.leader_id().voted_for())
        else {
            return LoadOrder::First;
        };
        if leader == node || !voters.contains(&leader) || !voters.contains(&node) {
            return LoadOrder::First;
        }
        let followers_needed = voters.len() / 2;
        let first = voters
            .iter()
            .filter(|voter| **voter != leader)
            .take(followers_needed)
            .any(|voter| *voter == node);
        match first {
            true => LoadOrder::First,
            false => LoadOrder::Behind,
        }
    }

    /// Runs `load` in this order: here for [`First`](Self::First), on a thread of its own
    /// [`BEHIND_NICE`] lower for [`Behind`](Self::Behind) (a new thread, so no pooled thread keeps
    /// the lower priority; threads it spawns inherit it).
    pub fn run<T: Send>(self, load: impl FnOnce() -> T + Send) -> T {
        if self == LoadOrder::First {
            return load();
        }
        let mut load = Some(load);
        let behind = std::thread::scope(|scope| {
            let load = &mut load;
            std::thread::Builder::new()
                .name("load-behind".into())
                .spawn_scoped(scope, move || {
                    lower_this_thread();
                    load.take().expect("run once")()
                })
                .map(|loading| {
                    loading
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
        });
        behind.unwrap_or_else(|error| {
            // No thread to be had: load here, at the usual priority.
            tracing::debug!(%error, "no thread for a load behind the others");
            load.take().expect("not run")()
        })
    }
}

/// The calling thread's nice value.
fn nice() -> libc::c_int {
    // SAFETY: gettid and getpriority take and return plain integers.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

/// Adds [`BEHIND_NICE`] to the calling thread's nice value (19 at most).
fn lower_this_thread() {
    let nice = (nice() + BEHIND_NICE).min(19);
    // SAFETY: setpriority on the calling thread's id changes only that thread's priority.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if rc != 0 {
        tracing::debug!(error = %std::io::Error::last_os_error(), "lowering a load's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed(term: u64, leader: NodeId) -> Vote {
        let mut vote = Vote::new(term, leader);
        vote.commit();
        vote
    }

    fn order(node: NodeId, vote: Option<&Vote>, voters: &[NodeId]) -> LoadOrder {
        LoadOrder::of(node, vote, &voters.iter().copied().collect())
    }

    #[test]
    fn the_leader_and_the_followers_its_quorum_needs_load_first() {
        let vote = committed(3, 20);
        // R3: the leader and the lowest-numbered other voter; the third behind.
        assert_eq!(order(20, Some(&vote), &[10, 20, 30]), LoadOrder::First);
        assert_eq!(order(10, Some(&vote), &[10, 20, 30]), LoadOrder::First);
        assert_eq!(order(30, Some(&vote), &[10, 20, 30]), LoadOrder::Behind);
        // R5: two followers with the leader.
        let voters = [1, 2, 3, 4, 5];
        let vote = committed(7, 1);
        let orders: Vec<_> = voters
            .iter()
            .map(|n| order(*n, Some(&vote), &voters))
            .collect();
        use LoadOrder::{Behind, First};
        assert_eq!(orders, [First, First, First, Behind, Behind]);
        // R1 and R2: everyone.
        assert_eq!(order(1, Some(&committed(1, 1)), &[1]), First);
        assert_eq!(order(2, Some(&committed(1, 1)), &[1, 2]), First);
    }

    #[test]
    fn without_a_committed_leader_among_the_voters_everyone_loads_first() {
        let voters = [10, 20, 30];
        assert_eq!(order(30, None, &voters), LoadOrder::First);
        // A vote granted, not committed: an election was under way.
        let granted = Vote::new(4, 20);
        assert_eq!(order(30, Some(&granted), &voters), LoadOrder::First);
        // A leader no longer among the voters, or a node that is not one.
        assert_eq!(
            order(30, Some(&committed(4, 40)), &voters),
            LoadOrder::First
        );
        assert_eq!(
            order(50, Some(&committed(4, 20)), &voters),
            LoadOrder::First
        );
    }

    #[test]
    fn a_load_behind_runs_on_a_thread_of_its_own_at_a_lower_priority() {
        let here = (std::thread::current().id(), nice());
        let behind = LoadOrder::Behind.run(|| (std::thread::current().id(), nice()));
        assert_ne!(behind.0, here.0);
        assert_eq!(behind.1, (here.1 + BEHIND_NICE).min(19));
        let first = LoadOrder::First.run(|| (std::thread::current().id(), nice()));
        assert_eq!(first, here);
        assert_eq!(nice(), here.1, "the caller's priority is untouched");
    }
}
