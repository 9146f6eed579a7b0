//! `ConsumerConfig`: a consumer's configuration as the JetStream API carries it (the
//! `config` of `$JS.API.CONSUMER.CREATE…` requests and of every ConsumerInfo), its policy
//! enums, and the create request envelope with its `action`. Defaults and validation are in
//! `consumer_config_check`.
//!
//! Decoding is lenient (unknown fields ignored, `null` = zero value); encoding mirrors
//! nats-server's Go struct, where almost everything is `omitempty` except `deliver_policy`,
//! `ack_policy`, `replay_policy` and `num_replicas`.
//!
//! One `ConsumerConfig` per consumer lives in the stream's state (jscore) on every replica.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::serde_util::{is_false, is_zero_i64, is_zero_u64, nullable, wire_enum};
use super::time::{self, Timestamp};

wire_enum! {
    /// Where a new consumer starts in the stream.
    pub enum DeliverPolicy {
        /// From the first message ("undefined" is what Go prints for its zero value).
        All = "all" | "undefined",
        /// From the last message.
        Last = "last",
        /// Only messages stored after the consumer was created.
        New = "new",
        /// From `opt_start_seq`.
        ByStartSequence = "by_start_sequence",
        /// From the first message at or after `opt_start_time`.
        ByStartTime = "by_start_time",
        /// The last message of every subject matching the filter.
        LastPerSubject = "last_per_subject",
    }
    default = All;
}

wire_enum! {
    /// How deliveries are acknowledged. Go's zero value is `none`; every client sends it.
    pub enum AckPolicy {
        /// Nothing to ack; a message counts as acked once delivered.
        None = "none",
        /// Acking sequence N acks everything up to N.
        All = "all",
        /// Every message is acked on its own.
        Explicit = "explicit",
        /// Acks ride on flow-control replies (2.14, push/sourcing consumers only).
        FlowControl = "flow_control",
    }
    default = None;
}

wire_enum! {
    /// How fast stored messages are replayed.
    pub enum ReplayPolicy {
        Instant = "instant",
        /// With the original gaps between messages.
        Original = "original",
    }
    default = Instant;
}

wire_enum! {
    /// Pull priority-group policy (2.11+, ADR-42).
    pub enum PriorityPolicy {
        None = "none" | "",
        Overflow = "overflow",
        PinnedClient = "pinned_client",
        Prioritized = "prioritized",
    }
    default = None;
}

fn is_priority_none(policy: &PriorityPolicy) -> bool {
    *policy == PriorityPolicy::None
}

/// Configuration of a consumer. Field order and `omitempty`s follow nats-server's Go struct.
/// Durations are nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumerConfig {
    /// Set = durable consumer (no inactivity cleanup unless `inactive_threshold` is set).
    #[serde(
        rename = "durable_name",
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub durable_name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    #[serde(deserialize_with = "nullable")]
    pub deliver_policy: DeliverPolicy,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub opt_start_seq: u64,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<Timestamp>,
    #[serde(deserialize_with = "nullable")]
    pub ack_policy: AckPolicy,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub ack_wait: i64,
    /// -1 = unlimited.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_deliver: i64,
    /// Redelivery delays; `backoff[0]` replaces `ack_wait`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub backoff: Vec<i64>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter_subject: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub filter_subjects: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub replay_policy: ReplayPolicy,
    /// Bits per second (push only).
    #[serde(
        rename = "rate_limit_bps",
        deserialize_with = "nullable",
        skip_serializing_if = "is_zero_u64"
    )]
    pub rate_limit_bps: u64,
    /// Ack-latency sampling, e.g. `"100%"`.
    #[serde(
        rename = "sample_freq",
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub sample_freq: String,
    /// Queued pull requests allowed (pull only).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_waiting: i64,
    /// -1 = unlimited.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_ack_pending: i64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub flow_control: bool,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub headers_only: bool,
    /// Largest `batch` a pull request may ask for.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_batch: i64,
    /// Longest `expires` a pull request may ask for (ns).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_expires: i64,
    /// Largest `max_bytes` a pull request may ask for.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_bytes: i64,
    /// Empty = pull consumer.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub deliver_subject: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub deliver_group: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub idle_heartbeat: i64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub inactive_threshold: i64,
    /// 0 = inherit from the stream. Always emitted.
    #[serde(rename = "num_replicas", deserialize_with = "nullable")]
    pub num_replicas: i64,
    #[serde(
        rename = "mem_storage",
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub mem_storage: bool,
    /// Internal to nats-server (mirror/source consumers); kept for round-trips.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub direct: bool,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub sourcing: bool,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub metadata: BTreeMap<String, String>,
    /// Paused until then. jsm.go always sends Go's zero time, which decodes to `None`.
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub pause_until: Option<Timestamp>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub priority_groups: Vec<String>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "is_priority_none"
    )]
    pub priority_policy: PriorityPolicy,
    /// Pin TTL for `pinned_client` (ns).
    #[serde(
        rename = "priority_timeout",
        deserialize_with = "nullable",
        skip_serializing_if = "is_zero_i64"
    )]
    pub priority_timeout: i64,
}

