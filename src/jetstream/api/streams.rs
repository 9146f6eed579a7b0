//! Stream API handlers: `STREAM.CREATE`, `UPDATE`, `INFO`, `DELETE`, `PURGE`, `NAMES`,
//! `LIST`. Definitions change through the meta group, contents through the stream's group;
//! each handler returns the JSON reply body.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::jetstream::advisories;
use crate::jsapi::advisory::{Action, Advisory};
use crate::jsapi::requests::{
    parse_body, parse_optional_body, StreamInfoRequest, StreamNamesRequest, StreamPurgeRequest,
    LIST_PAGE_LIMIT, NAMES_PAGE_LIMIT,
};
use crate::jsapi::response::{
    encode_success, Paged, PurgeResponse, ResponseType, StreamCreateResponse, StreamInfoResponse,
    StreamListResponse, StreamNamesResponse, SuccessResponse,
};
use crate::jsapi::{ApiError, ErrorKind, StreamConfig, StreamConfigRequest, StreamInfo};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::jscore::stream::PurgeRequest;
use crate::jscore::subject_filter::SubjectFilter;

use crate::consensus::NodeId;
use crate::jetstream::meta::{MetaCommand, MetaOutcome, META_GROUP};
use crate::jetstream::payload::JsonValue;
use crate::jetstream::{compat, placement, JetStream};

/// Parses and checks a create (`create`) or update body against the name in the subject.
fn requested_config(
    js: &JetStream,
    stream: &str,
    body: &[u8],
    create: bool,
) -> Result<StreamConfig, ApiError> {
    let request: StreamConfigRequest = parse_body(body)?;
    let mut config = request.config;
    // Clients echo back the `_nats.*` entries we report; they are not part of the config.
    config.metadata.retain(|key, _| !key.starts_with("_nats."));
    if config.name.is_empty() {
        config.name = stream.to_owned();
    }
    if config.name != stream {
        return Err(ApiError::new(ErrorKind::StreamMismatch));
    }
    let config = config.checked()?;
    // nats-server's create-only checks come before what jetraft refuses (mirror direct
    // without a mirror is invalid there, whatever jetraft supports).
    if create {
        config.validate_create()?;
    }
    // What jetraft does not implement is refused, never stored (`jsapi::unsupported`).
    let config = config.refuse_unsupported()?;
    placement::check_requested(js.topology(), &config)?;
    // Placement refuses more replicas than nodes; without a cluster, `compat` answers first.
    compat::check_replicas(js.topology(), &config)?;
    Ok(config)
}

pub async fn create(js: &Arc<JetStream>, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let config = requested_config(js, stream, body, true)?;
    let command = placement::create_stream_command(js, config)?;
    let outcome = js.propose_meta(command).await?;
    let did_create = matches!(outcome, MetaOutcome::Created { created: true, .. });
    // The stream's leader may be another node, and a new group has to elect it first.
    if did_create {
        advise_stream(js, stream, Action::Create);
    }
    let mut info = super::routing::stream_info_anywhere(js, stream, NEW_STREAM_WAIT).await?;
    compat::drop_standalone_cluster(js.topology(), &mut info);
    Ok(encode_success(
        ResponseType::StreamCreate,
        &StreamCreateResponse { info, did_create },
    ))
}

pub async fn update(js: &Arc<JetStream>, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let config = requested_config(js, stream, body, false)?;
    let current = js
        .assignment(stream)
        .ok_or_else(|| ApiError::new(ErrorKind::StreamNotFound))?;
    config.validate_update(&current.config)?;
    let handle = js.running_stream(stream)?;
    if config.consumer_limits != current.config.consumer_limits {
        let consumers = handle.view().read(|group| {
            group
                .consumers()
                .map(|(name, consumer)| (name.to_owned(), consumer.config().clone()))
                .collect::<Vec<_>>()
        });
        check_consumer_limits(&config, &consumers)?;
    }
    // The stream group enforces the new limits on its messages; then the meta group records
    // the definition (and subjects) every node serves.
    handle
        .propose_one(StreamCommand::UpdateStream {
            config: config.clone(),
            now_nanos: super::super::now_nanos(),
        })
        .await?;
    js.propose_meta(MetaCommand::UpdateStream {
        config: JsonValue(config.clone()),
    })
    .await?;
    crate::jetstream::sourcing::forget_origins(js.shared(), stream, &current.config, Some(&config));
    advise_stream(js, stream, Action::Modify);
    let mut info = js.stream_info(stream, &StreamInfoRequest::default())?;
    // Should this node (the stream's leader, maybe not the meta leader) not have applied the
    // update yet (`propose_meta` waits only so long), echo what was accepted.
    let mut echoed = config;
    crate::jetstream::info::add_stream_metadata(&mut echoed);
    info.config = echoed;
    compat::drop_standalone_cluster(js.topology(), &mut info);
    // As nats-server's: the info, without the paging of subjects an info reply carries.
    Ok(encode_success(
        ResponseType::StreamUpdate,
        &StreamCreateResponse {
            info,
            did_create: false,
        },
    ))
}

