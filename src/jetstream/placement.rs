//! Where a new stream's replicas go: `num_replicas` distinct nodes of the cluster (the ones
//! the meta leader reaches, if there are enough), preferring the nodes that host the fewest
//! streams (so load and, with it, leaders spread out). The meta leader decides before it
//! proposes the stream, so the placement is part of the replicated command and every node
//! agrees on it.

use std::collections::BTreeMap;

use super::catalog::Catalog;
use super::meta::MetaCommand;
use super::payload::JsonValue;
use super::topology::Topology;
use crate::consensus::NodeId;
use crate::jsapi::{ApiError, ErrorKind, StreamConfig};

/// The meta command creating `config`, placed on `num_replicas` nodes of the topology (an
/// idempotent re-create keeps the existing placement; a different config is refused by the
/// meta machine anyway). On a node without a cluster the topology is this node alone, so every
/// stream is placed on it.
pub fn create_stream_command(
    catalog: &Catalog,
    config: StreamConfig,
) -> Result<MetaCommand, ApiError> {
    let replicas = match catalog.assignment(&config.name) {
        Some(existing) => existing.replicas,
        None => {
            let hosted = catalog.meta().read(|state| {
                let mut hosted = BTreeMap::new();
                for assignment in state.streams().values() {
                    for node in &assignment.replicas {
                        *hosted.entry(*node).or_insert(0usize) += 1;
                    }
                }
                hosted
            });
            let wanted = usize::try_from(config.num_replicas.max(1)).unwrap_or(usize::MAX);
            let topology = catalog.topology();
            let up = |node| topology.reaches(node);
            let candidates = up_nodes_if_enough(&topology.node_ids(), up, wanted);
            let placed = place(&candidates, &hosted, wanted, &config.name)?;
            reachable_first(placed, up)
        }
    };
    Ok(MetaCommand::CreateStreamOn {
        config: JsonValue(config),
        created_nanos: super::now_nanos(),
        replicas,
    })
}

/// Refuses a requested `placement` that placement here cannot honour, with nats-server's answer
/// when no server fits (10005): tags (jetraft nodes carry none), or a cluster other than this
/// one. Storing it would promise a placement that never happened. An empty `placement`, or
/// this cluster's name, means every node, which is what `place` picks from.
pub fn check_requested(topology: &Topology, config: &StreamConfig) -> Result<(), ApiError> {
    let Some(placement) = &config.placement else {
        return Ok(());
    };
    let detail = if !placement.tags.is_empty() {
        format!(
            "no suitable peers for placement, tags not matched {:?} (jetraft nodes carry no tags)",
            placement.tags
        )
    } else if !placement.cluster.is_empty() && placement.cluster != topology.cluster_name() {
        format!(
            "no suitable peers for placement, no cluster named {:?}",
            placement.cluster
        )
    } else {
        return Ok(());
    };
    Err(ApiError::with_detail(ErrorKind::ClusterNoPeers, detail))
}

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
    let name_hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    // splitmix64's finalizer: every bit of (name, node) moves the rank.
    let tie = |node: NodeId| {
        let mut z = (name_hash ^ node).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut ranked: Vec<NodeId> = nodes.to_vec();
    ranked.sort_by_key(|node| (hosted.get(node).copied().unwrap_or(0), tie(*node)));
    ranked.truncate(replicas);
    Ok(ranked)
}

/// The nodes a new stream may be placed on: those that are `up`, if there are at least
/// `replicas` of them; otherwise all of `nodes` (a 3-node cluster with one node down still
/// takes an R3 stream, the down replica catching up when it returns — nats-server 2.15 does
/// the same, reporting that replica `offline`).
pub fn up_nodes_if_enough(
    nodes: &[NodeId],
    up: impl Fn(NodeId) -> bool,
    replicas: usize,
) -> Vec<NodeId> {
    let up_nodes: Vec<NodeId> = nodes.iter().copied().filter(|node| up(*node)).collect();
    if up_nodes.len() >= replicas {
        up_nodes
    } else {
        nodes.to_vec()
    }
}

/// `replicas` with the first one this node reaches moved to the front (the others keep their
/// order). The first replica alone starts the new group's first election (`Bootstrap::First`);
/// one that is down would leave the others waiting for it (2 s) before they elect without it.
pub fn reachable_first(
    mut replicas: Vec<NodeId>,
    reachable: impl Fn(NodeId) -> bool,
) -> Vec<NodeId> {
    if let Some(at) = replicas.iter().position(|node| reachable(*node)) {
        let first = replicas.remove(at);
        replicas.insert(0, first);
    }
    replicas
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
    fn a_reachable_replica_goes_first() {
        let up = |node| node != 7;
        assert_eq!(reachable_first(vec![7, 3, 9], up), vec![3, 7, 9]);
        assert_eq!(reachable_first(vec![3, 7, 9], up), vec![3, 7, 9]);
        // Nobody reachable: the placement stands.
        assert_eq!(reachable_first(vec![7, 8], |_| false), vec![7, 8]);
    }

    #[test]
    fn a_node_that_is_down_is_left_out_while_enough_are_up() {
        let nodes = [1, 2, 3, 4, 5];
        let up = |node| node != 4;
        assert_eq!(up_nodes_if_enough(&nodes, up, 3), vec![1, 2, 3, 5]);
        assert_eq!(up_nodes_if_enough(&nodes, up, 4), vec![1, 2, 3, 5]);
        // Not enough up: every node stays a candidate.
        assert_eq!(up_nodes_if_enough(&nodes, up, 5), nodes.to_vec());
        assert_eq!(up_nodes_if_enough(&[1, 2, 3], |n| n == 1, 3), vec![1, 2, 3]);
        // Placement over the candidates never picks the down node while others are up:
        // node 4 hosts the fewest streams, and is still left out.
        let mut hosted = BTreeMap::new();
        for node in [1, 2, 3, 5] {
            hosted.insert(node, 3);
        }
        let candidates = up_nodes_if_enough(&nodes, up, 3);
        let picked = place(&candidates, &hosted, 3, "S").unwrap();
        assert!(!picked.contains(&4), "{picked:?}");
        assert!(place(&nodes, &hosted, 3, "S").unwrap().contains(&4));
    }

    #[test]
    fn refuses_more_replicas_than_nodes() {
        let err = place(&[1], &BTreeMap::new(), 3, "S").unwrap_err();
        assert_eq!(err.err_code, 10005);
        assert_eq!(err.description, "no suitable peers for placement");
    }

    #[test]
    fn placement_by_tags_or_another_cluster_is_refused() {
        use crate::jsapi::Placement;
        let alone = Topology::new("solo".into(), None);
        let with = |cluster: &str, tags: &[&str]| StreamConfig {
            placement: Some(Placement {
                cluster: cluster.into(),
                tags: tags.iter().map(|t| t.to_string()).collect(),
                preferred: String::new(),
            }),
            ..StreamConfig::default()
        };
        assert!(check_requested(&alone, &StreamConfig::default()).is_ok());
        assert!(check_requested(&alone, &with("", &[])).is_ok());
        let err = check_requested(&alone, &with("", &["ssd"])).unwrap_err();
        assert_eq!(err.err_code, 10005);
        assert!(err.description.contains("tags not matched"));
        let err = check_requested(&alone, &with("east", &[])).unwrap_err();
        assert_eq!(err.err_code, 10005);
        assert!(err.description.contains("\"east\""));
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