impl ConsumerConfig {
    /// The percentage of acks sampled (`sample_freq`, checked to be `N` or `N%`); 0 when
    /// none are.
    pub fn sample_percent(&self) -> u32 {
        self.sample_freq.trim_end_matches('%').parse().unwrap_or(0)
    }

    /// True when `durable_name` is set (nats-server `isDurableConsumer`).
    pub fn is_durable(&self) -> bool {
        !self.durable_name.is_empty()
    }

    /// True for pull consumers (no deliver subject).
    pub fn is_pull(&self) -> bool {
        self.deliver_subject.is_empty()
    }

    /// The consumer's filters as one list (`filter_subject` or `filter_subjects`); empty
    /// means "everything in the stream".
    pub fn filters(&self) -> Vec<&str> {
        if !self.filter_subject.is_empty() {
            vec![self.filter_subject.as_str()]
        } else {
            self.filter_subjects.iter().map(String::as_str).collect()
        }
    }
}

wire_enum! {
    /// What a consumer create request may do (`action` in the request body).
    pub enum ConsumerAction {
        /// `""`: create, or update if it exists (what jsm.go and nats.go send by default).
        CreateOrUpdate = "",
        /// Fail with 10148 if it exists with a different config.
        Create = "create",
        /// Fail with 10149 if it does not exist.
        Update = "update",
    }
    default = CreateOrUpdate;
}

