//! The `$JS.API.*` front door: one internal subscription on `$JS.API.>` feeding a bounded
//! queue (`inbox`), a dispatcher task that takes requests from it, and one short task per
//! request so a slow call never holds up the others (a request keeps its place in the queue's
//! bound until its task is done). Pull requests are the exception: the dispatcher hands each
//! to its consumer itself, which never waits, so a connection's pulls keep their order. Handlers return the reply body; the dispatcher publishes it
//! to the request's reply subject.
//!
//! Handlers by area: `account` (`INFO`), `streams` (stream CRUD, names/list, purge),
//! `messages` (`STREAM.MSG.GET` / `MSG.DELETE`), `direct` (`DIRECT.GET`, whose replies are
//! the stored messages rather than JSON), `consumers` (consumer CRUD, leader stepdown, pause,
//! unpin, reset), `pull` (`CONSUMER.MSG.NEXT`, handed to `delivery`). Which node answers is
//! `routing`'s choice; `relay` holds a request its answerer missed or cannot answer yet;
//! `leaderless` answers for a stream (or the meta group) that has no
//! leader, partly by running the same handlers (`route`): the one import circle inside
//! `api/`. The handlers propose through `JetStream` (`lifecycle`), which starts this API: the
//! circle between the two is explained there.

pub mod account;
pub mod consumers;
mod direct;
mod inbox;
pub mod leaderless;
pub mod messages;
mod pull;
pub mod relay;
pub mod routing;
pub mod streams;

use std::sync::Arc;

use bytes::Bytes;

use super::queue::{self, QueueReceiver};
use super::JetStream;
use crate::jsapi::response::{encode_error, ResponseType};
use crate::jsapi::subject::ApiRequest;
use crate::jsapi::{ApiError, ErrorKind};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::subscription::Subscription;
use crate::wire::headers;
use inbox::{ApiInbox, Received, MAX_PENDING_REQUESTS};
use relay::Relay;

pub const API_SUBJECTS: &str = "$JS.API.>";

/// Subscribes the API and starts its dispatcher.
pub fn attach(js: &Arc<JetStream>) -> Arc<Subscription> {
    let (queue, requests) = queue::bounded(MAX_PENDING_REQUESTS);
    let inbox = ApiInbox::new(queue, js.api_dropped.clone());
    let subscription = js
        .router()
        .subscribe_internal(API_SUBJECTS, None, Arc::new(inbox));
    js.shared()
        .tasks
        .spawn(dispatch(js.clone(), Arc::new(Relay::default()), requests));
    subscription
}

async fn dispatch(js: Arc<JetStream>, relay: Arc<Relay>, mut requests: QueueReceiver<Received>) {
    let shutdown = js.shared().shutdown.clone();
    loop {
        let taken = tokio::select! {
            _ = shutdown.cancelled() => return,
            taken = requests.recv_many(1) => match taken {
                Some(taken) => taken,
                None => return,
            },
        };
        // Pull requests are handed to their consumer here, in the order they arrived: two
        // pulls sent back to back on one connection must reach the consumer in that order
        // (a waiting request before a `no_wait` one decides `408 Requests Pending`), as
        // nats-server handles them in its client's read loop. Handing one over never waits
        // (`pull::pull_request`), so the dispatcher is not held up.
        if taken.iter().all(|received| is_pull_request(&received.msg)) {
            for received in taken.iter() {
                handle(&js, &relay, received).await;
            }
            continue;
        }
        let (js, relay) = (js.clone(), relay.clone());
        js.shared().tasks.clone().spawn(async move {
            for received in taken.iter() {
                handle(&js, &relay, received).await;
            }
            // `taken` drops here: the request leaves the inbox's bound once answered.
        });
    }
}

/// Whether `msg` is a `CONSUMER.MSG.NEXT` request (see `dispatch`).
fn is_pull_request(msg: &Message) -> bool {
    msg.subject.starts_with(PULL_REQUEST_PREFIX.as_bytes())
}

const PULL_REQUEST_PREFIX: &str = "$JS.API.CONSUMER.MSG.NEXT.";

async fn handle(js: &Arc<JetStream>, relay: &Arc<Relay>, received: &Received) {
    let msg = &received.msg;
    // nats-server ignores API requests that cannot be answered.
    let Some(reply) = msg.reply.clone() else {
        return;
    };
    let subject = String::from_utf8_lossy(&msg.subject).into_owned();
    let body = match ApiRequest::parse(&subject) {
        Err(_) if !routing::answers_unparsed(js) => return,
        Err(error) => {
            js.count_api_call(true);
            Some(encode_error(ResponseType::System, &error.to_api_error()))
        }
        Ok(request) => {
            let role = routing::role(js, &request);
            tracing::trace!(%subject, ?role, from_peer = received.from_peer, "API request");
            match role {
                routing::Role::Answer => {
                    answer(js, &request, msg).await;
                    return;
                }
                routing::Role::AnswerForLeaderlessStream => {
                    leaderless::answer_for_stream(js, &request, msg).await
                }
                routing::Role::AnswerForLeaderlessMeta => {
                    leaderless::answer_for_meta(js, &request, msg).await
                }
                routing::Role::Silent => {
                    hold(js, relay, &request, received);
                    return;
                }
            }
        }
    };
    if let Some(body) = body {
        dispatch::publish(js.router(), &Message::new(reply, Bytes::from(body)));
    }
}

