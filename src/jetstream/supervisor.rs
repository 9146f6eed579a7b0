//! The supervisor: one task per node that restarts the groups a fatal storage error stopped.
//!
//! A failed WAL write (disk full, unwritable store) makes openraft stop the group that wrote
//! (fatal); the write was rolled back in the WAL and never acknowledged. When the leadership
//! watchers see a group stopped (and every `SUPERVISE_EVERY` anyway) the supervisor looks at
//! the meta group and at every running stream group;
//! a stopped one is restarted in place (`restart_in_place`, the same steps for both): what is
//! left of it is stopped, it is re-opened from its log and sled state, and the new group is
//! swapped in where the front holds it — the meta group in the `Catalog` (its machine writes to
//! the same `MetaView`), a stream's group in its `StreamHandle` — so nothing else is re-wired.
//! Until a restart succeeds proposals to the group fail with 10008 and the next pass retries,
//! so the group comes back when space does.
//!
//! A group whose stored state a read found damaged (`consensus::damage`, ADR 0018) is
//! restarted the same way, the restart setting the damaged state aside so the replica is
//! rebuilt from its peers; a single-replica stream goes offline instead (10194 naming the
//! damage), its data left in place.
//!
//! Every `RETRY_OFFLINE_EVERY` it also retries offline streams whose log is not corrupt (their
//! start failed for another reason, which may have passed): that is a reconciliation, so the
//! task's loop lives with reconciliation in `lifecycle` and calls the checks here.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::catalog::Catalog;
use super::error::JetStreamError;
use super::groups;
use super::leadership;
use super::lifecycle;
use super::stream::{stopped_reason, StreamHandle};
use crate::consensus::{GroupRegistry, RaftGroup};

/// How often the supervisor looks for stopped groups even when none was reported stopped
/// (the leadership watcher reports them: `Catalog::group_stopped`). Looking costs a read of
/// every group's metrics, which with thousands of idle streams was most of an idle node's
/// CPU at 200 ms.
pub(super) const SUPERVISE_EVERY: Duration = Duration::from_secs(5);
/// How soon a pass follows one that left a group stopped (its restart failed).
pub(super) const RETRY_RESTART_AFTER: Duration = Duration::from_millis(200);
/// How often it retries offline streams that are not corrupt (a failing start logs).
pub(super) const RETRY_OFFLINE_EVERY: Duration = Duration::from_secs(5);

/// Stops what is left of the stopped `group` and starts it again with `start`; logs the
/// outcome. `None` if the start failed (the next pass retries).
async fn restart_in_place<T, E: Display>(
    registry: &GroupRegistry,
    group: &RaftGroup,
    what: &str,
    reason: &str,
    start: impl Future<Output = Result<T, E>>,
) -> Option<T> {
    let id = group.id();
    if let Err(e) = registry.stop(id).await {
        tracing::debug!(
            group = id,
            "stopped {what} group did not shut down cleanly: {e}"
        );
    }
    match start.await {
        Ok(started) => {
            tracing::warn!(group = id, "{what} group restarted after: {reason}");
            Some(started)
        }
        Err(e) => {
            tracing::warn!(
                group = id,
                "{what} group stopped ({reason}); restart failed, retrying: {e}"
            );
            None
        }
    }
}

/// Restarts the meta group if it stopped: stream create/update/delete work again.
pub(super) async fn restart_meta_if_stopped(catalog: &Catalog) {
    let group = catalog.meta_group();
    if stopped_reason(&group).is_none() {
        return;
    }
    let _serialized = catalog.reconciling.lock().await;
    if catalog.shared().shutdown.is_cancelled() {
        return; // groups stop on purpose now
    }
    let group = catalog.meta_group();
    let Some(reason) = stopped_reason(&group) else {
        return;
    };
    let restart = groups::reopen_meta_group(catalog);
    if let Some(restarted) =
        restart_in_place(catalog.meta_registry(), &group, "meta", &reason, restart).await
    {
        catalog.replace_meta_group(restarted);
    }
}

