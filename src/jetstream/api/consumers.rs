//! Consumer API handlers: `CONSUMER.CREATE` (all three subject forms, actions create /
//! update / create-or-update), `DURABLE.CREATE`, `INFO`, `DELETE`, `NAMES`, `LIST`,
//! `LEADER.STEPDOWN`, `PAUSE`, `UNPIN`, `RESET`.
//! Consumers live in their stream's group: create and delete are `UpsertConsumer` /
//! `DeleteConsumer` proposals; info reads the group state plus this node's delivery
//! activity (`delivery::info`). Pull requests (`MSG.NEXT`) are `pull`'s.

use std::sync::Arc;

use crate::jetstream::delivery::info::consumer_info;
use crate::jetstream::stream::StreamHandle;
use crate::jetstream::token::random_token;
use crate::jetstream::{advisories, compat, info, JetStream};
use crate::jsapi::advisory::{Action, Advisory};
use crate::jsapi::requests::{
    parse_body, parse_optional_body, require_empty_body, ConsumersRequest, LIST_PAGE_LIMIT,
    NAMES_PAGE_LIMIT,
};
use crate::jsapi::response::{
    encode_success, ConsumerListResponse, ConsumerNamesResponse, ConsumerPauseResponse,
    ConsumerResetResponse, Empty, Paged, ResponseType, SuccessResponse,
};
use crate::jsapi::{
    is_valid_group_name, ApiError, ApiRequest, ConsumerAction, ConsumerCreateForm, ConsumerInfo,
    ConsumerPauseRequest, ConsumerResetRequest, ConsumerUnpinRequest, CreateConsumerRequest,
    ErrorKind, Timestamp,
};
use crate::jscore::consumer::{ConsumerCommand, ConsumerOutcome};
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::server::message::Message;

/// Length of the names given to consumers created without one (nats-server: 8).
const GENERATED_NAME_LEN: usize = 8;

/// Answers one consumer API request with its reply body, or the error the caller encodes with
/// the request's response type. Other requests are not this module's: 400 (the dispatcher
/// never sends them here).
pub async fn handle(
    js: &JetStream,
    request: &ApiRequest,
    msg: &Message,
) -> Result<Vec<u8>, ApiError> {
    let body = &msg.payload[..];
    match request {
        ApiRequest::ConsumerCreate { stream, form } => create(js, stream, form, body).await,
        ApiRequest::ConsumerInfo { stream, consumer } => info(js, stream, consumer).await,
        ApiRequest::ConsumerDelete { stream, consumer } => delete(js, stream, consumer, body).await,
        ApiRequest::ConsumerNames { stream } => names(js, stream, body),
        ApiRequest::ConsumerList { stream } => list(js, stream, body),
        ApiRequest::ConsumerLeaderStepdown { stream, consumer } => {
            step_down(js, stream, consumer).await
        }
        ApiRequest::ConsumerPause { stream, consumer } => pause(js, stream, consumer, body).await,
        ApiRequest::ConsumerUnpin { stream, consumer } => unpin(js, stream, consumer, body),
        ApiRequest::ConsumerReset { stream, consumer } => reset(js, stream, consumer, body).await,
        _ => Err(ApiError::new(ErrorKind::BadRequest)),
    }
}

/// `CONSUMER.LEADER.STEPDOWN`. A consumer has no Raft group of its own here (its state is in
/// its stream's group), so its leader is its stream's leader: stepping it down steps down the
/// stream's leader, and the stream and all its consumers move together. As nats-server
/// answers: 10010 without a cluster (checked first); 10059 / 10014 for an unknown stream /
/// consumer; success without an election for a one-replica stream (nats-server's R1 consumers
/// have no Raft group, so its stepdown is a no-op that succeeds). The request body (2.11's
/// placement preference) is not looked at.
async fn step_down(js: &JetStream, stream: &str, consumer: &str) -> Result<Vec<u8>, ApiError> {
    compat::check_stepdown(js.topology())?;
    let handle = stream_handle(js, stream)?;
    if !handle
        .view()
        .read(|group| group.consumer(consumer).is_some())
    {
        return Err(ApiError::new(ErrorKind::ConsumerNotFound));
    }
    let group = handle.group();
    if group.voter_ids().len() > 1 {
        super::routing::step_down(js, &group).await?;
    }
    Ok(encode_success(
        ResponseType::ConsumerLeaderStepdown,
        &SuccessResponse::OK,
    ))
}

