//! The durable consumer a stream copies an origin through (ADR 0032): the one a mirror's or
//! source's config names (the user's), or the one this stream makes on a work-queue or
//! interest origin — named after the stream and the origin's key so every leader of the
//! stream finds the same one, with the origin's start and filter, acknowledged by flow
//! control, and deleted when the stream stops copying that origin.

use std::sync::Arc;
use std::time::Duration;

use super::copier::OriginPlan;
use super::origin::{OriginReader, ReadError};
use crate::jsapi::consumer_config::{AckPolicy, DeliverPolicy};
use crate::jsapi::stream_config::StreamConsumerSource;
use crate::jsapi::ConsumerConfig;
use crate::jscore::sourcing::SourceKind;
use crate::server::ServerShared;

/// The idle heartbeat of the consumers made here (nats-server forces 1 s on `flow_control`
/// consumers).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Nothing at all from the consumer for this long (three heartbeats): reset it, and if that
/// The consumer a durable copy reads.
#[derive(Debug, Clone)]
pub struct DurableConsumer {
    pub(super) name: String,
    pub(super) deliver_subject: String,
    /// Made (and updated) here, not by the user.
    pub(super) managed: bool,
}

impl DurableConsumer {
    /// The consumer a mirror's or source's config names.
    pub fn named(consumer: &StreamConsumerSource) -> Self {
        Self {
            name: consumer.name.clone(),
            deliver_subject: consumer.deliver_subject.clone(),
            managed: false,
        }
    }

    /// The consumer this stream makes on a work-queue or interest origin: named after the
    /// stream and the origin's key, so every leader of the stream finds the same one.
    pub fn managed(stream: &str, plan: &OriginPlan) -> Self {
        Self::managed_for(stream, &plan.key, plan.kind)
    }

    pub fn managed_for(stream: &str, key: &str, kind: SourceKind) -> Self {
        let hash = name_hash(stream, key);
        let prefix = match kind {
            SourceKind::Mirror => "JS_MIRROR",
            SourceKind::Source => "JS_SRC",
        };
        Self {
            name: format!("{prefix}_{hash}"),
            deliver_subject: format!("_JETRAFT_.DLV.{hash}"),
            managed: true,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn config(&self, stream: &str, plan: &OriginPlan) -> ConsumerConfig {
        let (deliver_policy, opt_start_seq, opt_start_time) =
            match (plan.start_seq, plan.start_time) {
                (seq, _) if seq > 0 => (DeliverPolicy::ByStartSequence, seq, None),
                (_, Some(time)) => (DeliverPolicy::ByStartTime, 0, Some(time)),
                _ => (DeliverPolicy::All, 0, None),
            };
        let (filter_subject, filter_subjects) = match plan.consumer_filters.as_slice() {
            [one] => (one.clone(), Vec::new()),
            many => (String::new(), many.to_vec()),
        };
        ConsumerConfig {
            durable_name: self.name.clone(),
            name: self.name.clone(),
            description: format!("stream {stream} copies {} through it", plan.origin),
            deliver_subject: self.deliver_subject.clone(),
            deliver_policy,
            opt_start_seq,
            opt_start_time,
            filter_subject,
            filter_subjects,
            ack_policy: AckPolicy::FlowControl,
            flow_control: true,
            idle_heartbeat: HEARTBEAT.as_nanos() as i64,
            max_deliver: -1,
            sourcing: true,
            ..ConsumerConfig::default()
        }
    }
}

/// 16 hex digits of FNV-1a over the stream and the origin key: stable across versions and
/// nodes (unlike std's hasher), and a valid token in names and subjects.
fn name_hash(stream: &str, key: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in stream.bytes().chain([0u8]).chain(key.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016X}")
}

/// Deletes the consumer a stream made on a work-queue or interest origin, once the stream
/// no longer copies that origin (its source removed, or the stream deleted). Best effort,
/// as on nats-server: an origin that does not answer keeps it.
pub async fn delete_managed(
    shared: Arc<ServerShared>,
    stream: &str,
    origin: &str,
    key: &str,
    kind: SourceKind,
) -> Result<(), ReadError> {
    let consumer = DurableConsumer::managed_for(stream, key, kind);
    let mut reader = OriginReader::new(shared, origin);
    reader.delete_consumer(consumer.name()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_names_are_stable_and_distinct() {
        let a = DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Source);
        assert_eq!(
            a.name,
            DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Source).name
        );
        assert!(a.name.starts_with("JS_SRC_"));
        assert!(a.deliver_subject.starts_with("_JETRAFT_.DLV."));
        let other = DurableConsumer::managed_for("AGG2", "ORDERS", SourceKind::Source);
        assert_ne!(a.name, other.name);
        let shifted = DurableConsumer::managed_for("AGGO", "RDERS", SourceKind::Source);
        assert_ne!(a.name, shifted.name);
        let mirror = DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Mirror);
        assert!(mirror.name.starts_with("JS_MIRROR_"));
        assert_eq!(name_hash("", "").len(), 16);
        assert!(crate::jsapi::names::is_valid_name(&a.name));
    }
}
