//! Node identity in a cluster: the stable Raft node id of a node, derived from its name.
//!
//! Every group's membership names nodes by id, so the id must survive restarts and be the same
//! wherever it is computed: it is a 64-bit FNV-1a hash of the node's name (`-n/--server_name`,
//! or its cluster address when no name is given). Ids 0 and 1 are never produced: 1 is the id
//! of a node running without a cluster, whose data directory must stay usable as it is.

use crate::consensus::NodeId;
/// The id of a node running without a cluster (defined with the node ids, in `consensus`).
pub use crate::consensus::SINGLE_NODE_ID;

/// The cluster node id for `name`.
pub fn node_id_for(name: &str) -> NodeId {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    if hash <= SINGLE_NODE_ID {
        hash + 2
    } else {
        hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_distinct_and_never_the_single_node_id() {
        assert_eq!(node_id_for("n1"), node_id_for("n1"));
        assert_ne!(node_id_for("n1"), node_id_for("n2"));
        assert!(node_id_for("") > SINGLE_NODE_ID);
    }
}