fn advise_stream(js: &JetStream, stream: &str, action: Action) {
    advisories::publish(js.shared(), &Advisory::stream(stream, action));
}

/// A change of the stream's `consumer_limits` that an existing consumer exceeds is refused,
/// naming them, as nats-server does (500, 10069 "change to limits violates consumers: …";
/// a limit of 0 counts as 0 there too).
fn check_consumer_limits(
    config: &StreamConfig,
    consumers: &[(String, crate::jsapi::consumer_config::ConsumerConfig)],
) -> Result<(), ApiError> {
    let limits = &config.consumer_limits;
    let violating: Vec<&str> = consumers
        .iter()
        .filter(|(_, consumer)| {
            consumer.inactive_threshold > limits.inactive_threshold
                || consumer.max_ack_pending > limits.max_ack_pending
        })
        .map(|(name, _)| name.as_str())
        .collect();
    if violating.is_empty() {
        return Ok(());
    }
    let text = format!(
        "change to limits violates consumers: {}",
        violating.join(", ")
    );
    Err(ApiError::with_detail(ErrorKind::StreamUpdate, text))
}

pub fn info(js: &JetStream, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: StreamInfoRequest = parse_optional_body(body)?;
    let mut info = js.stream_info(stream, &request)?;
    let paged = page_subjects(&mut info.state.subjects, request.offset);
    Ok(encode_success(
        ResponseType::StreamInfo,
        &StreamInfoResponse { info, paged },
    ))
}

/// nats-server's `JSMaxSubjectDetails`: the subject counts one `STREAM.INFO` returns.
const SUBJECT_DETAILS_LIMIT: usize = 100_000;

/// Pages the subject counts a `subjects_filter` asked for, as nats-server does: all of them
/// from offset 0 up to the limit, otherwise the sorted subjects from `offset` (clamped to the
/// count), at most the limit; `total`, `offset` (as asked) and `limit` are reported whenever
/// a subject matched, so a client reading page after page stops at the end.
fn page_subjects(subjects: &mut BTreeMap<String, u64>, offset: i64) -> Paged {
    let total = subjects.len();
    if total == 0 {
        return Paged::default();
    }
    let paged = Paged {
        total: total as i64,
        offset,
        limit: SUBJECT_DETAILS_LIMIT as i64,
    };
    let from = usize::try_from(offset).unwrap_or(0).min(total);
    if from > 0 || total > SUBJECT_DETAILS_LIMIT {
        *subjects = std::mem::take(subjects)
            .into_iter()
            .skip(from)
            .take(SUBJECT_DETAILS_LIMIT)
            .collect();
    }
    paged
}

/// `STREAM.DELETE`. Like nats-server, the deletion of each of the stream's consumers is
/// advised too, before the stream's own (`Advisory::stream_deletion`).
pub async fn delete(js: &Arc<JetStream>, stream: &str) -> Result<Vec<u8>, ApiError> {
    let consumers = consumers_to_advise(js, stream).await;
    let assigned = js.assignment(stream);
    js.propose_meta(MetaCommand::DeleteStream {
        name: stream.to_owned(),
    })
    .await?;
    if let Some(assigned) = assigned {
        replicas_applied_meta(js, &assigned.replicas).await;
        crate::jetstream::sourcing::forget_origins(js.shared(), stream, &assigned.config, None);
    }
    for advisory in Advisory::stream_deletion(stream, &consumers) {
        advisories::publish(js.shared(), &advisory);
    }
    Ok(encode_success(
        ResponseType::StreamDelete,
        &SuccessResponse::OK,
    ))
}

/// How long a meta change's reply waits for each replica to apply it.
const REPLICA_APPLY_WAIT: Duration = Duration::from_secs(1);

