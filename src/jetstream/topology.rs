//! `Topology`: the nodes this node's groups are placed on and how to reach them. Never absent:
//! a node started without `--cluster` is a cluster of one — a peer table holding only itself
//! (id [`SINGLE_NODE_ID`], address `local`, always reachable), with no transport to anyone
//! else (`NoPeers`). Placement, voters, leader names, reachability and the leaderless rules
//! read it the same way on one node and on many.
//!
//! The few answers nats-server gives differently on a standalone server are not decided here
//! but in `compat`, the one reader of `Topology::is_standalone`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cluster::ClusterNode;
use crate::consensus::pacer::Pacer;
use crate::consensus::{GroupRegistry, NoPeers, Node, NodeId, PeerTransport, SINGLE_NODE_ID};

/// What a lone node calls its own address in its groups' memberships (in their logs: fixed).
const LONE_NODE_ADDR: &str = "local";

/// The nodes of this node's cluster (see the module docs).
#[derive(Debug, Clone)]
pub struct Topology {
    /// This node's id in every group.
    node: NodeId,
    /// This node's server name (what infos report as a leader's name).
    server_name: String,
    peers: Peers,
}

#[derive(Debug, Clone)]
enum Peers {
    /// A cluster of one: this node alone.
    Alone,
    /// The cluster's peer table and routes.
    Cluster(Arc<ClusterNode>),
}

impl Topology {
    /// The topology of a node started with `cluster` (`None`: a cluster of one).
    pub fn new(server_name: String, cluster: Option<Arc<ClusterNode>>) -> Topology {
        match cluster {
            Some(cluster) => Topology {
                node: cluster.node_id(),
                server_name,
                peers: Peers::Cluster(cluster),
            },
            None => Topology {
                node: SINGLE_NODE_ID,
                server_name,
                peers: Peers::Alone,
            },
        }
    }

    /// This node's id in every group.
    pub fn node_id(&self) -> NodeId {
        self.node
    }

    /// Whether this node runs without a cluster. Only `compat` asks (see its module docs).
    pub(super) fn is_standalone(&self) -> bool {
        matches!(self.peers, Peers::Alone)
    }

    /// The cluster's name (empty for a cluster of one).
    pub fn cluster_name(&self) -> &str {
        match &self.peers {
            Peers::Alone => "",
            Peers::Cluster(cluster) => cluster.cluster_name(),
        }
    }

    /// Every node's id, this node's included.
    pub fn node_ids(&self) -> Vec<NodeId> {
        match &self.peers {
            Peers::Alone => vec![self.node],
            Peers::Cluster(cluster) => cluster.peers().ids(),
        }
    }

    /// The name of node `id` (its id when it is not in the peer table).
    pub fn name_of(&self, id: NodeId) -> String {
        let known = match &self.peers {
            Peers::Alone => (id == self.node).then(|| self.server_name.clone()),
            Peers::Cluster(cluster) => cluster.peer_name(id),
        };
        known.unwrap_or_else(|| id.to_string())
    }

    /// Whether this node and node `id` exchange messages: itself always; another node while
    /// its route is up both ways.
    pub fn reaches(&self, id: NodeId) -> bool {
        id == self.node
            || match &self.peers {
                Peers::Alone => false,
                Peers::Cluster(cluster) => cluster.reaches(id),
            }
    }

    /// The voters of a group placed on `nodes`, each with its address from the peer table.
    pub fn voters(&self, nodes: &[NodeId]) -> BTreeMap<NodeId, Node> {
        nodes
            .iter()
            .map(|id| (*id, Node::new(self.address_of(*id))))
            .collect()
    }

    fn address_of(&self, id: NodeId) -> String {
        match &self.peers {
            Peers::Alone if id == self.node => LONE_NODE_ADDR.to_owned(),
            Peers::Alone => String::new(),
            Peers::Cluster(cluster) => cluster
                .peers()
                .get(id)
                .map_or_else(String::new, |peer| peer.cluster_addr.clone()),
        }
    }

    /// The Raft transport of this node's groups: none is needed to reach only itself.
    pub fn transport(&self) -> Arc<dyn PeerTransport> {
        match &self.peers {
            Peers::Alone => Arc::new(NoPeers),
            Peers::Cluster(cluster) => cluster.transport(),
        }
    }

    /// Hands the registries running this node's groups to whatever delivers Raft RPCs from
    /// other nodes (nothing does in a cluster of one).
    pub fn serve_registries(&self, registries: Vec<Arc<GroupRegistry>>, pacer: &Pacer) {
        if let Peers::Cluster(cluster) = &self.peers {
            cluster.serve_groups(registries, pacer.clone());
        }
    }

    /// Asks node `candidate` to start an election of `group` (a leader stepdown).
    pub async fn ask_to_elect(&self, candidate: NodeId, group: u64) -> Result<(), String> {
        match &self.peers {
            Peers::Alone => Err("no other node to hand over to".to_owned()),
            Peers::Cluster(cluster) => cluster.ask_to_elect(candidate, group).await,
        }
    }

    /// Waits, at most `wait`, until node `id` has applied `group`'s log up to `index`; whether
    /// it did (false when it cannot be asked).
    pub async fn wait_applied(&self, id: NodeId, group: u64, index: u64, wait: Duration) -> bool {
        self.ask_applied(id, group, index, wait)
            .await
            .is_some_and(|reply| reply.reached)
    }

    /// How far node `id` has applied `group`'s log (`None` when it cannot be asked; 0 when it
    /// does not run the group).
    pub async fn applied_index(&self, id: NodeId, group: u64) -> Option<u64> {
        self.ask_applied(id, group, 0, Duration::ZERO)
            .await
            .map(|reply| reply.applied)
    }

    async fn ask_applied(
        &self,
        id: NodeId,
        group: u64,
        index: u64,
        wait: Duration,
    ) -> Option<crate::cluster::proto::AppliedReply> {
        match &self.peers {
            Peers::Alone => None,
            Peers::Cluster(cluster) => cluster
                .wait_applied(id, group, index, wait)
                .await
                .map_err(|why| {
                    tracing::debug!(node = id, group, "no applied index from node: {why}")
                })
                .ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_node_is_a_cluster_of_one() {
        let alone = Topology::new("solo".into(), None);
        assert_eq!(alone.node_id(), SINGLE_NODE_ID);
        assert_eq!(alone.node_ids(), vec![SINGLE_NODE_ID]);
        assert_eq!(alone.name_of(SINGLE_NODE_ID), "solo");
        assert_eq!(alone.name_of(7), "7");
        assert!(alone.reaches(SINGLE_NODE_ID));
        assert!(!alone.reaches(7));
        assert_eq!(alone.cluster_name(), "");
        // The membership its groups always had (it is in their logs).
        assert_eq!(
            alone.voters(&alone.node_ids()),
            crate::consensus::RaftGroup::single_voter(SINGLE_NODE_ID, LONE_NODE_ADDR)
        );
    }
}
