//! What infos report about a stream and its group, for the API (`STREAM.INFO`, create and
//! list replies) and for consumer infos (`delivery::info`): a stream's `StreamInfo`, the
//! `cluster` block of a group, and the `_nats.*` metadata nats-server adds to every config.
//! Below the catalog (which looks a stream up and hands it here: `Catalog::stream_info`) and
//! delivery, so both can use it.

use crate::consensus::{NodeId, RaftGroup};
use crate::jsapi::requests::StreamInfoRequest;
use crate::jsapi::stream_info::{ClusterInfo, PeerInfo, StreamState};
use crate::jsapi::time::Timestamp;
use crate::jsapi::StreamInfo;
use crate::jscore::subject_filter::SubjectFilter;

use super::compat;
use super::meta::StreamAssignment;
use super::stream::StreamHandle;
use super::topology::Topology;

/// The JetStream API level jetraft implements (nats-server 2.12's feature set: counters,
/// atomic batches with them and with one-shot schedules, mirror promotion).
pub const API_LEVEL: i64 = 2;

/// A stream's `cluster` block: its group's (see [`cluster_info`]), or what `compat` reports
/// without a cluster.
pub fn stream_cluster_info(topology: &Topology, group: &RaftGroup) -> ClusterInfo {
    compat::standalone_stream_cluster(topology).unwrap_or_else(|| cluster_info(topology, group))
}

/// A consumer's `cluster` block: its stream group's (a consumer is replicated with its
/// stream), or none where `compat` says so.
pub fn consumer_cluster_info(topology: &Topology, group: &RaftGroup) -> Option<ClusterInfo> {
    compat::reports_consumer_cluster(topology).then(|| cluster_info(topology, group))
}

/// The `cluster` block of a stream's (or consumer's) info, from its group's Raft metrics on
/// the leader (without a cluster, `compat` decides what is reported instead). A replica
/// answering without a leader (`leaderless.rs`) lists every voter, itself included (as
/// nats-server does then), offline unless its route is up, with no lag it could know.
pub fn cluster_info(topology: &Topology, group: &RaftGroup) -> ClusterInfo {
    let name_of = |id: NodeId| topology.name_of(id);
    let metrics = group.raft().metrics().borrow().clone();
    // A leader cut off from its quorum reports no leader, as it serves none.
    let knows_leader = group.leadership().knows_leader;
    let last_index = metrics.last_log_index.unwrap_or(0);
    let leading = metrics.replication.is_some();
    let matched = metrics.replication.clone().unwrap_or_default();
    let reachable = |id: NodeId| topology.reaches(id);
    let active_nanos = metrics
        .millis_since_quorum_ack
        .map_or(0, |ms| (ms as i64).saturating_mul(1_000_000));
    let replicas = group
        .voter_ids()
        .into_iter()
        .filter(|id| Some(*id) != metrics.current_leader)
        .map(|id| {
            let matched_index = matched
                .get(&id)
                .cloned()
                .flatten()
                .map_or(0, |log| log.index);
            let lag = match leading {
                true => last_index.saturating_sub(matched_index),
                false => 0,
            };
            PeerInfo {
                name: name_of(id),
                current: matched.contains_key(&id) && lag == 0,
                offline: match leading {
                    true => !matched.contains_key(&id),
                    false => !reachable(id),
                },
                active: active_nanos,
                lag,
                peer: format!("{id:x}"),
            }
        })
        .collect();
    ClusterInfo {
        name: topology.cluster_name().to_string(),
        raft_group: format!("S-R{}F-{:x}", group.voter_ids().len(), group.id()),
        leader: match knows_leader {
            true => metrics.current_leader.map(name_of).unwrap_or_default(),
            false => String::new(),
        },
        leader_since: None,
        replicas,
    }
}

/// The `StreamInfo` of a running stream, placed as `assignment` says.
pub fn stream_info(
    topology: &Topology,
    assignment: StreamAssignment,
    handle: &StreamHandle,
    request: &StreamInfoRequest,
) -> StreamInfo {
    let state = handle.view().read(|group| {
        let summary = group.stream().summary();
        let mut state = StreamState {
            messages: summary.messages,
            bytes: summary.bytes,
            first_seq: summary.first_seq,
            first_ts: timestamp_or_zero(summary.first_ts_nanos),
            last_seq: summary.last_seq,
            last_ts: timestamp_or_zero(summary.last_ts_nanos),
            num_subjects: summary.num_subjects as i64,
            num_deleted: summary.num_deleted as i64,
            consumer_count: group.consumer_names().count() as i64,
            ..StreamState::default()
        };
        if !request.subjects_filter.is_empty() {
            let filter = SubjectFilter::new([request.subjects_filter.as_str()]);
            state.subjects = group.stream().subject_counts(&filter);
        }
        if request.deleted_details {
            state.deleted = group.stream().deleted_seqs();
        }
        state
    });
    let mut config = assignment.config;
    add_stream_metadata(&mut config);
    let mirror = config
        .mirror
        .as_ref()
        .map(|mirror| handle.sources().mirror_info(mirror));
    let sources = config
        .sources
        .iter()
        .map(|source| handle.sources().source_info(source))
        .collect();
    StreamInfo {
        mirror,
        sources,
        config,
        created: Timestamp::from_unix_nanos(assignment.created_nanos),
        state,
        cluster: Some(stream_cluster_info(topology, &handle.group())),
        ts: Timestamp::now(),
        ..StreamInfo::default()
    }
}

/// The `_nats.*` entries nats-server adds to every stream and consumer config it reports
/// (natscli shows them as "Host Version" and "Required API Level").
pub fn add_server_metadata(metadata: &mut std::collections::BTreeMap<String, String>) {
    metadata.insert(
        "_nats.ver".into(),
        crate::server::identity::NATS_COMPAT_VERSION.into(),
    );
    metadata.insert("_nats.level".into(), API_LEVEL.to_string());
    metadata.insert("_nats.req.level".into(), "0".into());
}

/// The `_nats.*` entries of a reported stream config, with the API level it needs.
pub fn add_stream_metadata(config: &mut crate::jsapi::StreamConfig) {
    add_server_metadata(&mut config.metadata);
    config.metadata.insert(
        "_nats.req.level".into(),
        config.required_api_level().to_string(),
    );
}

fn timestamp_or_zero(nanos: i64) -> Timestamp {
    if nanos == 0 {
        Timestamp::ZERO
    } else {
        Timestamp::from_unix_nanos(nanos)
    }
}
