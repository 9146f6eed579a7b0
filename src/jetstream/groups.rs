//! Opening this node's Raft groups from their logs and sled state: the meta group (every node
//! of the topology a voter) and a stream's group (its placement's nodes). Used to start them
//! (`lifecycle`) and to restart them after a storage failure (`supervisor`); both decide when,
//! this file only how.

use std::sync::Arc;

use super::catalog::Catalog;
use super::error::JetStreamError;
use super::meta::{MetaMachine, StreamAssignment, META_GROUP};
use super::stream_machine::{StreamMachine, StreamView};
use super::topology::Topology;
use crate::consensus::{Bootstrap, GroupRegistry, RaftGroup};

/// Opens the meta group: every node of the topology a voter (a cluster of one: itself).
///
/// A new cluster's meta group is initialized by its lowest node id alone, the others joining
/// when it (or, after `BOOTSTRAP_FALLBACK`, themselves) asks for their vote: with every voter
/// initializing at once, a node that starts its meta group a moment after the others elected
/// stood at their term with a higher node id and deposed their leader, sometimes over and over.
pub(super) async fn open_meta_group(
    registry: &GroupRegistry,
    topology: &Topology,
    machine: MetaMachine,
) -> Result<Arc<RaftGroup>, JetStreamError> {
    let nodes = topology.node_ids();
    if registry.storage().log.is_corrupt(META_GROUP) {
        if nodes.len() < 2 {
            return Err(JetStreamError::Corrupt { group: META_GROUP });
        }
        rebuild_corrupt_group(registry, META_GROUP).await?;
    }
    let bootstrap = match nodes.iter().min() {
        Some(first) => Bootstrap::First(*first),
        None => Bootstrap::EveryVoter,
    };
    registry
        .start(
            META_GROUP,
            topology.voters(&nodes),
            bootstrap,
            Box::new(machine),
        )
        .await
        .map_err(|e| JetStreamError::Group {
            group: META_GROUP,
            message: e.to_string(),
        })
}

/// Re-opens the (stopped) meta group: a new machine on the catalog's view, the group from its
/// log and sled state. The caller swaps it in (`Catalog::replace_meta_group`).
pub(super) async fn reopen_meta_group(catalog: &Catalog) -> Result<Arc<RaftGroup>, JetStreamError> {
    let machine = MetaMachine::for_view(catalog.meta());
    open_meta_group(catalog.meta_registry(), catalog.topology(), machine).await
}

/// Opens (or re-opens) a stream's group from its log and sled state. A group the log marked
/// corrupt is not started: its data cannot be trusted.
pub(super) async fn open_stream_group(
    catalog: &Catalog,
    assignment: &StreamAssignment,
) -> Result<(Arc<RaftGroup>, StreamView), JetStreamError> {
    let registry = catalog.registry_for(assignment.config.storage);
    if registry.storage().log.is_corrupt(assignment.group) {
        if assignment.replicas.len() < 2 {
            return Err(JetStreamError::Corrupt {
                group: assignment.group,
            });
        }
        rebuild_corrupt_group(registry, assignment.group).await?;
    }
    {
        // A stream created after this node's store was replaced never had state here.
        let amnesia = registry.storage().amnesia.clone();
        let (group, created) = (assignment.group, assignment.created_nanos);
        tokio::task::spawn_blocking(move || amnesia.clear_if_created_after_loss(group, created))
            .await?
            .map_err(|e| JetStreamError::Group {
                group,
                message: format!("cannot update the amnesia register: {e}"),
            })?;
    }
    let (machine, view) =
        StreamMachine::new(assignment.config.clone(), catalog.block_cache().clone());
    // The placement's first replica stands for election at once; placement spreads first
    // replicas, so leaders spread. (A group of one voter elects itself at once either way.)
    let bootstrap = match assignment.replicas.first() {
        Some(first) => Bootstrap::First(*first),
        None => Bootstrap::EveryVoter,
    };
    let group = registry
        .start(
            assignment.group,
            catalog.topology().voters(&assignment.replicas),
            bootstrap,
            Box::new(machine),
        )
        .await
        .map_err(|e| JetStreamError::Group {
            group: assignment.group,
            message: e.to_string(),
        })?;
    Ok((group, view))
}

/// A replicated group whose records in the log are damaged: the log segments are copied to
/// the quarantine directory, the group is marked amnesiac (before anything is dropped), and
/// its log and state are dropped, so it starts empty and is rebuilt from its peers
/// (ADR 0015).
async fn rebuild_corrupt_group(registry: &GroupRegistry, group: u64) -> Result<(), JetStreamError> {
    let storage = registry.storage().clone();
    let reason = format!("raft group {group} is corrupt in the log");
    let failed = |e: std::io::Error| JetStreamError::Group {
        group,
        message: format!("cannot quarantine the damaged group: {e}"),
    };
    let moved = {
        let reason = reason.clone();
        let storage = storage.clone();
        tokio::task::spawn_blocking(move || {
            storage.amnesia.forget(group, reason.clone())?;
            crate::consensus::quarantine::quarantine_group_log(storage.data_dir(), &reason)
        })
        .await?
        .map_err(failed)?
    };
    tracing::error!(
        group,
        quarantine = %moved.display(),
        "{reason}: log copied aside, the group is dropped here and rebuilt from its peers"
    );
    registry
        .drop_group(group)
        .await
        .map_err(|e| JetStreamError::Group {
            group,
            message: e.to_string(),
        })
}