/// Body of `$JS.API.CONSUMER.CREATE.<S>[.<C>[.<filter>]]` and `…DURABLE.CREATE.<S>.<C>`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CreateConsumerRequest {
    #[serde(deserialize_with = "nullable")]
    pub stream_name: String,
    /// Absent `config` decodes as Go's zero config, as in nats-server (an ephemeral
    /// ack-none pull consumer).
    #[serde(deserialize_with = "nullable")]
    pub config: ConsumerConfig,
    #[serde(deserialize_with = "nullable")]
    pub action: ConsumerAction,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub pedantic: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The body natscli sends for `nats consumer add ORDERS order-processor --pull
    /// --ack explicit --deliver all --defaults`.
    const NATSCLI_CREATE: &str = r#"{"stream_name":"ORDERS",
        "config":{"ack_policy":"explicit","deliver_policy":"all","durable_name":"order-processor",
        "name":"order-processor","max_deliver":-1,"replay_policy":"instant","num_replicas":0,
        "pause_until":"0001-01-01T00:00:00Z"},"action":""}"#;

    #[test]
    fn decodes_natscli_create_request() {
        let req: CreateConsumerRequest = serde_json::from_str(NATSCLI_CREATE).unwrap();
        assert_eq!(req.stream_name, "ORDERS");
        assert_eq!(req.action, ConsumerAction::CreateOrUpdate);
        let cfg = req.config;
        assert_eq!(cfg.durable_name, "order-processor");
        assert_eq!(cfg.ack_policy, AckPolicy::Explicit);
        assert_eq!(cfg.deliver_policy, DeliverPolicy::All);
        assert_eq!(cfg.max_deliver, -1);
        assert_eq!(cfg.pause_until, None, "zero time means not paused");
        assert!(cfg.is_durable() && cfg.is_pull());
    }

    #[test]
    fn actions() {
        for (text, action) in [
            ("", ConsumerAction::CreateOrUpdate),
            ("create", ConsumerAction::Create),
            ("update", ConsumerAction::Update),
        ] {
            let req: CreateConsumerRequest =
                serde_json::from_value(json!({"stream_name":"S","config":{},"action":text}))
                    .unwrap();
            assert_eq!(req.action, action);
        }
        let missing: CreateConsumerRequest =
            serde_json::from_str(r#"{"stream_name":"S"}"#).unwrap();
        assert_eq!(missing.action, ConsumerAction::CreateOrUpdate);
        assert_eq!(missing.config, ConsumerConfig::default());
        assert!(serde_json::from_str::<CreateConsumerRequest>(r#"{"action":"delete"}"#).is_err());
    }

    #[test]
    fn encodes_like_nats_server() {
        let cfg = ConsumerConfig {
            durable_name: "d".into(),
            ack_policy: AckPolicy::Explicit,
            ack_wait: 30_000_000_000,
            max_deliver: -1,
            max_waiting: 512,
            max_ack_pending: 1000,
            ..ConsumerConfig::default()
        };
        let value = serde_json::to_value(&cfg).unwrap();
        assert_eq!(
            value,
            json!({"durable_name":"d","deliver_policy":"all","ack_policy":"explicit",
                   "ack_wait":30000000000i64,"max_deliver":-1,"replay_policy":"instant",
                   "max_waiting":512,"max_ack_pending":1000,"num_replicas":0})
        );
        assert_eq!(
            serde_json::from_value::<ConsumerConfig>(value).unwrap(),
            cfg
        );
    }

    #[test]
    fn enum_spellings() {
        for (text, policy) in [
            ("all", DeliverPolicy::All),
            ("last", DeliverPolicy::Last),
            ("new", DeliverPolicy::New),
            ("by_start_sequence", DeliverPolicy::ByStartSequence),
            ("by_start_time", DeliverPolicy::ByStartTime),
            ("last_per_subject", DeliverPolicy::LastPerSubject),
        ] {
            assert_eq!(serde_json::to_value(policy).unwrap(), json!(text));
            assert_eq!(DeliverPolicy::parse(text), Some(policy));
        }
        assert_eq!(DeliverPolicy::parse("undefined"), Some(DeliverPolicy::All));
        assert_eq!(
            AckPolicy::parse("flow_control"),
            Some(AckPolicy::FlowControl)
        );
        assert_eq!(
            ReplayPolicy::parse("original"),
            Some(ReplayPolicy::Original)
        );
        assert_eq!(
            PriorityPolicy::parse("pinned_client"),
            Some(PriorityPolicy::PinnedClient)
        );
        assert!(serde_json::from_str::<ConsumerConfig>(r#"{"ack_policy":"maybe"}"#).is_err());
    }

    #[test]
    fn optional_times_and_filters() {
        let cfg: ConsumerConfig = serde_json::from_str(
            r#"{"deliver_policy":"by_start_time","opt_start_time":"2024-05-01T00:00:00Z",
                "filter_subjects":["a.*","b.>"],"pause_until":null,"backoff":[1000000000,5000000000],
                "priority_policy":"overflow","priority_groups":["jobs"],"unknown":1}"#,
        )
        .unwrap();
        assert!(cfg.opt_start_time.is_some());
        assert_eq!(cfg.filters(), vec!["a.*", "b.>"]);
        assert_eq!(cfg.backoff, vec![1_000_000_000, 5_000_000_000]);
        let value = serde_json::to_value(&cfg).unwrap();
        assert_eq!(value["opt_start_time"], json!("2024-05-01T00:00:00Z"));
        assert_eq!(value["priority_policy"], json!("overflow"));
        assert!(value.get("pause_until").is_none());
    }
}
