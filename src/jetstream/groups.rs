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
        let reason = format!("raft group {META_GROUP} is corrupt in the log");
        rebuild_corrupt_group(registry, META_GROUP, reason).await?;
    }
    registry.pacer().elect_first(META_GROUP);
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
        let reason = format!("raft group {} is corrupt in the log", assignment.group);
        rebuild_corrupt_group(registry, assignment.group, reason).await?;
    }
    set_aside_if_damaged(registry, assignment).await?;
    match start_stream_group(catalog, assignment).await {
        // Its `load` found the state damaged (a block failing its checksum): set aside and
        // started again, empty, to be rebuilt from the peers.
        Err(_) if damage_of(registry, assignment.group).is_some() => {
            set_aside_if_damaged(registry, assignment).await?;
            start_stream_group(catalog, assignment).await
        }
        started => started,
    }
}

fn damage_of(registry: &GroupRegistry, group: u64) -> Option<String> {
    registry.storage().state.damage().reason(group)
}

/// A stream group whose state was found damaged here (`consensus::damage`): a replicated
/// one is set aside and dropped, to start empty and be rebuilt from its peers; a single
/// replica cannot be, and its stream stays offline, its data in place (ADR 0018).
async fn set_aside_if_damaged(
    registry: &GroupRegistry,
    assignment: &StreamAssignment,
) -> Result<(), JetStreamError> {
    let group = assignment.group;
    let Some(reason) = damage_of(registry, group) else {
        return Ok(());
    };
    if assignment.replicas.len() < 2 {
        return Err(JetStreamError::Damaged { group, reason });
    }
    let reason = format!("raft group {group} state is damaged: {reason}");
    rebuild_corrupt_group(registry, group, reason).await?;
    registry.storage().state.damage().clear(group);
    Ok(())
}

async fn start_stream_group(
    catalog: &Catalog,
    assignment: &StreamAssignment,
) -> Result<(Arc<RaftGroup>, StreamView), JetStreamError> {
    let registry = catalog.registry_for(assignment.config.storage);
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

/// A replicated group whose records in the log, or whose state, are damaged: the log
/// segments and the group's keys are copied to the quarantine directory, the group is marked
/// amnesiac (before anything is dropped), and its log and state are dropped, so it starts
/// empty and is rebuilt from its peers (ADR 0015, ADR 0018).
async fn rebuild_corrupt_group(
    registry: &GroupRegistry,
    group: u64,
    reason: String,
) -> Result<(), JetStreamError> {
    let storage = registry.storage().clone();
    let failed = |e: std::io::Error| JetStreamError::Group {
        group,
        message: format!("cannot quarantine the damaged group: {e}"),
    };
    let moved = {
        let reason = reason.clone();
        let storage = storage.clone();
        tokio::task::spawn_blocking(move || {
            storage.amnesia.forget(group, reason.clone())?;
            crate::consensus::quarantine::quarantine_group(
                storage.data_dir(),
                &reason,
                &storage.state,
                group,
            )
        })
        .await?
        .map_err(failed)?
    };
    tracing::error!(
        group,
        quarantine = %moved.display(),
        "{reason}: log and state copied aside, the group is dropped here and rebuilt from its peers"
    );
    registry
        .drop_group(group)
        .await
        .map_err(|e| JetStreamError::Group {
            group,
            message: e.to_string(),
        })
}