/// `CONSUMER.PAUSE`: an update of the consumer's `pause_until` alone (absent, empty body or
/// Go's zero time resumes), as nats-server does it; the delivery task advises the change.
/// The answer says whether the consumer is paused now and for how long.
async fn pause(
    js: &JetStream,
    stream: &str,
    consumer: &str,
    body: &[u8],
) -> Result<Vec<u8>, ApiError> {
    let request: ConsumerPauseRequest = parse_optional_body(body)?;
    let handle = stream_handle(js, stream)?;
    let existing = handle
        .view()
        .read(|group| group.consumer(consumer).map(|c| c.config().clone()));
    let mut config = existing.ok_or_else(|| ApiError::new(ErrorKind::ConsumerNotFound))?;
    config.pause_until = request.pause_until.filter(|until| !until.is_zero());
    let pause_until = config.pause_until.unwrap_or(Timestamp::ZERO);
    // Saturated past 2262 (what i64 nanoseconds hold), as the consumer itself reckons it.
    let until_nanos = crate::jscore::consumer::pause_until_nanos(&config);
    handle
        .propose_one(StreamCommand::UpsertConsumer {
            name: consumer.to_owned(),
            config,
            created_nanos: crate::jetstream::now_nanos(),
        })
        .await?;
    js.delivery().consumer_changed(&handle, consumer);
    let remaining = until_nanos.map_or(0, |until| {
        until.saturating_sub(crate::jetstream::now_nanos())
    });
    Ok(encode_success(
        ResponseType::ConsumerPause,
        &ConsumerPauseResponse {
            paused: remaining > 0,
            pause_until,
            pause_remaining: remaining.max(0),
        },
    ))
}

/// `CONSUMER.UNPIN`: the consumer's pin (leader memory, `delivery::priority`) is dropped and
/// `UNPINNED` advised with reason `admin`, whether or not a client was pinned, as
/// nats-server does. Checks in nats-server's order: stream, consumer, JSON, group.
fn unpin(js: &JetStream, stream: &str, consumer: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let handle = stream_handle(js, stream)?;
    let groups = handle
        .view()
        .read(|group| {
            group
                .consumer(consumer)
                .map(|c| c.config().priority_groups.clone())
        })
        .ok_or_else(|| ApiError::new(ErrorKind::ConsumerNotFound))?;
    let request: ConsumerUnpinRequest = parse_body(body)?;
    if request.group.is_empty() {
        return Err(ApiError::with_detail(
            ErrorKind::InvalidJson,
            "consumer group not specified",
        ));
    }
    if !is_valid_group_name(&request.group) {
        return Err(ApiError::new(ErrorKind::ConsumerInvalidGroupName));
    }
    if !groups.contains(&request.group) {
        return Err(ApiError::new(ErrorKind::ConsumerInvalidPriorityGroup));
    }
    js.delivery().unpin(&handle, consumer);
    let advisory = Advisory::unpinned(stream, consumer, &request.group, "admin");
    advisories::publish(js.shared(), &advisory);
    Ok(encode_success(ResponseType::ConsumerUnpin, &Empty {}))
}