/// Whether the meta group or a stream's group is stopped (a restart failed: retry soon).
pub(super) fn any_stopped(catalog: &Catalog) -> bool {
    stopped_reason(&catalog.meta_group()).is_some()
        || catalog
            .running_groups()
            .iter()
            .any(|(_, handle)| needs_restart(catalog, handle))
}

/// Why a running stream's group must be restarted: it stopped, or a read found its stored
/// state damaged (`consensus::damage`; the restart sets it aside, ADR 0018).
fn restart_reason(catalog: &Catalog, handle: &StreamHandle) -> Option<String> {
    let group = handle.group();
    stopped_reason(&group).or_else(|| {
        let storage = handle.view().read(|g| g.stream().config().storage);
        let damage = catalog.registry_for(storage).storage().state.damage();
        damage
            .reason(group.id())
            .map(|reason| format!("its stored state is damaged: {reason}"))
    })
}

fn needs_restart(catalog: &Catalog, handle: &StreamHandle) -> bool {
    restart_reason(catalog, handle).is_some()
}

/// Restarts every running stream whose group stopped or was found damaged.
pub(super) async fn restart_stopped_streams(catalog: &Arc<Catalog>) {
    let stopped: Vec<Arc<StreamHandle>> = catalog
        .running_groups()
        .into_iter()
        .map(|(_, handle)| handle)
        .filter(|handle| needs_restart(catalog, handle))
        .collect();
    for handle in stopped {
        restart_stream(catalog, &handle).await;
    }
}

/// Restarts a stopped stream group in place: waiting pull requests get `409 Leadership
/// Change`, the restarted group is swapped into the handle, and delivery starts again.
/// On failure the stopped group stays (publishes get 10008).
async fn restart_stream(catalog: &Arc<Catalog>, handle: &Arc<StreamHandle>) {
    let _serialized = catalog.reconciling.lock().await;
    if catalog.shared().shutdown.is_cancelled() {
        return; // groups stop on purpose now
    }
    let name = handle.name().to_owned();
    let still_ours = catalog
        .read_stream(&name, |s| Arc::ptr_eq(&s.handle, handle))
        .unwrap_or(false);
    let Some(assignment) = catalog.assignment(&name).filter(|_| still_ours) else {
        return;
    };
    let group = handle.group();
    let reason = restart_reason(catalog, handle).unwrap_or_default();
    catalog.delivery().leadership_lost(&name);
    let registry = catalog.registry_for(assignment.config.storage);
    let damage = registry.storage().state.damage().reason(group.id());
    if let Some(damage) = damage.filter(|_| assignment.replicas.len() < 2) {
        // A single replica cannot be rebuilt: the stream goes offline, its data in place.
        lifecycle::take_down_running(catalog, &name);
        if let Err(e) = registry.stop(group.id()).await {
            tracing::debug!(
                group = group.id(),
                "damaged group did not stop cleanly: {e}"
            );
        }
        let error = JetStreamError::Damaged {
            group: group.id(),
            reason: damage,
        };
        lifecycle::set_offline(catalog, &name, &assignment, error.to_string());
        return;
    }
    let what = format!("stream {name}");
    let restart = groups::open_stream_group(catalog, &assignment);
    if let Some((restarted, view)) =
        restart_in_place(registry, &group, &what, &reason, restart).await
    {
        handle.replace_group(restarted.clone(), view);
        leadership::rewatch_leadership(catalog, &name, restarted);
    }
}

/// Whether an offline stream's log is not corrupt nor its state damaged, so that starting it
/// again may work now.
pub(super) fn offline_worth_retrying(catalog: &Catalog) -> bool {
    catalog.any_offline(|stream| {
        let storage = catalog.registry_for(stream.storage).storage();
        !storage.log.is_corrupt(stream.group)
            && storage.state.damage().reason(stream.group).is_none()
    })
}
