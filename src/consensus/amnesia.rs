//! [`Amnesia`]: which Raft groups of this node lost their log and vote to corruption and may not
//! vote or stand for election until they caught up with a leader (ADR 0015). One per node,
//! persisted in `<data dir>/amnesia.json`, shared through [`NodeStorage`](super::NodeStorage).
//!
//! A replica whose state was quarantined (`quarantine.rs`) starts empty. Granting a vote with
//! that empty log, or standing for election with it, could elect a leader that lacks an entry
//! this replica had helped commit, or grant a second vote in a term it already voted in: both
//! break Raft's safety. So the register marks such groups amnesiac: the node refuses their vote
//! requests, the pacer starts no election of them, a new group is not initialized by them; and
//! a group leaves the register once it has applied an entry of its current leader's term
//! ([`caught_up`]). The file is written before the store is replaced and rewritten (atomically,
//! synced) when a group leaves, so a crash in between keeps the group amnesiac: the safe side.
//!
//! The file is small JSON with a version; an unreadable file counts as "every group amnesiac".

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::types::{GroupId, LogId, NodeId};

/// What an amnesiac replica answers a vote request with (`cluster/service.rs`); a candidate
/// that reads it records the peer in its group's [`AmnesiacPeers`], so that a group left
/// without a majority by corruption can say so (`$JS.API.STREAM.INFO` answers 10194).
pub const VOTE_REFUSED_AMNESIAC: &str =
    "vote refused: this replica lost its state to corruption and is being rebuilt";

/// How long a peer's refusal as amnesiac counts (a candidate asks every election timeout).
pub const AMNESIAC_PEER_FOR: Duration = Duration::from_secs(10);

/// The peers of one group that refused this node's vote requests because they are
/// amnesiac, with when they last did. Written by the group's network, read by JetStream.
#[derive(Debug, Default)]
pub struct AmnesiacPeers(Mutex<BTreeMap<NodeId, Instant>>);

impl AmnesiacPeers {
    /// `peer` answered a vote request: amnesiac or not.
    pub fn answered(&self, peer: NodeId, amnesiac: bool, now: Instant) {
        let mut peers = self.0.lock();
        match amnesiac {
            true => peers.insert(peer, now),
            false => peers.remove(&peer),
        };
    }

    /// The peers that refused as amnesiac within [`AMNESIAC_PEER_FOR`] of `now`.
    pub fn recent(&self, now: Instant) -> BTreeSet<NodeId> {
        self.0
            .lock()
            .iter()
            .filter(|(_, at)| now.saturating_duration_since(**at) < AMNESIAC_PEER_FOR)
            .map(|(peer, _)| *peer)
            .collect()
    }
}

/// The register's file name under the node's data directory.
pub const FILE: &str = "amnesia.json";

const VERSION: u8 = 1;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Register {
    version: u8,
    /// The whole store was replaced: every group not in `cleared` is amnesiac.
    everything: bool,
    /// Groups amnesiac by themselves (their own state was quarantined).
    groups: BTreeSet<GroupId>,
    /// Groups that caught up after `everything` was set.
    cleared: BTreeSet<GroupId>,
    /// When `everything` was set (Unix nanoseconds): a group created after it is new, not
    /// amnesiac.
    #[serde(default)]
    since_nanos: i64,
    /// Why, for the operator (the quarantine directory and the cause).
    reasons: Vec<String>,
}

impl Register {
    fn is_amnesiac(&self, group: GroupId) -> bool {
        self.groups.contains(&group) || (self.everything && !self.cleared.contains(&group))
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Amnesia {
    path: PathBuf,
    register: Mutex<Register>,
}

impl Amnesia {
    /// Loads the register of the node whose data directory is `dir` (none: nothing amnesiac).
    pub fn load(dir: &Path) -> Amnesia {
        let path = dir.join(FILE);
        let register = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<Register>(&bytes) {
                Ok(register) if register.version == VERSION => register,
                other => {
                    tracing::error!(
                        path = %path.display(),
                        "unreadable amnesia register ({:?}): every group counts as amnesiac",
                        other.err()
                    );
                    Register {
                        version: VERSION,
                        everything: true,
                        ..Register::default()
                    }
                }
            },
            Err(_) => Register {
                version: VERSION,
                ..Register::default()
            },
        };
        Amnesia {
            path,
            register: Mutex::new(register),
        }
    }

    /// Whether `group` may not vote or campaign here yet.
    pub fn is_amnesiac(&self, group: GroupId) -> bool {
        self.register.lock().is_amnesiac(group)
    }

    /// Whether any group is (or may be) amnesiac.
    pub fn any(&self) -> bool {
        let register = self.register.lock();
        register.everything && register.cleared.is_empty() || !register.groups.is_empty()
    }

    /// Marks every group amnesiac: the whole store is being replaced. Durable on return.
    pub fn forget_everything(&self, reason: String) -> io::Result<()> {
        let mut register = self.register.lock();
        let mut next = register.clone();
        next.everything = true;
        next.cleared.clear();
        next.since_nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(i64::MAX);
        next.reasons.push(reason);
        self.write(&next)?;
        *register = next;
        Ok(())
    }

    /// Marks `group` amnesiac: its state is being replaced. Durable on return.
    pub fn forget(&self, group: GroupId, reason: String) -> io::Result<()> {
        let mut register = self.register.lock();
        let mut next = register.clone();
        next.groups.insert(group);
        next.cleared.remove(&group);
        next.reasons.push(reason);
        self.write(&next)?;
        *register = next;
        Ok(())
    }

    /// A group created (by the meta leader's clock) at `created_nanos`, after the whole store
    /// was replaced, never had state here: it leaves the register (an R1 stream created after
    /// a quarantine starts). Durable on return.
    pub fn clear_if_created_after_loss(
        &self,
        group: GroupId,
        created_nanos: i64,
    ) -> io::Result<()> {
        let newer = {
            let register = self.register.lock();
            register.everything
                && !register.groups.contains(&group)
                && created_nanos > register.since_nanos
        };
        if newer {
            self.clear(group)?;
        }
        Ok(())
    }

    /// `group` caught up with a leader: it votes and campaigns again. Durable on return.
    pub fn clear(&self, group: GroupId) -> io::Result<()> {
        let mut register = self.register.lock();
        if !register.is_amnesiac(group) {
            return Ok(());
        }
        let mut next = register.clone();
        next.groups.remove(&group);
        if next.everything {
            next.cleared.insert(group);
        }
        self.write(&next)?;
        *register = next;
        Ok(())
    }

    /// Writes `register` to a temporary file, syncs it, renames it over the register and syncs
    /// the directory.
    fn write(&self, register: &Register) -> io::Result<()> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = self.path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(register).map_err(io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)?;
        std::fs::File::open(dir)?.sync_all()
    }
}

