//! `StreamConfig`: a stream's configuration exactly as the JetStream API carries it (the
//! body of `$JS.API.STREAM.CREATE/UPDATE.<S>` and the `config` of every StreamInfo), with
//! its policy enums and sub-objects. Defaults and validation are in `stream_config_check`.
//!
//! Decoding is lenient like nats-server's non-strict mode: unknown fields are ignored, missing
//! or `null` fields take Go's zero value. Encoding mirrors nats-server's Go struct: the same
//! fields are always present and the same ones are `omitempty`, because natscli validates
//! replies against jsm.go's schemas and async-nats decodes some fields without defaults.
//!
//! One `StreamConfig` per stream lives in the meta state (jscore) on every node; this type is
//! the wire form and the stored form alike.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::serde_util::{is_false, is_zero_i32, is_zero_i64, is_zero_u64, nullable, wire_enum};
use super::time::{self, Timestamp};

wire_enum! {
    /// When stored messages are removed (besides limits).
    pub enum RetentionPolicy {
        /// Only limits (max_msgs, max_bytes, max_age, …) remove messages.
        Limits = "limits",
        /// A message goes once every consumer that should see it has acked it.
        Interest = "interest",
        /// A message goes once any consumer acks it.
        WorkQueue = "workqueue",
    }
    default = Limits;
}

wire_enum! {
    /// What to do when a limit is reached.
    pub enum DiscardPolicy {
        /// Remove the oldest messages to make room.
        Old = "old",
        /// Refuse the new message.
        New = "new",
    }
    default = Old;
}

wire_enum! {
    /// Where a stream keeps its messages.
    pub enum StorageType {
        File = "file",
        Memory = "memory",
    }
    default = File;
}

wire_enum! {
    /// On-disk compression of a file stream.
    pub enum Compression {
        None = "none" | "",
        S2 = "s2",
    }
    default = None;
}

wire_enum! {
    /// Persistence mode (nats-server 2.12+): `async` acks before the write is synced.
    /// jetraft always commits through Raft before acking, so this is accepted and echoed only.
    pub enum PersistMode {
        Default = "default" | "",
        Async = "async",
    }
    default = Default;
}

