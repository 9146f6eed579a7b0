//! Where a new stream's replicas go: `num_replicas` distinct nodes of the cluster, preferring
//! the nodes that host the fewest streams (so load and, with it, leaders spread out). Pure;
//! the meta leader calls it before proposing the stream, so the placement is part of the
//! replicated command and every node agrees on it.

use std::collections::BTreeMap;

use crate::consensus::NodeId;
use crate::jsapi::{ApiError, ErrorKind};

/// Picks `replicas` nodes out of `nodes`. `hosted` counts the streams each node hosts now;
/// `name` breaks ties differently per stream so equal nodes are not always chosen in id order.
pub fn place(
    nodes: &[NodeId],
    hosted: &BTreeMap<NodeId, usize>,
    replicas: usize,
    name: &str,
) -> Result<Vec<NodeId>, ApiError> {
    if replicas == 0 || replicas > nodes.len() {
        return Err(ApiError::with_detail(
            ErrorKind::ClusterNoPeers,
            "no suitable peers for placement",
        ));
    }
    let tie = |node: NodeId| {
        let mut hash = node;
        for byte in name.as_bytes() {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        hash
    };
    let mut ranked: Vec<NodeId> = nodes.to_vec();
    ranked.sort_by_key(|node| (hosted.get(node).copied().unwrap_or(0), tie(*node)));
    ranked.truncate(replicas);
    Ok(ranked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_distinct_least_loaded_nodes() {
        let nodes = [10, 20, 30];
        let mut hosted = BTreeMap::new();
        hosted.insert(10, 5);
        hosted.insert(20, 1);
        let picked = place(&nodes, &hosted, 2, "S").unwrap();
        assert_eq!(picked.len(), 2);
        assert!(!picked.contains(&10));
        let all = place(&nodes, &hosted, 3, "S").unwrap();
        let mut sorted = all.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![10, 20, 30]);
    }

    #[test]
    fn refuses_more_replicas_than_nodes() {
        let err = place(&[1], &BTreeMap::new(), 3, "S").unwrap_err();
        assert_eq!(err.err_code, 10005);
        assert_eq!(err.description, "no suitable peers for placement");
    }

    #[test]
    fn ties_spread_over_nodes_by_stream_name() {
        let nodes = [1, 2, 3];
        let firsts: std::collections::BTreeSet<_> = (0..20)
            .map(|i| place(&nodes, &BTreeMap::new(), 1, &format!("S{i}")).unwrap()[0])
            .collect();
        assert!(firsts.len() > 1, "R1 streams all landed on one node");
    }
}
