//! The answers a node without a cluster gives differently from a node of a cluster, because
//! nats-server does: the one reader of `Topology::is_standalone`. Everything else treats a
//! single node as the cluster of one it is (one voter per group, placed on itself, leading
//! all of them).
//!
//! What differs, and why:
//! - **Who answers.** A standalone nats-server has no meta leader and no stream leaders to
//!   wait for: it answers every API request itself, even while one of its groups is stopped by
//!   a storage failure (the request then fails, 10008). A node of a cluster answers only what
//!   it leads, or what it answers for a group without a leader after a wait
//!   (`api::leaderless`); on one node that wait would turn a stopped group into silence.
//! - **10074 for more than one replica.** nats-server refuses replicas without a cluster
//!   ("replicas > 1 not supported in non-clustered mode"); a cluster's placement refuses more
//!   replicas than nodes instead (10005).
//! - **10010 on a stream or consumer leader stepdown.** nats-server answers "JetStream clustering
//!   support required" before it even looks the stream up.
//! - **10008 on a meta leader stepdown.** nats-server has no meta group to step down.
//! - **The `cluster` block.** A standalone nats-server reports a stream's `cluster` as only its
//!   leader's name (itself; no cluster name, Raft group or replicas) in `STREAM.INFO`, none in
//!   its stream create, update and list replies, and no `cluster` block at all for a consumer.

use super::topology::Topology;
use crate::jsapi::stream_info::ClusterInfo;
use crate::jsapi::{ApiError, ErrorKind, StreamConfig, StreamInfo};

/// Whether this node answers every API request itself, whatever leads what.
pub fn answers_every_request(topology: &Topology) -> bool {
    topology.is_standalone()
}

/// 10074 for more than one replica without a cluster.
pub fn check_replicas(topology: &Topology, config: &StreamConfig) -> Result<(), ApiError> {
    if topology.is_standalone() && config.num_replicas > 1 {
        return Err(ApiError::new(ErrorKind::StreamReplicasNotSupported));
    }
    Ok(())
}

/// 10010 for a stream or consumer leader stepdown without a cluster.
pub fn check_stepdown(topology: &Topology) -> Result<(), ApiError> {
    if topology.is_standalone() {
        return Err(ApiError::new(ErrorKind::ClusterRequired));
    }
    Ok(())
}

/// 10008 for a meta leader stepdown without a cluster.
pub fn check_meta_stepdown(topology: &Topology) -> Result<(), ApiError> {
    if topology.is_standalone() {
        return Err(ApiError::new(ErrorKind::ClusterNotAvail));
    }
    Ok(())
}

/// A stream's `cluster` block without a cluster (only the leader, this node); `None` in a
/// cluster, where the group's full block is reported (`info::cluster_info`).
pub fn standalone_stream_cluster(topology: &Topology) -> Option<ClusterInfo> {
    topology.is_standalone().then(|| ClusterInfo {
        leader: topology.name_of(topology.node_id()),
        ..ClusterInfo::default()
    })
}

/// Without a cluster, nats-server's stream create, update and list replies carry no
/// `cluster` block; its `STREAM.INFO` does (`standalone_stream_cluster`). Probed on 2.15.1
/// (nats-py's suite compares a create reply with the info).
pub fn drop_standalone_cluster(topology: &Topology, info: &mut StreamInfo) {
    if topology.is_standalone() {
        info.cluster = None;
    }
}

/// Whether consumer infos carry a `cluster` block (none without a cluster).
pub fn reports_consumer_cluster(topology: &Topology) -> bool {
    !topology.is_standalone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_standalone_node_answers_as_nats_server_does() {
        let alone = Topology::new("solo".into(), None);
        assert!(answers_every_request(&alone));
        let r3 = StreamConfig {
            num_replicas: 3,
            ..StreamConfig::default()
        };
        assert_eq!(check_replicas(&alone, &r3).unwrap_err().err_code, 10074);
        assert!(check_replicas(&alone, &StreamConfig::default()).is_ok());
        assert_eq!(check_stepdown(&alone).unwrap_err().err_code, 10010);
        assert_eq!(check_meta_stepdown(&alone).unwrap_err().err_code, 10008);
        let block = standalone_stream_cluster(&alone).expect("a leader-only block");
        assert_eq!(block.leader, "solo");
        assert_eq!(block.name, "");
        assert!(block.replicas.is_empty());
        assert!(!reports_consumer_cluster(&alone));
    }
}