/// Configuration of a stream. Field order and `omitempty`s follow nats-server's Go struct.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamConfig {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub description: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subjects: Vec<String>,
    #[serde(deserialize_with = "nullable")]
    pub retention: RetentionPolicy,
    /// -1 = unlimited.
    #[serde(deserialize_with = "nullable")]
    pub max_consumers: i64,
    /// -1 = unlimited.
    #[serde(deserialize_with = "nullable")]
    pub max_msgs: i64,
    /// -1 = unlimited.
    #[serde(deserialize_with = "nullable")]
    pub max_bytes: i64,
    /// Nanoseconds; 0 = unlimited.
    #[serde(deserialize_with = "nullable")]
    pub max_age: i64,
    /// -1 = unlimited.
    #[serde(rename = "max_msgs_per_subject", deserialize_with = "nullable")]
    pub max_msgs_per_subject: i64,
    /// -1 = unlimited. `omitempty` in Go, but normalisation makes it -1, so it is emitted.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i32")]
    pub max_msg_size: i32,
    #[serde(deserialize_with = "nullable")]
    pub discard: DiscardPolicy,
    #[serde(deserialize_with = "nullable")]
    pub storage: StorageType,
    #[serde(rename = "num_replicas", deserialize_with = "nullable")]
    pub num_replicas: i64,
    /// When true the stream never answers publishes with a PubAck.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub no_ack: bool,
    /// Legacy stream templates; never set by jetraft, kept so a stored config round-trips.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub template_owner: String,
    /// Nanoseconds of `Nats-Msg-Id` de-duplication.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub duplicate_window: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSource>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<StreamSource>,
    #[serde(deserialize_with = "nullable")]
    pub compression: Compression,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub first_seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject_transform: Option<SubjectTransform>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub republish: Option<RePublish>,
    /// Enables `$JS.API.DIRECT.GET.<S>`.
    #[serde(deserialize_with = "nullable")]
    pub allow_direct: bool,
    #[serde(deserialize_with = "nullable")]
    pub mirror_direct: bool,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub discard_new_per_subject: bool,
    #[serde(deserialize_with = "nullable")]
    pub sealed: bool,
    #[serde(deserialize_with = "nullable")]
    pub deny_delete: bool,
    #[serde(deserialize_with = "nullable")]
    pub deny_purge: bool,
    /// Enables the `Nats-Rollup` header.
    #[serde(rename = "allow_rollup_hdrs", deserialize_with = "nullable")]
    pub allow_rollup_hdrs: bool,
    /// Defaults for consumers of this stream; always emitted (`{}` when empty).
    #[serde(deserialize_with = "nullable")]
    pub consumer_limits: StreamConsumerLimits,
    /// Enables the `Nats-TTL` header (2.11).
    #[serde(deserialize_with = "nullable")]
    pub allow_msg_ttl: bool,
    /// Nanoseconds (2.11).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub subject_delete_marker_ttl: i64,
    /// Counter CRDT streams (2.12).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub allow_msg_counter: bool,
    /// Atomic batch publish (2.12).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub allow_atomic: bool,
    /// Message schedules (2.12).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub allow_msg_schedules: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persist_mode: Option<PersistMode>,
    /// Fast batch publish (2.14).
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub allow_batched: bool,
    /// Sorted so that equal configs serialize identically (idempotent create compares them).
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub metadata: BTreeMap<String, String>,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            description: String::new(),
            subjects: Vec::new(),
            retention: RetentionPolicy::Limits,
            max_consumers: 0,
            max_msgs: 0,
            max_bytes: 0,
            max_age: 0,
            max_msgs_per_subject: 0,
            max_msg_size: 0,
            discard: DiscardPolicy::Old,
            storage: StorageType::File,
            num_replicas: 0,
            no_ack: false,
            template_owner: String::new(),
            duplicate_window: 0,
            placement: None,
            mirror: None,
            sources: Vec::new(),
            compression: Compression::None,
            first_seq: 0,
            subject_transform: None,
            republish: None,
            allow_direct: false,
            mirror_direct: false,
            discard_new_per_subject: false,
            sealed: false,
            deny_delete: false,
            deny_purge: false,
            allow_rollup_hdrs: false,
            consumer_limits: StreamConsumerLimits::default(),
            allow_msg_ttl: false,
            subject_delete_marker_ttl: 0,
            allow_msg_counter: false,
            allow_atomic: false,
            allow_msg_schedules: false,
            persist_mode: None,
            allow_batched: false,
            metadata: BTreeMap::new(),
        }
    }
}

impl StreamConfig {
    /// A config with just a name and subjects; everything else at Go's zero values
    /// (call `normalize` to apply the server defaults).
    pub fn new(name: impl Into<String>, subjects: &[&str]) -> Self {
        Self {
            name: name.into(),
            subjects: subjects.iter().map(|s| s.to_string()).collect(),
            ..Self::default()
        }
    }

    /// The API level this config needs (its `_nats.req.level`), as nats-server 2.15 reckons
    /// it: TTLs and delete markers are level 1; counters, atomic batches, schedules and the
    /// async persist mode level 2.
    pub fn required_api_level(&self) -> i64 {
        let level_two = self.allow_msg_counter
            || self.allow_atomic
            || self.allow_msg_schedules
            || self.persist_mode == Some(PersistMode::Async);
        let level_one = self.allow_msg_ttl || self.subject_delete_marker_ttl > 0;
        match (level_two, level_one) {
            (true, _) => 2,
            (false, true) => 1,
            (false, false) => 0,
        }
    }
}

/// Where replicas may be placed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Placement {
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub cluster: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub preferred: String,
}

/// A mirror or source: another stream this one copies from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamSource {
    #[serde(deserialize_with = "nullable")]
    pub name: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub opt_start_seq: u64,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub opt_start_time: Option<Timestamp>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter_subject: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subject_transforms: Vec<SubjectTransform>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalStream>,
    /// Durable sourcing consumer (2.14).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumer: Option<StreamConsumerSource>,
}

