//! Node liveness over the cluster's gRPC channels: every node pings every peer each
//! [`PING_EVERY`], and tells the node's [`Pacer`] what it heard (the pacer's `liveness` module
//! says what "alive" and "lease" mean). A ping lists the groups the sender leads quietly that
//! have the receiver among their voters: that is what keeps their followers quiet, and a group
//! missing from the list wakes them. One ping per node pair replaces the per-group heartbeats
//! of every quiet group.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::proto;
use super::ClusterNode;
use crate::consensus::pacer::liveness::PING_EVERY;
use crate::consensus::pacer::Pacer;
use crate::consensus::NodeId;

/// A ping unanswered for this long is given up (the next one is due anyway).
const PING_TIMEOUT: Duration = Duration::from_millis(500);

/// Starts pinging every peer in the table, one task per peer, until `shutdown`.
pub(super) fn start_pinging(node: &Arc<ClusterNode>, pacer: &Pacer, shutdown: &CancellationToken) {
    for peer in node.peers().nodes.keys().copied() {
        if peer == node.node_id() {
            continue;
        }
        pacer.liveness().track(peer);
        tokio::spawn(ping_loop(
            Arc::downgrade(node),
            pacer.clone(),
            peer,
            shutdown.clone(),
        ));
    }
}

async fn ping_loop(
    node: Weak<ClusterNode>,
    pacer: Pacer,
    peer: NodeId,
    shutdown: CancellationToken,
) {
    let mut every = tokio::time::interval(PING_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        let Some(node) = node.upgrade() else {
            return;
        };
        ping(&node, &pacer, peer).await;
        pacer.refresh(Instant::now());
    }
}

/// One ping to `peer`: what it answers counts as hearing it, and the groups it knows at a
/// higher term wake here.
async fn ping(node: &ClusterNode, pacer: &Pacer, peer: NodeId) {
    let Some(addr) = node.peers().get(peer).map(|p| p.cluster_addr.clone()) else {
        return;
    };
    let Ok(mut client) = node.channels().client(&addr) else {
        return;
    };
    let (quiet_groups, quiet_terms) = pacer.quiet_led_for(peer).into_iter().unzip();
    let mut request = tonic::Request::new(proto::PingRequest {
        from: node.node_id(),
        quiet_groups,
        quiet_terms,
    });
    request.set_timeout(PING_TIMEOUT);
    let sent = Instant::now();
    if let Ok(reply) = client.ping(request).await {
        pacer.answered(peer, sent, Instant::now());
        pacer.wake(&reply.into_inner().stale_groups);
    }
}

impl ClusterNode {
    /// A ping from a peer arrived: note it, and the quiet groups it lists. Returns the listed
    /// groups this node knows at a higher term.
    pub(super) fn pinged(&self, ping: proto::PingRequest) -> Vec<u64> {
        let Some(pacer) = self.pacer() else {
            return Vec::new();
        };
        if self.peers().get(ping.from).is_none() || ping.from == self.node_id() {
            return Vec::new();
        }
        pacer.heard_from(ping.from, Instant::now());
        let listed: Vec<(u64, u64)> = ping
            .quiet_groups
            .into_iter()
            .zip(ping.quiet_terms)
            .collect();
        pacer.leader_lists(ping.from, &listed)
    }
}