/// `CONSUMER.RESET` (nats-server 2.14): the consumer starts over from the sequence the body
/// names (`{"seq": n}`), or from just above its ack floor (empty body, or `seq` 0), with
/// nothing pending and consumer sequence 1 (`jscore::consumer::reset`). A sequence is
/// checked against the deliver policy first (10204). The reset is replicated like an ack;
/// the delivery task then looks again (a push consumer resumes delivering), and the answer
/// is the consumer's info, as `CONSUMER.INFO` gives it, with the `reset_seq` it starts from.
/// Checks in this order: stream (10059), consumer (10014), JSON (10025), the rules (10204).
/// nats-server does not answer a reset of an unknown consumer at all (only a consumer's
/// leader listens for it); jetraft answers 10014, as for the other consumer calls.
async fn reset(
    js: &JetStream,
    stream: &str,
    consumer: &str,
    body: &[u8],
) -> Result<Vec<u8>, ApiError> {
    let handle = stream_handle(js, stream)?;
    let not_found = || ApiError::new(ErrorKind::ConsumerNotFound);
    if !handle
        .view()
        .read(|group| group.consumer(consumer).is_some())
    {
        return Err(not_found());
    }
    let request: ConsumerResetRequest = parse_optional_body(body)?;
    let checked = handle.view().read(|group| {
        group
            .consumer(consumer)
            .map(|state| state.check_reset(group.stream(), request.seq))
    });
    let checked = checked.ok_or_else(not_found)??;
    let outcome = handle
        .propose_one(StreamCommand::Consumer {
            name: consumer.to_owned(),
            command: ConsumerCommand::Reset { seq: request.seq },
        })
        .await?;
    // The applied start is the one that counts: for `seq` 0 the floor may have moved since
    // the check.
    let reset_seq = match outcome {
        StreamOutcome::Consumer {
            outcome: ConsumerOutcome::Reset { reset_seq },
            ..
        } => reset_seq,
        _ => checked,
    };
    js.delivery().consumer_reset(&handle, consumer);
    let info = info_of(js, &handle, consumer)?;
    Ok(encode_success(
        ResponseType::ConsumerReset,
        &ConsumerResetResponse { info, reset_seq },
    ))
}

fn stream_handle(js: &JetStream, stream: &str) -> Result<Arc<StreamHandle>, ApiError> {
    js.running_stream(stream)
}

async fn create(
    js: &JetStream,
    stream: &str,
    form: &ConsumerCreateForm,
    body: &[u8],
) -> Result<Vec<u8>, ApiError> {
    let request: CreateConsumerRequest = parse_body(body)?;
    let action = request.action;
    let handle = stream_handle(js, stream)?;
    let mut config = request.resolve(stream, form)?;
    // Clients echo back the `_nats.*` entries we report; they are not part of the config.
    config.metadata.retain(|key, _| !key.starts_with("_nats."));
    if config.name.is_empty() {
        config.name = if config.is_durable() {
            config.durable_name.clone()
        } else {
            random_token(GENERATED_NAME_LEN)
        };
    }
    let (stream_config, existing, count) = handle.view().read(|group| {
        (
            group.stream().config().clone(),
            group.consumer(&config.name).map(|c| c.config().clone()),
            group.consumer_names().count(),
        )
    });
    let config = config.checked(&stream_config)?;
    // What jetraft does not implement is refused, never stored (`jsapi::unsupported`).
    config.refuse_unsupported()?;
    // Filters need not overlap the stream's subjects: nats-server 2.15 dropped that check
    // (10093), and a stream's subjects can change after its consumers are made.
    match (&existing, action) {
        (Some(old), ConsumerAction::Create) if *old != config => {
            return Err(ApiError::new(ErrorKind::ConsumerAlreadyExists));
        }
        (None, ConsumerAction::Update) => {
            return Err(ApiError::new(ErrorKind::ConsumerDoesNotExist));
        }
        (None, _)
            if stream_config.max_consumers > 0 && count as i64 >= stream_config.max_consumers =>
        {
            return Err(ApiError::new(ErrorKind::MaximumConsumersLimit));
        }
        _ => {}
    }
    let name = config.name.clone();
    let unchanged = existing.as_ref() == Some(&config);
    if let Some(old) = existing.as_ref().filter(|_| !unchanged) {
        config.validate_update(old)?;
        let moved =
            !old.deliver_subject.is_empty() && old.deliver_subject != config.deliver_subject;
        if moved && has_interest(js, &old.deliver_subject) {
            return Err(ApiError::new(ErrorKind::ConsumerNameExist));
        }
    }
    if !unchanged {
        handle
            .propose_one(StreamCommand::UpsertConsumer {
                name: name.clone(),
                config,
                created_nanos: crate::jetstream::now_nanos(),
            })
            .await?;
    }
    js.delivery().consumer_changed(&handle, &name);
    if existing.is_none() {
        advise_consumer(js, stream, &name, Action::Create);
    }
    let info = info_of(js, &handle, &name)?;
    Ok(encode_success(ResponseType::ConsumerCreate, &info))
}

