//! `ConsumerInfo` as nats-server emits it: the body of consumer create and info replies and
//! the items of `CONSUMER.LIST`. The numbers come from the consumer state machine (jscore).

use serde::{Deserialize, Serialize};

use super::consumer_config::ConsumerConfig;
use super::serde_util::{is_false, is_zero_i64, nullable};
use super::stream_info::ClusterInfo;
use super::time::{self, Timestamp};

/// Configuration and progress of one consumer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerInfo {
    #[serde(rename = "stream_name")]
    pub stream_name: String,
    pub name: String,
    pub created: Timestamp,
    /// Normalized config (defaults filled in).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConsumerConfig>,
    /// Last delivery: its consumer sequence and the stream sequence of that message. For a
    /// new consumer: consumer_seq 0, stream_seq = start sequence - 1.
    pub delivered: SequenceInfo,
    /// Highest contiguously acknowledged delivery.
    pub ack_floor: SequenceInfo,
    /// Delivered but not yet acked.
    pub num_ack_pending: i64,
    /// Distinct messages delivered more than once.
    pub num_redelivered: i64,
    /// Queued pull requests.
    pub num_waiting: i64,
    /// Messages matching the filter not yet delivered.
    pub num_pending: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    /// A push consumer with interest on its deliver subject.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub push_bound: bool,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub paused: bool,
    /// Nanoseconds until the pause ends.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub pause_remaining: i64,
    /// When this info was gathered.
    pub ts: Timestamp,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub priority_groups: Vec<PriorityGroupState>,
}

/// A (consumer sequence, stream sequence) pair and when it last moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SequenceInfo {
    #[serde(rename = "consumer_seq")]
    pub consumer_seq: u64,
    #[serde(rename = "stream_seq")]
    pub stream_seq: u64,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub last_active: Option<Timestamp>,
}

/// State of one priority group (2.11).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PriorityGroupState {
    pub group: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub pinned_client_id: String,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub pinned_ts: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::consumer_config::AckPolicy;
    use serde_json::json;

    #[test]
    fn new_consumer_info_shape() {
        let info = ConsumerInfo {
            stream_name: "ORDERS".into(),
            name: "order-processor".into(),
            created: Timestamp::from_unix_nanos(1_000_000_000),
            config: Some(ConsumerConfig {
                durable_name: "order-processor".into(),
                ack_policy: AckPolicy::Explicit,
                ..ConsumerConfig::default()
            }),
            num_pending: 4,
            cluster: Some(ClusterInfo {
                leader: "n1".into(),
                ..ClusterInfo::default()
            }),
            ts: Timestamp::from_unix_nanos(2_000_000_000),
            ..ConsumerInfo::default()
        };
        let value = serde_json::to_value(&info).unwrap();
        assert_eq!(value["delivered"], json!({"consumer_seq":0,"stream_seq":0}));
        assert_eq!(value["ack_floor"], json!({"consumer_seq":0,"stream_seq":0}));
        for field in [
            "num_ack_pending",
            "num_redelivered",
            "num_waiting",
            "num_pending",
        ] {
            assert!(value.get(field).is_some(), "{field}");
        }
        assert!(value.get("push_bound").is_none() && value.get("paused").is_none());
        assert_eq!(value["config"]["ack_policy"], json!("explicit"));
        assert_eq!(serde_json::from_value::<ConsumerInfo>(value).unwrap(), info);
    }

    #[test]
    fn last_active_is_emitted_when_known() {
        let seq = SequenceInfo {
            consumer_seq: 3,
            stream_seq: 7,
            last_active: Some(Timestamp::from_unix_nanos(0)),
        };
        assert_eq!(
            serde_json::to_value(seq).unwrap(),
            json!({"consumer_seq":3,"stream_seq":7,"last_active":"1970-01-01T00:00:00Z"})
        );
    }
}