/// API and delivery prefixes of a stream in another account or domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExternalStream {
    #[serde(rename = "api", deserialize_with = "nullable")]
    pub api_prefix: String,
    #[serde(rename = "deliver", deserialize_with = "nullable")]
    pub deliver_prefix: String,
}

/// A named durable consumer used for sourcing (2.14).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamConsumerSource {
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub deliver_subject: String,
}

/// A subject mapping `src` -> `dest` (both always emitted, as in Go).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct SubjectTransform {
    #[serde(deserialize_with = "nullable")]
    pub src: String,
    #[serde(deserialize_with = "nullable")]
    pub dest: String,
}

/// Republish stored messages to another subject.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RePublish {
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub src: String,
    #[serde(deserialize_with = "nullable")]
    pub dest: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub headers_only: bool,
}

/// Defaults (and caps) the stream imposes on its consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamConsumerLimits {
    /// Nanoseconds.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub inactive_threshold: i64,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub max_ack_pending: i64,
}

/// Body of `STREAM.CREATE`/`STREAM.UPDATE`: the config plus the request-only `pedantic`
/// flag (in pedantic mode nats-server refuses instead of silently defaulting; jetraft
/// accepts the flag and always defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamConfigRequest {
    #[serde(flatten)]
    pub config: StreamConfig,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "is_false"
    )]
    pub pedantic: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    /// What natscli (jsm.go) sends for `nats stream add ORDERS --subjects "orders.*" --defaults`.
    const NATSCLI_CREATE: &str = r#"{"name":"ORDERS","subjects":["orders.*"],"retention":"limits",
        "max_consumers":-1,"max_msgs_per_subject":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,
        "max_msg_size":-1,"storage":"file","discard":"old","num_replicas":1,
        "duplicate_window":120000000000,"sealed":false,"deny_delete":false,"deny_purge":false,
        "allow_rollup_hdrs":false,"allow_direct":true,"mirror_direct":false,"consumer_limits":{}}"#;

    #[test]
    fn required_api_level_follows_the_features_asked_for() {
        let with = |body: &str| -> i64 {
            serde_json::from_str::<StreamConfig>(body)
                .unwrap()
                .required_api_level()
        };
        assert_eq!(with(NATSCLI_CREATE), 0);
        assert_eq!(with(r#"{"name":"T","allow_msg_ttl":true}"#), 1);
        assert_eq!(
            with(r#"{"name":"T","subject_delete_marker_ttl":1000000000}"#),
            1
        );
        assert_eq!(with(r#"{"name":"C","allow_msg_counter":true}"#), 2);
        assert_eq!(
            with(r#"{"name":"A","allow_atomic":true,"allow_msg_ttl":true}"#),
            2
        );
        assert_eq!(with(r#"{"name":"P","persist_mode":"async"}"#), 2);
    }

    #[test]
    fn decodes_natscli_create_body() {
        let cfg: StreamConfig = serde_json::from_str(NATSCLI_CREATE).unwrap();
        assert_eq!(cfg.name, "ORDERS");
        assert_eq!(cfg.subjects, vec!["orders.*"]);
        assert_eq!(cfg.retention, RetentionPolicy::Limits);
        assert_eq!(cfg.max_msgs, -1);
        assert_eq!(cfg.max_msg_size, -1);
        assert_eq!(cfg.duplicate_window, 120_000_000_000);
        assert!(cfg.allow_direct);
        assert_eq!(cfg.storage, StorageType::File);
    }

    #[test]
    fn encodes_the_fields_nats_server_always_emits() {
        let cfg: StreamConfig = serde_json::from_str(NATSCLI_CREATE).unwrap();
        let value = serde_json::to_value(&cfg).unwrap();
        let obj = value.as_object().unwrap();
        for field in [
            "name",
            "subjects",
            "retention",
            "max_consumers",
            "max_msgs",
            "max_bytes",
            "max_age",
            "max_msgs_per_subject",
            "max_msg_size",
            "discard",
            "storage",
            "num_replicas",
            "duplicate_window",
            "compression",
            "allow_direct",
            "mirror_direct",
            "sealed",
            "deny_delete",
            "deny_purge",
            "allow_rollup_hdrs",
            "consumer_limits",
            "allow_msg_ttl",
        ] {
            assert!(obj.contains_key(field), "missing {field}");
        }
        for omitted in [
            "description",
            "no_ack",
            "placement",
            "mirror",
            "sources",
            "first_seq",
            "subject_transform",
            "republish",
            "discard_new_per_subject",
            "metadata",
            "subject_delete_marker_ttl",
            "allow_msg_counter",
            "allow_atomic",
            "persist_mode",
            "template_owner",
        ] {
            assert!(!obj.contains_key(omitted), "unexpected {omitted}");
        }
        assert_eq!(obj["consumer_limits"], json!({}));
        assert_eq!(obj["compression"], json!("none"));
        let back: StreamConfig = serde_json::from_value(value).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn tolerates_unknown_null_and_missing_fields() {
        let cfg: StreamConfig = serde_json::from_str(
            r#"{"name":"S","subjects":null,"metadata":null,"mirror":null,"max_msgs":null,
                "allow_batched":true,"some_future_field":{"x":1},"persist_mode":"async"}"#,
        )
        .unwrap();
        assert_eq!(cfg.name, "S");
        assert!(cfg.subjects.is_empty());
        assert_eq!(cfg.max_msgs, 0);
        assert!(cfg.allow_batched);
        assert_eq!(cfg.persist_mode, Some(PersistMode::Async));
        let cfg: StreamConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(cfg, StreamConfig::default());
    }

    #[test]
    fn enums_use_exact_names_and_reject_unknown() {
        for (text, policy) in [
            ("limits", RetentionPolicy::Limits),
            ("interest", RetentionPolicy::Interest),
            ("workqueue", RetentionPolicy::WorkQueue),
        ] {
            assert_eq!(serde_json::to_value(policy).unwrap(), json!(text));
            assert_eq!(
                serde_json::from_value::<RetentionPolicy>(json!(text)).unwrap(),
                policy
            );
        }
        assert_eq!(DiscardPolicy::parse("New"), Some(DiscardPolicy::New));
        assert_eq!(StorageType::parse("memory"), Some(StorageType::Memory));
        assert_eq!(Compression::parse("s2"), Some(Compression::S2));
        assert!(serde_json::from_str::<StreamConfig>(r#"{"retention":"forever"}"#).is_err());
        assert!(serde_json::from_str::<StreamConfig>(r#"{"storage":"ssd"}"#).is_err());
    }

    #[test]
    fn request_wrapper_carries_pedantic() {
        let req: StreamConfigRequest =
            serde_json::from_str(r#"{"name":"S","pedantic":true,"max_age":1000000000}"#).unwrap();
        assert!(req.pedantic);
        assert_eq!(req.config.name, "S");
        assert_eq!(req.config.max_age, 1_000_000_000);
        let value: Value = serde_json::to_value(&req).unwrap();
        assert_eq!(value["pedantic"], json!(true));
        assert_eq!(value["name"], json!("S"));
    }

    #[test]
    fn sources_and_placement_round_trip() {
        let text = r#"{"name":"AGG","sources":[{"name":"A","opt_start_seq":5,
            "filter_subject":"a.>","external":{"api":"$JS.hub.API","deliver":"dl"}},
            {"name":"B","opt_start_time":"2024-01-02T03:04:05Z",
             "subject_transforms":[{"src":"b.*","dest":"x.{{wildcard(1)}}"}]}],
            "placement":{"cluster":"east","tags":["ssd"]},"metadata":{"owner":"team"}}"#;
        let cfg: StreamConfig = serde_json::from_str(text).unwrap();
        assert_eq!(cfg.sources.len(), 2);
        assert_eq!(
            cfg.sources[0].external.as_ref().unwrap().api_prefix,
            "$JS.hub.API"
        );
        assert!(cfg.sources[1].opt_start_time.is_some());
        let again: StreamConfig =
            serde_json::from_str(&serde_json::to_string(&cfg).unwrap()).unwrap();
        assert_eq!(again, cfg);
        let value = serde_json::to_value(&cfg).unwrap();
        assert_eq!(value["placement"], json!({"cluster":"east","tags":["ssd"]}));
        assert_eq!(
            value["sources"][1]["opt_start_time"],
            json!("2024-01-02T03:04:05Z")
        );
    }
}