fn advise_consumer(js: &JetStream, stream: &str, consumer: &str, action: Action) {
    advisories::publish(js.shared(), &Advisory::consumer(stream, consumer, action));
}

fn has_interest(js: &JetStream, subject: &str) -> bool {
    let subject = bytes::Bytes::copy_from_slice(subject.as_bytes());
    !js.router().matches(&subject).is_empty()
}

fn info_of(
    js: &JetStream,
    handle: &Arc<StreamHandle>,
    name: &str,
) -> Result<ConsumerInfo, ApiError> {
    let cluster = info::consumer_cluster_info(js.topology(), &handle.group());
    consumer_info(js.delivery(), handle, name, cluster)
        .ok_or_else(|| ApiError::new(ErrorKind::ConsumerNotFound))
}

async fn info(js: &JetStream, stream: &str, consumer: &str) -> Result<Vec<u8>, ApiError> {
    let handle = stream_handle(js, stream)?;
    let info = info_of(js, &handle, consumer)?;
    // Read first: what it counts as delivered is sent before the task answers.
    js.delivery().sent_delivered(&handle, consumer).await;
    Ok(encode_success(ResponseType::ConsumerInfo, &info))
}

async fn delete(
    js: &JetStream,
    stream: &str,
    consumer: &str,
    body: &[u8],
) -> Result<Vec<u8>, ApiError> {
    require_empty_body(body)?;
    let handle = stream_handle(js, stream)?;
    handle
        .propose_one(StreamCommand::DeleteConsumer {
            name: consumer.to_owned(),
        })
        .await?;
    js.delivery().consumer_deleted(stream, consumer);
    advise_consumer(js, stream, consumer, Action::Delete);
    Ok(encode_success(
        ResponseType::ConsumerDelete,
        &SuccessResponse::OK,
    ))
}

/// One page of `names` (sorted) starting at `offset`, with the paging fields.
fn page<T: Clone>(items: &[T], offset: i64, limit: usize) -> (Vec<T>, Paged) {
    let start = (offset.max(0) as usize).min(items.len());
    let end = (start + limit).min(items.len());
    let paged = Paged {
        total: items.len() as i64,
        offset: start as i64,
        limit: limit as i64,
    };
    (items[start..end].to_vec(), paged)
}

/// The names of the stream's consumers in this replica, sorted.
pub fn sorted_names(handle: &StreamHandle) -> Vec<String> {
    handle
        .view()
        .read(|group| group.consumer_names().map(str::to_owned).collect())
}

fn names(js: &JetStream, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: ConsumersRequest = parse_optional_body(body)?;
    let handle = stream_handle(js, stream)?;
    let (consumers, paged) = page(&sorted_names(&handle), request.offset, NAMES_PAGE_LIMIT);
    Ok(encode_success(
        ResponseType::ConsumerNames,
        &ConsumerNamesResponse { paged, consumers },
    ))
}

fn list(js: &JetStream, stream: &str, body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let request: ConsumersRequest = parse_optional_body(body)?;
    let handle = stream_handle(js, stream)?;
    let (names, paged) = page(&sorted_names(&handle), request.offset, LIST_PAGE_LIMIT);
    let consumers = names
        .iter()
        .filter_map(|name| info_of(js, &handle, name).ok())
        .collect();
    Ok(encode_success(
        ResponseType::ConsumerList,
        &ConsumerListResponse {
            paged,
            consumers,
            ..ConsumerListResponse::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging() {
        let names: Vec<String> = (0..5).map(|i| format!("c{i}")).collect();
        let (items, paged) = page(&names, 0, 2);
        assert_eq!(items, vec!["c0", "c1"]);
        assert_eq!((paged.total, paged.offset, paged.limit), (5, 0, 2));
        let (items, paged) = page(&names, 4, 2);
        assert_eq!(items, vec!["c4"]);
        assert_eq!(paged.offset, 4);
        let (items, paged) = page(&names, 9, 2);
        assert!(items.is_empty());
        assert_eq!(paged.offset, 5);
        let (items, _) = page(&names, -3, 1024);
        assert_eq!(items.len(), 5);
    }
}