/// Whether a replica with these metrics has caught up after amnesia: it follows a leader
/// (another node, its vote committed) and has applied an entry of that leader's term. A leader
/// commits an entry of its own term only once a quorum holds it, and its log holds every entry
/// committed before (leader completeness), so the replica then holds every committed entry,
/// among them any it had helped commit before it lost its log (ADR 0015).
pub fn caught_up(
    me: NodeId,
    vote_term: u64,
    vote_committed: bool,
    leader: Option<NodeId>,
    applied: Option<LogId>,
) -> bool {
    let follows = leader.is_some_and(|leader| leader != me) && vote_committed;
    follows && applied.is_some_and(|applied| applied.leader_id.term == vote_term)
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    #[test]
    fn peers_that_refused_as_amnesiac_count_for_a_while() {
        let peers = AmnesiacPeers::default();
        let now = Instant::now();
        peers.answered(2, true, now);
        peers.answered(3, true, now);
        peers.answered(3, false, now);
        assert_eq!(peers.recent(now), BTreeSet::from([2]));
        assert!(peers.recent(now + AMNESIAC_PEER_FOR).is_empty());
    }

    fn log_id(term: u64, index: u64) -> Option<LogId> {
        Some(LogId::new(CommittedLeaderId::new(term, 1), index))
    }

    #[test]
    fn the_register_survives_a_restart_and_clears_group_by_group() {
        let dir = tempfile::tempdir().unwrap();
        let amnesia = Amnesia::load(dir.path());
        assert!(!amnesia.is_amnesiac(7));
        amnesia.forget_everything("sled unreadable".into()).unwrap();
        assert!(amnesia.is_amnesiac(7) && amnesia.is_amnesiac(0));
        amnesia.clear(7).unwrap();
        let reloaded = Amnesia::load(dir.path());
        assert!(!reloaded.is_amnesiac(7));
        assert!(reloaded.is_amnesiac(0));
        reloaded.forget(7, "log corrupt".into()).unwrap();
        assert!(Amnesia::load(dir.path()).is_amnesiac(7));
    }

    #[test]
    fn a_group_created_after_the_loss_is_not_amnesiac() {
        let dir = tempfile::tempdir().unwrap();
        let amnesia = Amnesia::load(dir.path());
        amnesia.forget_everything("sled unreadable".into()).unwrap();
        amnesia.clear_if_created_after_loss(3, 1).unwrap();
        assert!(amnesia.is_amnesiac(3), "created long before the loss");
        amnesia.clear_if_created_after_loss(4, i64::MAX).unwrap();
        assert!(!amnesia.is_amnesiac(4));
        amnesia.forget(5, "log corrupt".into()).unwrap();
        amnesia.clear_if_created_after_loss(5, i64::MAX).unwrap();
        assert!(amnesia.is_amnesiac(5), "its own loss: it existed");
    }

    #[test]
    fn an_unreadable_register_makes_every_group_amnesiac() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{\"version\":1,\"everyth").unwrap();
        let amnesia = Amnesia::load(dir.path());
        assert!(amnesia.is_amnesiac(3));
    }

    #[test]
    fn caught_up_needs_an_applied_entry_of_the_current_leaders_term() {
        // Following node 2 at term 5; applied an entry of term 4 only: not yet.
        assert!(!caught_up(1, 5, true, Some(2), log_id(4, 100)));
        assert!(caught_up(1, 5, true, Some(2), log_id(5, 101)));
        // Its own leadership, an uncommitted vote (a candidate) or nothing applied: not yet.
        assert!(!caught_up(1, 5, true, Some(1), log_id(5, 101)));
        assert!(!caught_up(1, 5, false, Some(2), log_id(5, 101)));
        assert!(!caught_up(1, 5, true, Some(2), None));
    }
}
