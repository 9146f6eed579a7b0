//! The supervisor: one task per node that restarts the groups a fatal storage error stopped.
//!
//! A failed WAL write (disk full, unwritable store) makes openraft stop the group that wrote
//! (fatal); the write was rolled back in the WAL and never acknowledged. Every
//! `SUPERVISE_EVERY` the supervisor looks at the meta group and at every running stream group;
//! a stopped one is restarted in place (`restart_in_place`, the same steps for both): what is
//! left of it is stopped, it is re-opened from its log and sled state, and the new group is
//! swapped in where the front holds it — the meta group in `JetStream` (its machine writes to
//! the same `MetaView`), a stream's group in its `StreamHandle` — so nothing else is re-wired.
//! Until a restart succeeds proposals to the group fail with 10008 and the next pass retries,
//! so the group comes back when space does.
//!
//! Every `RETRY_OFFLINE_EVERY` it also retries offline streams whose log is not corrupt (their
//! start failed for another reason, which may have passed).

use std::fmt::Display;
use std::future::Future;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::service::JetStream;
use super::stream::StreamHandle;
use crate::consensus::{GroupRegistry, RaftGroup};

/// How often the supervisor looks for stopped groups.
const SUPERVISE_EVERY: Duration = Duration::from_millis(200);
/// How often it retries offline streams that are not corrupt (a failing start logs).
const RETRY_OFFLINE_EVERY: Duration = Duration::from_secs(5);

/// The supervisor's task, until shutdown.
pub(super) async fn supervise(js: Weak<JetStream>, shutdown: CancellationToken) {
    let mut next_offline_retry = tokio::time::Instant::now() + RETRY_OFFLINE_EVERY;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(SUPERVISE_EVERY) => {}
        }
        let Some(js) = js.upgrade() else { return };
        js.restart_meta_if_stopped().await;
        js.restart_stopped_streams().await;
        if tokio::time::Instant::now() >= next_offline_retry {
            next_offline_retry = tokio::time::Instant::now() + RETRY_OFFLINE_EVERY;
            js.retry_offline_streams().await;
        }
    }
}

/// Why `group` stopped for good, or `None` while it runs.
pub(super) fn stopped_reason(group: &RaftGroup) -> Option<String> {
    group
        .raft()
        .metrics()
        .borrow()
        .running_state
        .clone()
        .err()
        .map(|fatal| fatal.to_string())
}

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

impl JetStream {
    /// Restarts the meta group if it stopped: stream create/update/delete work again.
    async fn restart_meta_if_stopped(self: &Arc<Self>) {
        let group = self.meta_group();
        if stopped_reason(&group).is_none() {
            return;
        }
        let _serialized = self.reconciling.lock().await;
        if self.shared.shutdown.is_cancelled() {
            return; // groups stop on purpose now
        }
        let group = self.meta_group();
        let Some(reason) = stopped_reason(&group) else {
            return;
        };
        let restart = self.restart_meta_group();
        if let Some(restarted) =
            restart_in_place(&self.registry, &group, "meta", &reason, restart).await
        {
            self.replace_meta_group(restarted);
        }
    }

    /// Restarts every running stream whose group stopped.
    async fn restart_stopped_streams(self: &Arc<Self>) {
        let stopped: Vec<Arc<StreamHandle>> = self
            .streams
            .read()
            .values()
            .filter(|stream| stream.handle.is_stopped())
            .map(|stream| stream.handle.clone())
            .collect();
        for handle in stopped {
            self.restart_stream(&handle).await;
        }
    }

    /// Restarts a stopped stream group in place: waiting pull requests get `409 Leadership
    /// Change`, the restarted group is swapped into the handle, and delivery starts again.
    /// On failure the stopped group stays (publishes get 10008).
    async fn restart_stream(self: &Arc<Self>, handle: &Arc<StreamHandle>) {
        let _serialized = self.reconciling.lock().await;
        if self.shared.shutdown.is_cancelled() {
            return; // groups stop on purpose now
        }
        let name = handle.name().to_owned();
        let still_ours = self
            .streams
            .read()
            .get(&name)
            .is_some_and(|s| Arc::ptr_eq(&s.handle, handle));
        let Some(assignment) = self.assignment(&name).filter(|_| still_ours) else {
            return;
        };
        let group = handle.group();
        let reason = stopped_reason(&group).unwrap_or_default();
        self.delivery().leadership_lost(&name);
        let registry = self.registry_for(assignment.config.storage);
        let what = format!("stream {name}");
        let restart = self.start_group(&assignment);
        if let Some((restarted, view)) =
            restart_in_place(registry, &group, &what, &reason, restart).await
        {
            handle.replace_group(restarted.clone(), view);
            self.rewatch_leadership(&name, restarted);
        }
    }

    /// Tries again to start offline streams whose log is not corrupt.
    async fn retry_offline_streams(self: &Arc<Self>) {
        let retry = self.offline.read().values().any(|stream| {
            !self
                .registry_for(stream.storage)
                .storage()
                .log
                .is_corrupt(stream.group)
        });
        if retry {
            self.reconcile().await;
        }
    }
}
