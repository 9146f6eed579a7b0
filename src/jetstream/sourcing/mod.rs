//! Mirrors and sources, the leader's half: while this node leads a stream that mirrors
//! another or has sources, one copy task per origin (`copier.rs`) reads the origin through
//! the JetStream API (`origin.rs`) and proposes what it read to this stream's own Raft group
//! as `Sourced` commands carrying the origin sequence and the replicated position it
//! continues (`jscore::sourcing`). A new leader resumes from the replicated position, so
//! neither a leader change nor a restart of either side loses or duplicates a message.
//!
//! Why reading through the API (a pull loop of `STREAM.MSG.GET`) rather than an ordered push
//! consumer as nats-server does: the origin needs no consumer (nothing to create, clean up
//! or replicate on the origin, no flow control to answer), a read is idempotent so a retry
//! after a timeout or a leader change is harmless, and the position that matters lives in
//! this stream's replicated state, not in a consumer's. The cost: one request per message
//! and, once caught up, a poll of the origin every `IDLE_POLL_MAX` at most.
//!
//! Started by `leadership::start_serving` with the origins the stream's config names (a
//! config update restarts serving, so changed origins take effect), stopped with leadership.

mod copier;
mod durable;
mod durable_consumer;
mod origin;

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::catalog::Origins;
use super::stream::StreamHandle;
use crate::server::ServerShared;

pub use copier::OriginPlan;

use crate::jsapi::stream_config::{StreamConfig, StreamSource};
use crate::jscore::sourcing::SourceKind;

/// After a config update (`new`) or the stream's deletion (`None`): deletes, in the
/// background, the consumers this stream made on work-queue and interest origins it no
/// longer copies (`durable.rs`). An origin with a consumer of the user's is left alone.
pub(super) fn forget_origins(
    shared: &Arc<ServerShared>,
    stream: &str,
    old: &StreamConfig,
    new: Option<&StreamConfig>,
) {
    let keyed = |config: &StreamConfig| -> Vec<(String, String, SourceKind)> {
        let key = |origin: &StreamSource, kind| match kind {
            SourceKind::Mirror => origin.name.clone(),
            SourceKind::Source => origin.internal_name(),
        };
        let mirror = config.mirror.iter().map(|m| (m, SourceKind::Mirror));
        let sources = config.sources.iter().map(|s| (s, SourceKind::Source));
        mirror
            .chain(sources)
            .filter(|(origin, _)| origin.consumer.is_none() && origin.external.is_none())
            .map(|(origin, kind)| (origin.name.clone(), key(origin, kind), kind))
            .collect()
    };
    let kept = new.map(keyed).unwrap_or_default();
    for (origin, key, kind) in keyed(old) {
        if kept.iter().any(|(_, k, other)| *k == key && *other == kind) {
            continue;
        }
        let (shared2, stream) = (shared.clone(), stream.to_owned());
        shared.tasks.spawn(async move {
            if let Err(error) =
                durable_consumer::delete_managed(shared2, &stream, &origin, &key, kind).await
            {
                tracing::info!(stream, origin, "sourcing consumer not deleted: {error:?}");
            }
        });
    }
}

/// The copy tasks of a stream's origins, as one future (`None` without origins).
pub(super) fn run(
    shared: &Arc<ServerShared>,
    stream: &Arc<StreamHandle>,
    origins: &Origins,
    stop: CancellationToken,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let (mirror, sources) = origins;
    let plans: Vec<OriginPlan> = match mirror {
        Some(mirror) => vec![OriginPlan::mirror(mirror)],
        None => sources.iter().map(OriginPlan::source).collect(),
    };
    if plans.is_empty() {
        return None;
    }
    let shared = shared.clone();
    let stream = stream.clone();
    Some(async move {
        let copies = plans
            .into_iter()
            .map(|plan| copier::run(shared.clone(), stream.clone(), plan, stop.clone()));
        futures::future::join_all(copies).await;
        stream.sources().clear();
    })
}
