//! Which replica serves a stream. Every replica runs the stream's group; the one that leads it
//! subscribes the stream's subjects, runs its consumers' delivery and acks and its max_age
//! expiry, and answers the stream's API requests. Followers only apply the log.
//!
//! The node's one leadership watcher task (`leadership_watch`) follows every stream group's
//! Raft metrics on every replica and switches serving on and off as leadership comes and
//! goes. After a failover the new leader's delivery starts from the replicated consumer state, so whatever was delivered but not acknowledged
//! is delivered again once its ack wait passes (at-least-once). The watcher also notes since
//! when the replica has known no leader at all, which decides who answers for a leaderless
//! stream (`api::leaderless`; the clock is `leader_clock`).
//!
//! These are functions over the `Catalog`, where each stream's serving state lives: the
//! watcher holds it weakly, and `lifecycle` (start, resubscribe, removal) and `supervisor`
//! (a restarted group) call in here to start or stop serving.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::catalog::{Catalog, Leading};
use super::publish;
use super::stream::stopped_reason;
use crate::consensus::RaftGroup;

/// Follows whether this node knows a meta leader (`api::leaderless` answers for the meta
/// group too), from the meta group in place: the supervisor may swap in a restarted one,
/// which is noticed within [`META_GROUP_RECHECK`].
pub(super) async fn watch_meta_leadership(catalog: Weak<Catalog>, shutdown: CancellationToken) {
    loop {
        let Some(group) = catalog.upgrade().map(|catalog| catalog.meta_group()) else {
            return;
        };
        let mut metrics = group.raft().metrics();
        let mut reporting = true;
        loop {
            metrics.borrow_and_update();
            let Some(catalog) = catalog.upgrade() else {
                return;
            };
            let knows_leader = group.leadership().knows_leader;
            catalog.note_meta_leader_known(knows_leader);
            if stopped_reason(&group).is_some() {
                catalog.group_stopped.notify_one();
            }
            if !Arc::ptr_eq(&catalog.meta_group(), &group) {
                break;
            }
            drop(catalog);
            tokio::select! {
                _ = shutdown.cancelled() => return,
                // A stopped group's metrics end; its replacement is picked up by the recheck.
                changed = metrics.changed(), if reporting => reporting = changed.is_ok(),
                _ = tokio::time::sleep(META_GROUP_RECHECK) => {}
            }
        }
    }
}

/// How often the meta watcher looks for a restarted meta group.
const META_GROUP_RECHECK: Duration = Duration::from_secs(1);

/// Starts following the leadership of stream `name`'s `group` until `stop`. A group that
/// leads already and has applied its log (a single voter its caller waited for) is served
/// before this returns, so a create's reply never precedes the stream's subscriptions; the
/// first decision is the watcher's own, so one that has not applied yet is not served and
/// then withdrawn.
pub(super) fn watch_leadership(
    catalog: &Arc<Catalog>,
    name: &str,
    group: Arc<RaftGroup>,
    stop: CancellationToken,
) {
    catalog
        .leadership_watchers()
        .watch(catalog, name, group, stop);
}

/// The stream's group was replaced (restarted after a storage failure): stop serving from
/// the old one and follow the new one.
pub(super) fn rewatch_leadership(catalog: &Arc<Catalog>, name: &str, group: Arc<RaftGroup>) {
    let stop = catalog.shared().shutdown.child_token();
    let previous = catalog.update_stream(name, |stream| {
        stream.stop.cancel();
        stream.stop = stop.clone();
        stream.leading.take()
    });
    let Some(previous) = previous else {
        return;
    };
    if let Some(previous) = previous {
        end_leading(catalog, name, previous);
    }
    watch_leadership(catalog, name, group, stop);
}

/// Starts serving stream `name` as its leader: ingest on its subjects, delivery, expiry,
/// copying from its mirror's or sources' origins.
/// Idempotent.
pub(super) fn start_serving(catalog: &Arc<Catalog>, name: &str) {
    let Some(Some((handle, subjects, origins))) = catalog.read_stream(name, |stream| {
        stream.leading.is_none().then(|| {
            (
                stream.handle.clone(),
                stream.subjects.clone(),
                stream.origins.clone(),
            )
        })
    }) else {
        return;
    };
    // Subscribing may re-enter the router; no lock of ours is held meanwhile.
    let ingest = publish::attach(catalog.shared(), &handle, &subjects);
    catalog.delivery().attach_stream(&handle);
    let stop = catalog.shared().shutdown.child_token();
    catalog
        .expiry()
        .follow(catalog.shared(), &handle, stop.clone());
    if let Some(copying) = super::sourcing::run(catalog.shared(), &handle, &origins, stop.clone()) {
        catalog.shared().tasks.spawn(copying);
    }
    let mut started = Some(Leading { ingest, stop });
    catalog.update_stream(name, |stream| {
        if stream.leading.is_none() {
            stream.leading = started.take();
        }
    });
    match started {
        None => tracing::info!(stream = %name, "leading the stream"),
        // Removed, or served by a concurrent start meanwhile.
        Some(started) => end_leading(catalog, name, started),
    }
}

/// Stops serving stream `name` as its leader (see [`end_leading`]). Idempotent.
pub(super) fn stop_serving(catalog: &Catalog, name: &str) {
    let previous = catalog
        .update_stream(name, |stream| stream.leading.take())
        .flatten();
    if let Some(previous) = previous {
        end_leading(catalog, name, previous);
        tracing::info!(stream = %name, "no longer leading the stream");
    }
}

/// Ends what a leader serves: ingest, expiry, delivery (waiting pulls get `409 Leadership
/// Change`).
pub(super) fn end_leading(catalog: &Catalog, name: &str, leading: Leading) {
    leading.stop.cancel();
    for sub in &leading.ingest {
        catalog.router().unsubscribe(sub);
    }
    catalog.delivery().leadership_lost(name);
    catalog.delivery().detach_stream(name);
}

/// Records whether this replica of stream `name` knows a leader of its group.
pub(super) fn note_leader_known(catalog: &Catalog, name: &str, knows_leader: bool) {
    let changed = catalog
        .read_stream(name, |stream| {
            stream.leader_clock.knows_leader() != knows_leader
        })
        .unwrap_or(false);
    if changed {
        catalog.update_stream(name, |stream| stream.leader_clock.note(knows_leader));
    }
}
