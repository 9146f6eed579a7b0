//! `StreamInfo` and its parts as nats-server emits them: the body of stream create, update
//! and info replies and the items of `STREAM.LIST`. `state` comes from the stream's state
//! machine (jscore), `cluster` from the consensus layer.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::serde_util::{is_false, is_zero_i64, is_zero_u64, nullable};
use super::stream_config::{ExternalStream, StreamConfig, SubjectTransform};
use super::time::{self, Timestamp};

/// Configuration and state of one stream, plus when this snapshot was taken (`ts`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamInfo {
    pub config: StreamConfig,
    pub created: Timestamp,
    pub state: StreamState,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub domain: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mirror: Option<StreamSourceInfo>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<StreamSourceInfo>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub alternates: Vec<StreamAlternate>,
    /// When this info was gathered.
    pub ts: Timestamp,
}

/// What a stream holds right now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamState {
    pub messages: u64,
    pub bytes: u64,
    /// First sequence present; for an empty stream the next sequence to be used (0 when
    /// nothing was ever stored).
    pub first_seq: u64,
    /// Zero time when empty.
    pub first_ts: Timestamp,
    /// Last sequence assigned.
    pub last_seq: u64,
    pub last_ts: Timestamp,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub num_subjects: i64,
    /// Per-subject counts, only when the request had `subjects_filter`.
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub subjects: BTreeMap<String, u64>,
    /// Interior deletes.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_i64")]
    pub num_deleted: i64,
    /// The deleted sequences, only with `deleted_details: true`.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub deleted: Vec<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lost: Option<LostStreamData>,
    #[serde(rename = "consumer_count")]
    pub consumer_count: i64,
}

/// Messages found damaged and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LostStreamData {
    #[serde(deserialize_with = "nullable")]
    pub msgs: Vec<u64>,
    pub bytes: u64,
}

/// The replica group behind a stream or consumer.
///
/// A standalone nats-server reports only `leader`; natscli prints the cluster section
/// only when `name` is set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ClusterInfo {
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub raft_group: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub leader: String,
    #[serde(with = "time::optional", skip_serializing_if = "Option::is_none")]
    pub leader_since: Option<Timestamp>,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<PeerInfo>,
}

/// One non-leader replica.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PeerInfo {
    pub name: String,
    /// Caught up with the leader.
    pub current: bool,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_false")]
    pub offline: bool,
    /// Nanoseconds since the leader last heard from it.
    pub active: i64,
    /// Entries behind the leader.
    #[serde(deserialize_with = "nullable", skip_serializing_if = "is_zero_u64")]
    pub lag: u64,
    /// Peer id.
    #[serde(deserialize_with = "nullable")]
    pub peer: String,
}

/// Progress of a mirror or source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamSourceInfo {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<ExternalStream>,
    pub lag: u64,
    /// Nanoseconds since last contact (-1 = never).
    pub active: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ApiError>,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub filter_subject: String,
    #[serde(deserialize_with = "nullable", skip_serializing_if = "Vec::is_empty")]
    pub subject_transforms: Vec<SubjectTransform>,
}

/// Another place the same stream can be read from (mirrors).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StreamAlternate {
    pub name: String,
    #[serde(
        deserialize_with = "nullable",
        skip_serializing_if = "String::is_empty"
    )]
    pub domain: String,
    pub cluster: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fresh_stream_info_has_the_fields_clients_require() {
        let info = StreamInfo {
            config: StreamConfig::new("ORDERS", &["orders.*"])
                .checked()
                .unwrap(),
            created: Timestamp::from_unix_nanos(1_755_770_400_000_000_001),
            state: StreamState::default(),
            cluster: Some(ClusterInfo {
                leader: "n1".into(),
                ..ClusterInfo::default()
            }),
            ts: Timestamp::from_unix_nanos(1_755_770_400_000_000_002),
            ..StreamInfo::default()
        };
        let value = serde_json::to_value(&info).unwrap();
        assert_eq!(
            value["state"],
            json!({"messages":0,"bytes":0,"first_seq":0,"first_ts":"0001-01-01T00:00:00Z",
                   "last_seq":0,"last_ts":"0001-01-01T00:00:00Z","consumer_count":0})
        );
        assert_eq!(value["cluster"], json!({"leader":"n1"}));
        assert_eq!(value["created"], json!("2025-08-21T10:00:00.000000001Z"));
        assert_eq!(value["ts"], json!("2025-08-21T10:00:00.000000002Z"));
        assert!(value.get("sources").is_none() && value.get("domain").is_none());
        let back: StreamInfo = serde_json::from_value(value).unwrap();
        assert_eq!(back, info);
    }

    #[test]
    fn state_details_and_replicas() {
        let state = StreamState {
            messages: 3,
            bytes: 120,
            first_seq: 2,
            last_seq: 5,
            num_deleted: 1,
            deleted: vec![4],
            num_subjects: 2,
            consumer_count: 1,
            ..StreamState::default()
        };
        let value = serde_json::to_value(&state).unwrap();
        assert_eq!(value["deleted"], json!([4]));
        assert_eq!(value["num_subjects"], json!(2));
        let cluster = ClusterInfo {
            name: "c".into(),
            leader: "n1".into(),
            replicas: vec![PeerInfo {
                name: "n2".into(),
                current: true,
                active: 5_000,
                peer: "abc".into(),
                ..PeerInfo::default()
            }],
            ..ClusterInfo::default()
        };
        let value = serde_json::to_value(&cluster).unwrap();
        assert_eq!(
            value["replicas"],
            json!([{"name":"n2","current":true,"active":5000,"peer":"abc"}])
        );
    }
}