/// Answers `request`, which this node leads.
async fn answer(js: &Arc<JetStream>, request: &ApiRequest, msg: &Message) {
    let Some(reply) = &msg.reply else { return };
    after_queued_publishes(js, request).await;
    if let Some(body) = route(js, request, msg).await {
        dispatch::publish(js.router(), &Message::new(reply.clone(), Bytes::from(body)));
    }
}

/// A request this node is silent on, which the node expected to answer it may not have got
/// or this node may answer soon: held on a task of its own until it is passed on, or
/// answered here (`relay.rs`).
fn hold(js: &Arc<JetStream>, relay: &Arc<Relay>, request: &ApiRequest, received: &Received) {
    let Some(held) = relay.hold(js, request, &received.msg, received.from_peer) else {
        return;
    };
    let (js, request, msg) = (js.clone(), request.clone(), received.msg.clone());
    js.shared().tasks.clone().spawn(async move {
        if held.await == relay::Outcome::AnswerHere {
            answer(&js, &request, &msg).await;
        }
    });
}

/// A request about a stream this node holds is answered after the publishes this node
/// queued for it before the request are applied (`ingest_progress`), as nats-server answers
/// a one-replica stream's requests after the connection's earlier publishes. Pull requests
/// wait in their consumer's task instead (the dispatcher must not).
async fn after_queued_publishes(js: &JetStream, request: &ApiRequest) {
    if matches!(request, ApiRequest::ConsumerMsgNext { .. }) {
        return;
    }
    if let Some(handle) = request.stream().and_then(|stream| js.stream(stream)) {
        handle.after_queued_publishes().await;
    }
}

async fn route(js: &Arc<JetStream>, request: &ApiRequest, msg: &Message) -> Option<Vec<u8>> {
    let result: Result<Vec<u8>, ApiError> = match request {
        ApiRequest::AccountInfo => Ok(account::info(js).await),
        ApiRequest::StreamCreate { stream } => streams::create(js, stream, &msg.payload).await,
        ApiRequest::StreamUpdate { stream } => streams::update(js, stream, &msg.payload).await,
        ApiRequest::StreamInfo { stream } => streams::info(js, stream, &msg.payload),
        ApiRequest::StreamDelete { stream } => streams::delete(js, stream).await,
        ApiRequest::StreamPurge { stream } => streams::purge(js, stream, &msg.payload).await,
        ApiRequest::StreamNames => streams::names(js, &msg.payload),
        ApiRequest::StreamList => streams::list(js, &msg.payload).await,
        ApiRequest::StreamLeaderStepdown { stream } => streams::step_down(js, stream).await,
        ApiRequest::MetaLeaderStepdown => streams::meta_step_down(js).await,
        ApiRequest::StreamMsgGet { stream } => messages::get(js, stream, &msg.payload),
        ApiRequest::StreamMsgDelete { stream } => messages::delete(js, stream, &msg.payload).await,
        ApiRequest::ConsumerMsgNext { .. } => {
            pull::pull_request(js, request, msg).await;
            return None;
        }
        ApiRequest::DirectGet {
            stream,
            last_by_subject,
        } => {
            let target = js.direct_get_target(stream);
            match direct::get(
                js,
                stream,
                &target,
                last_by_subject.as_deref(),
                &msg.payload,
            ) {
                Some(replies) => answer_direct(js, msg, replies),
                // Like nats-server, which has no direct-get responder for such a stream.
                None => answer_no_responders(js, msg),
            }
            return None;
        }
        ApiRequest::ConsumerCreate { .. }
        | ApiRequest::ConsumerInfo { .. }
        | ApiRequest::ConsumerDelete { .. }
        | ApiRequest::ConsumerNames { .. }
        | ApiRequest::ConsumerList { .. }
        | ApiRequest::ConsumerLeaderStepdown { .. }
        | ApiRequest::ConsumerPause { .. }
        | ApiRequest::ConsumerUnpin { .. }
        | ApiRequest::ConsumerReset { .. } => consumers::handle(js, request, msg).await,
        // Snapshots, restores, peer removal are not supported.
        _ => Err(ApiError::new(ErrorKind::BadRequest)),
    };
    let response_type = request.response_type().unwrap_or(ResponseType::System);
    js.count_api_call(result.is_err());
    Some(result.unwrap_or_else(|error| encode_error(response_type, &error)))
}

fn answer_direct(js: &JetStream, msg: &Message, replies: Vec<direct::DirectReply>) {
    let Some(reply) = &msg.reply else { return };
    for (headers, payload) in replies {
        let headers = (!headers.is_empty()).then(|| Bytes::from(headers));
        dispatch::publish(
            js.router(),
            &Message::new(reply.clone(), payload).with_headers(headers),
        );
    }
}

fn answer_no_responders(js: &JetStream, msg: &Message) {
    let Some(reply) = &msg.reply else { return };
    let subject = String::from_utf8_lossy(&msg.subject);
    let block = headers::status_block(503, None, &[("Nats-Subject", &subject)]);
    dispatch::publish(
        js.router(),
        &Message::new(reply.clone(), Bytes::new()).with_headers(Some(block)),
    );
}