/// Waits, bounded, until every other node in `replicas` that this node reaches has applied the
/// meta log as far as this node has (the meta leader, past the change it just applied).
///
/// A stream's requests are answered by the replica that leads it in that replica's own meta
/// view (`routing.rs`), and a meta follower learns a commit with the next append or heartbeat.
/// Without this wait, a `STREAM.INFO` sent right after a successful `STREAM.DELETE` could still
/// be answered by the stream's old leader. nats-server too answers a delete only once the
/// stream is removed. A replica this node does not reach cannot receive the client's next
/// request either, and one that does not answer in time is not waited for longer.
async fn replicas_applied_meta(js: &JetStream, replicas: &[NodeId]) {
    let index = js.meta_group().applied_index();
    let topology = js.topology();
    let others = replicas
        .iter()
        .filter(|id| **id != js.node_id() && topology.reaches(**id))
        .map(|id| topology.wait_applied(*id, META_GROUP, index, REPLICA_APPLY_WAIT));
    futures::future::join_all(others).await;
}

/// The consumers a deletion of `stream` takes with it, read before the deletion is proposed:
/// they live in the stream's group (not in the meta state), which the deletion removes. This
/// node answers `STREAM.DELETE` as the meta leader and publishes every advisory of it (so each
/// is published once in a cluster, in order); it reads its own replica if it leads the stream
/// (or runs alone), and else asks the node answering for the stream (`CONSUMER.NAMES`), falling
/// back to its own follower replica, if any, when nobody answers.
async fn consumers_to_advise(js: &JetStream, stream: &str) -> Vec<String> {
    if js.assignment(stream).is_none() {
        return Vec::new();
    }
    let local = || {
        js.stream(stream)
            .map(|handle| super::consumers::sorted_names(&handle))
            .unwrap_or_default()
    };
    if js.leads_stream(stream) || is_sole_replica(js, stream) {
        return local();
    }
    match super::routing::remote_consumer_names(js, stream).await {
        Some(names) => names,
        None => local(),
    }
}

pub async fn purge(js: &Arc<JetStream>, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: StreamPurgeRequest = parse_optional_body(body)?;
    request.validate()?;
    let handle = js.running_stream(stream)?;
    let filter = (!request.filter.is_empty()).then(|| request.filter.clone());
    let outcome = handle
        .propose_one(StreamCommand::Purge(PurgeRequest {
            filter,
            seq: request.seq,
            keep: request.keep,
        }))
        .await?;
    let purged = match outcome {
        StreamOutcome::Purged { count } => count,
        _ => 0,
    };
    Ok(encode_success(
        ResponseType::StreamPurge,
        &PurgeResponse {
            success: true,
            purged,
        },
    ))
}

pub fn names(js: &JetStream, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: StreamNamesRequest = parse_optional_body(body)?;
    let wanted = SubjectFilter::new([request.subject.as_str()]);
    let matching: Vec<String> = js.meta().read(|state| {
        state
            .streams()
            .values()
            .filter(|a| {
                request.subject.is_empty()
                    || a.config
                        .subjects
                        .iter()
                        .any(|s| SubjectFilter::new([s.as_str()]).overlaps(&wanted))
            })
            .map(|a| a.config.name.clone())
            .collect()
    });
    let (paged, page) = page(matching, request.offset, NAMES_PAGE_LIMIT);
    Ok(encode_success(
        ResponseType::StreamNames,
        &StreamNamesResponse {
            paged,
            streams: page,
        },
    ))
}

pub async fn list(js: &Arc<JetStream>, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: StreamNamesRequest = parse_optional_body(body)?;
    let (paged, page) = page(js.stream_names(), request.offset, LIST_PAGE_LIMIT);
    let mut streams = Vec::with_capacity(page.len());
    let mut missing = Vec::new();
    let mut offline = js.offline_streams();
    let infos = futures::future::join_all(page.iter().map(|name| info_of(js, name))).await;
    for (name, info) in page.into_iter().zip(infos) {
        match info {
            Some(mut info) => {
                compat::drop_standalone_cluster(js.topology(), &mut info);
                streams.push(info);
            }
            None if offline.contains_key(&name) => {}
            None => missing.push(name),
        }
    }
    offline.retain(|name, _| !streams.iter().any(|info| &info.config.name == name));
    Ok(encode_success(
        ResponseType::StreamList,
        &StreamListResponse {
            paged,
            streams,
            missing,
            offline,
        },
    ))
}

/// How long a create waits for a new stream's leader to answer for it.
const NEW_STREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The info of a stream this node leads, or else as its leader reports it.
pub async fn info_of(js: &JetStream, name: &str) -> Option<StreamInfo> {
    if js.leads_stream(name) || is_sole_replica(js, name) {
        return js.stream_info(name, &StreamInfoRequest::default()).ok();
    }
    super::routing::remote_stream_info(js, name).await
}

