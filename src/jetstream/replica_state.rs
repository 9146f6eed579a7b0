//! [`ReplicaState`]: what `/jsz` shows of one stream replica on this node (the catalog
//! builds it, `Catalog::replica_states`).

/// One stream replica on this node as it holds it (`/jsz`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReplicaState {
    pub name: String,
    pub group: u64,
    /// This replica leads the stream.
    pub leader: bool,
    pub applied_index: u64,
    pub messages: u64,
    pub bytes: u64,
    pub first_seq: u64,
    pub last_seq: u64,
    /// The group's pacing mode on this node: `active`, `quiet` or `waking`.
    pub mode: &'static str,
    /// This replica's Raft role (`leader`, `follower`, `candidate`, `learner`, `shutdown`),
    /// its term and the leader it knows: with `leader` (serving) above, what tells a leader
    /// that does not serve from a replica that knows no leader.
    pub raft_state: &'static str,
    pub term: u64,
    pub raft_leader: Option<u64>,
    /// The last index in this replica's Raft log, and the last index purged from it (the log
    /// holds the entries after it; 0 if none was): how much log a replica keeps.
    pub last_log_index: u64,
    pub purged_index: u64,
}
