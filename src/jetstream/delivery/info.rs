//! ConsumerInfo: the replicated numbers come from the stream group's state (delivered, ack
//! floor, ack pending, redelivered, pending), or from the leader's copy of a consumer that
//! delivers without Raft (ADR 0034), the rest from this node's `Activity` record
//! (created, last-active times, waiting pull requests, push interest) and the clock. The
//! cluster block is the caller's to give (see `api::consumers`).

use std::sync::atomic::Ordering;

use std::sync::Arc;

use bytes::Bytes;

use super::{Activity, DeliveryRegistry};
use crate::jetstream::info::add_server_metadata;
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::stream_info::ClusterInfo;
use crate::jsapi::{ConsumerInfo, SequenceInfo, Timestamp};
use crate::jscore::consumer::SequencePair;

/// The API level a consumer's config needs (its `_nats.req.level`), as nats-server's
/// `setStaticConsumerMetadata` reckons it: pause and priority groups are level 1.
fn required_api_level(config: &crate::jsapi::ConsumerConfig) -> i64 {
    let pause = crate::jscore::consumer::pause_until_nanos(config).is_some();
    let priority = config.priority_policy != crate::jsapi::PriorityPolicy::None
        || config.priority_timeout != 0
        || !config.priority_groups.is_empty();
    i64::from(pause || priority)
}

/// The info of consumer `name`, or `None` if the stream has no such consumer. `cluster` is
/// its `cluster` block as the caller reports it (`info::consumer_cluster_info`).
pub fn consumer_info(
    registry: &DeliveryRegistry,
    handle: &Arc<StreamHandle>,
    name: &str,
    cluster: Option<ClusterInfo>,
) -> Option<ConsumerInfo> {
    let activity = registry.activity(handle, name);
    let activity = activity.as_deref();
    let now = Timestamp::now();
    let time_of = |nanos: i64| (nanos > 0).then(|| Timestamp::from_unix_nanos(nanos));
    let load = |read: fn(&Activity) -> i64| activity.map_or(0, read);
    let sequence = |pair: SequencePair, last_active: i64| SequenceInfo {
        consumer_seq: pair.consumer_seq,
        stream_seq: pair.stream_seq,
        last_active: time_of(last_active),
    };
    handle.view().read(|group| {
        let consumer = group.consumer(name)?;
        let progress = match activity {
            Some(activity) => {
                let stream = group.stream();
                activity
                    .local
                    .read(consumer, stream, |seen| seen.progress(stream))
            }
            None => consumer.progress(group.stream()),
        };
        let mut config = consumer.config().clone();
        add_server_metadata(&mut config.metadata);
        config.metadata.insert(
            "_nats.req.level".into(),
            required_api_level(&config).to_string(),
        );
        let wall = crate::jetstream::now_nanos();
        let pause_remaining = consumer
            .pause_until_nanos()
            .map_or(0, |until| until.saturating_sub(wall).max(0));
        let deliver_subject = Bytes::copy_from_slice(config.deliver_subject.as_bytes());
        let push_bound = !config.is_pull() && registry.outbox().has_interest(&deliver_subject);
        Some(ConsumerInfo {
            stream_name: handle.name().to_owned(),
            name: name.to_owned(),
            // Replicated with the config; consumers created before it was kept fall back
            // to when this node first saw them.
            created: time_of(consumer.created_nanos())
                .or_else(|| time_of(load(|a| a.created_nanos.load(Ordering::Relaxed))))
                .unwrap_or(now),
            config: Some(config),
            delivered: sequence(
                progress.delivered,
                load(|a| a.last_delivered_nanos.load(Ordering::Relaxed)),
            ),
            ack_floor: sequence(
                progress.ack_floor,
                load(|a| a.last_acked_nanos.load(Ordering::Relaxed)),
            ),
            num_ack_pending: progress.num_ack_pending as i64,
            num_redelivered: progress.num_redelivered as i64,
            num_waiting: load(|a| a.num_waiting.load(Ordering::Relaxed) as i64),
            num_pending: progress.num_pending,
            cluster,
            push_bound,
            priority_groups: super::priority::group_states(
                consumer.config(),
                activity.and_then(|a| a.pin.lock().clone()),
            ),
            paused: pause_remaining > 0,
            pause_remaining,
            ts: now,
        })
    })
}