/// Whether stream `name` is placed on this node alone: then no other node can answer for it,
/// and this node's replica (if it runs) is the stream.
fn is_sole_replica(js: &JetStream, name: &str) -> bool {
    js.assignment(name)
        .is_some_and(|assignment| assignment.replicas == [js.node_id()])
}

/// `STREAM.LEADER.STEPDOWN`: hand the stream's leadership to another replica. Without a
/// cluster 10010, before the stream is looked up (as nats-server's
/// `jsStreamLeaderStepDownRequest`).
pub async fn step_down(js: &Arc<JetStream>, stream: &str) -> Result<Vec<u8>, ApiError> {
    compat::check_stepdown(js.topology())?;
    let handle = js.running_stream(stream)?;
    super::routing::step_down(js, &handle.group()).await?;
    Ok(encode_success(
        ResponseType::StreamLeaderStepdown,
        &SuccessResponse::OK,
    ))
}

/// `META.LEADER.STEPDOWN`: hand the meta group's leadership to another node.
pub async fn meta_step_down(js: &Arc<JetStream>) -> Result<Vec<u8>, ApiError> {
    compat::check_meta_stepdown(js.topology())?;
    super::routing::step_down(js, &js.meta_group()).await?;
    Ok(encode_success(
        ResponseType::MetaLeaderStepdown,
        &SuccessResponse::OK,
    ))
}

fn page(items: Vec<String>, offset: i64, limit: usize) -> (Paged, Vec<String>) {
    let total = items.len();
    let offset = usize::try_from(offset).unwrap_or(0).min(total);
    let page = items.into_iter().skip(offset).take(limit).collect();
    (
        Paged {
            total: total as i64,
            offset: offset as i64,
            limit: limit as i64,
        },
        page,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subjects(count: usize) -> BTreeMap<String, u64> {
        (0..count).map(|i| (format!("s.{i:06}"), 1)).collect()
    }

    #[test]
    fn lower_consumer_limits_than_a_consumer_uses_are_refused_naming_it() {
        use crate::jsapi::consumer_config::ConsumerConfig;
        let consumer = |max_ack_pending, inactive_threshold| ConsumerConfig {
            max_ack_pending,
            inactive_threshold,
            ..ConsumerConfig::default()
        };
        let consumers = vec![
            ("name".to_string(), consumer(1000, 0)),
            ("small".to_string(), consumer(5, 1_000_000_000)),
        ];
        let mut config = StreamConfig::new("S", &["s"]);
        config.consumer_limits.max_ack_pending = 10;
        config.consumer_limits.inactive_threshold = 2_000_000_000;
        let err = check_consumer_limits(&config, &consumers).unwrap_err();
        assert_eq!(
            (err.code, err.err_code, err.description.as_str()),
            (500, 10069, "change to limits violates consumers: name")
        );
        config.consumer_limits.max_ack_pending = 1000;
        assert!(check_consumer_limits(&config, &consumers).is_ok());
        // A zero limit is a limit of zero, as nats-server compares it.
        config.consumer_limits.inactive_threshold = 0;
        let err = check_consumer_limits(&config, &consumers).unwrap_err();
        assert_eq!(
            err.description,
            "change to limits violates consumers: small"
        );
    }

    #[test]
    fn subject_details_page_as_nats_servers() {
        let mut none = BTreeMap::new();
        assert_eq!(page_subjects(&mut none, 0), Paged::default());

        let mut few = subjects(3);
        let paged = page_subjects(&mut few, 0);
        assert_eq!((paged.total, paged.offset, paged.limit), (3, 0, 100_000));
        assert_eq!(few.len(), 3);
        // A client asks for the next page at the count it got: nothing more.
        let mut again = subjects(3);
        assert_eq!(page_subjects(&mut again, 3).offset, 3);
        assert!(again.is_empty());

        let mut many = subjects(220_000);
        page_subjects(&mut many, 0);
        assert_eq!(many.len(), 100_000);
        assert_eq!(many.keys().next().unwrap(), "s.000000");
        let mut second = subjects(220_000);
        page_subjects(&mut second, 100_000);
        assert_eq!(second.keys().next().unwrap(), "s.100000");
        let mut last = subjects(220_000);
        let paged = page_subjects(&mut last, 200_000);
        assert_eq!((paged.total, last.len()), (220_000, 20_000));
        let mut past = subjects(220_000);
        assert!({
            page_subjects(&mut past, 500_000);
            past.is_empty()
        });
    }
}
