//! Which node answers an API request, asking the node that can, and leader stepdowns.
//!
//! Every node subscribes `$JS.API.>` and interest propagation hands each request to every node;
//! exactly one answers (as in nats-server): the leader of the stream a request names, or the
//! meta leader for account-wide requests, stream create/delete, and streams that do not exist.
//! While a stream (or the meta group) has no leader, one of its replicas answers for it
//! instead (`leaderless.rs`).
//! A node without a cluster answers everything itself (`compat::answers_every_request`).
//! A node that needs a stream's state it does not lead (the meta leader answering a create or a
//! list) asks the stream's leader with an internal request, like any client would.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::oneshot;

use crate::consensus::{NodeId, RaftGroup};
use crate::jetstream::{compat, JetStream};
use crate::jsapi::requests::ConsumersRequest;
use crate::jsapi::response::ConsumerNamesResponse;
use crate::jsapi::subject::ApiRequest;
use crate::jsapi::{ApiError, ErrorKind, StreamInfo};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::subscription::InternalSubscriber;

/// How long a node waits for another node's answer to an internal request.
pub const INTERNAL_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// How this node takes part in answering a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// This node answers: it leads what the request is about (a single node leads all).
    Answer,
    /// The stream the request names has no leader, and this node answers for it
    /// (`leaderless::answer_for_stream`).
    AnswerForLeaderlessStream,
    /// The request is the meta leader's, there is none, and this node answers for it
    /// (`leaderless::answer_for_meta`).
    AnswerForLeaderlessMeta,
    /// Another node answers, or nobody can.
    Silent,
}

/// What a request is about, for which node answers it.
enum Target<'a> {
    /// The meta group: account-wide requests, creates and deletes, unknown streams.
    Meta,
    /// A stream this cluster has (a direct get's may be a mirror of the one it names).
    Stream(std::borrow::Cow<'a, str>),
}

fn target<'a>(js: &JetStream, request: &'a ApiRequest) -> Target<'a> {
    if let ApiRequest::StreamCreate { .. } | ApiRequest::StreamDelete { .. } = request {
        return Target::Meta;
    }
    // A direct get may be answered by a mirror of the stream it names (`mirror_direct`).
    let stream = match request {
        ApiRequest::DirectGet { stream, .. } => Some(js.direct_get_target(stream).into()),
        _ => request.stream().map(std::borrow::Cow::Borrowed),
    };
    match stream {
        Some(stream) if js.assignment(&stream).is_some() => Target::Stream(stream),
        _ => Target::Meta,
    }
}

/// How this node takes part in answering `request` (see the module docs).
pub fn role(js: &JetStream, request: &ApiRequest) -> Role {
    if compat::answers_every_request(js.topology()) {
        return Role::Answer;
    }
    match target(js, request) {
        Target::Meta if js.is_meta_leader() => Role::Answer,
        Target::Meta if super::leaderless::answers_for_meta(js) => Role::AnswerForLeaderlessMeta,
        Target::Meta => Role::Silent,
        Target::Stream(stream) => {
            if js.leads_stream(&stream) || offline_here_alone(js, &stream) {
                Role::Answer
            } else if super::leaderless::answers_for_stream(js, &stream) {
                Role::AnswerForLeaderlessStream
            } else {
                Role::Silent
            }
        }
    }
}

/// The node this node expects to answer `request`: the leader of the stream it is about (as
/// this node's replica of its group knows it), or the meta leader; `None` when it knows none.
pub fn answerer(js: &JetStream, request: &ApiRequest) -> Option<NodeId> {
    match target(js, request) {
        Target::Meta => js.meta_group().leader(),
        Target::Stream(stream) => js.stream(&stream)?.group().leader(),
    }
}

/// Whether `stream` is offline on this node and this node is its only replica: no other node
/// can answer for it (an R1 stream whose data is damaged or quarantined here, ADR 0015).
fn offline_here_alone(js: &JetStream, stream: &str) -> bool {
    js.assignment(stream)
        .is_some_and(|a| a.replicas == [js.node_id()])
        && js.is_offline(stream)
}

/// Whether this node answers a request whose subject did not parse: the meta leader, or the
/// node answering for it while there is none.
pub fn answers_unparsed(js: &JetStream) -> bool {
    compat::answers_every_request(js.topology())
        || js.is_meta_leader()
        || super::leaderless::answers_for_meta(js)
}

#[derive(Debug)]
struct ReplyCatcher {
    reply: Mutex<Option<oneshot::Sender<Message>>>,
}

impl InternalSubscriber for ReplyCatcher {
    fn receive(&self, msg: &Message) -> bool {
        if let Some(reply) = self.reply.lock().take() {
            let _ = reply.send(msg.clone());
        }
        true
    }
}

/// Publishes `body` to `subject` with a fresh inbox as reply subject and waits for the first
/// reply. The inbox is subscribed before the request is published, and interest reaches each
/// peer before the request does (one ordered route per peer), so the answer finds its way back.
pub async fn internal_request(
    js: &JetStream,
    subject: String,
    body: Bytes,
    timeout: Duration,
) -> Option<Message> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let inbox = format!(
        "_JETRAFT_.{}.{}",
        js.node_id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let (sender, receiver) = oneshot::channel();
    let catcher = Arc::new(ReplyCatcher {
        reply: Mutex::new(Some(sender)),
    });
    let subscription = js.router().subscribe_internal(&inbox, None, catcher);
    dispatch::publish(
        js.router(),
        &Message::new(subject, body).with_reply(Some(Bytes::from(inbox))),
    );
    let reply = tokio::time::timeout(timeout, receiver).await.ok()?.ok();
    js.router().unsubscribe(&subscription);
    reply
}

/// The info of stream `name` as its leader reports it; `None` if no leader answered in time.
pub async fn remote_stream_info(js: &JetStream, name: &str) -> Option<StreamInfo> {
    remote_stream_info_within(js, name, INTERNAL_REQUEST_TIMEOUT).await
}

async fn remote_stream_info_within(
    js: &JetStream,
    name: &str,
    timeout: Duration,
) -> Option<StreamInfo> {
    let reply = internal_request(
        js,
        format!("$JS.API.STREAM.INFO.{name}"),
        Bytes::new(),
        timeout,
    )
    .await?;
    let value: serde_json::Value = serde_json::from_slice(&reply.payload).ok()?;
    if value.get("error").is_some() {
        return None;
    }
    serde_json::from_value(value).ok()
}

/// The names of stream `name`'s consumers, every `CONSUMER.NAMES` page, as the node answering
/// for the stream reports them; `None` if no answer came in time or the answer was an error.
pub async fn remote_consumer_names(js: &JetStream, name: &str) -> Option<Vec<String>> {
    let mut names: Vec<String> = Vec::new();
    loop {
        let request = ConsumersRequest {
            offset: names.len() as i64,
        };
        let reply = internal_request(
            js,
            format!("$JS.API.CONSUMER.NAMES.{name}"),
            Bytes::from(serde_json::to_vec(&request).ok()?),
            INTERNAL_REQUEST_TIMEOUT,
        )
        .await?;
        let value: serde_json::Value = serde_json::from_slice(&reply.payload).ok()?;
        if value.get("error").is_some() {
            return None;
        }
        let page: ConsumerNamesResponse = serde_json::from_value(value).ok()?;
        let total = usize::try_from(page.paged.total).unwrap_or(0);
        let last_page = page.consumers.is_empty();
        names.extend(page.consumers);
        if last_page || names.len() >= total {
            return Some(names);
        }
    }
}

/// The info of stream `name` from wherever it is led; waits (bounded) for a new stream to
/// elect its leader.
pub async fn stream_info_anywhere(
    js: &Arc<JetStream>,
    name: &str,
    wait: Duration,
) -> Result<StreamInfo, ApiError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        if js.leads_stream(name) {
            return js.stream_info(name, &Default::default());
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(ApiError::new(ErrorKind::ClusterNotAvail));
        }
        // A local replica learns when its group has a leader; ask only then.
        if let Some(handle) = js.stream(name) {
            let group = handle.group();
            if group.wait_for_leader(left).await.ok() == Some(js.node_id()) {
                // This node leads: serving starts with the next metrics change.
                let mut metrics = group.raft().metrics();
                let _ = tokio::time::timeout(Duration::from_millis(50), metrics.changed()).await;
                continue;
            }
        }
        let ask = left.min(Duration::from_millis(500));
        // A replica answering for a stream without a leader (`leaderless.rs`) is no leader.
        let led = |info: &StreamInfo| info.cluster.as_ref().is_some_and(|c| !c.leader.is_empty());
        if let Some(info) = remote_stream_info_within(js, name, ask).await.filter(led) {
            return Ok(info);
        }
    }
}

/// Leader stepdown of `group` (a stream's, or the meta group): asks a caught-up follower to
/// start an election and waits until someone else leads.
///
/// openraft 0.9 has no leadership transfer, and a voter that heard from the leader within the
/// leader lease rejects the candidate's first vote request; the candidate's higher term still
/// deposes this leader, whose own election timer could then win again before the candidate
/// retries. So this node does not campaign while it hands over (`NoCampaign`).
pub async fn step_down(js: &JetStream, group: &RaftGroup) -> Result<(), ApiError> {
    let metrics = group.raft().metrics().borrow().clone();
    let last_index = metrics.last_log_index.unwrap_or(0);
    let matched = metrics.replication.clone().unwrap_or_default();
    let me = js.node_id();
    let candidate = matched
        .iter()
        .filter(|(id, _)| **id != me)
        .max_by_key(|(_, log)| log.map_or(0, |log| log.index))
        .filter(|(_, log)| log.map_or(0, |log| log.index) == last_index)
        .map(|(id, _)| *id)
        .ok_or_else(|| ApiError::new(ErrorKind::ClusterNotAvail))?;
    let _no_campaign = NoCampaign::new(group);
    js.topology()
        .ask_to_elect(candidate, group.id())
        .await
        .map_err(|why| {
            tracing::warn!(group = group.id(), "stepdown failed: {why}");
            ApiError::new(ErrorKind::ClusterNotAvail)
        })?;
    group
        .raft()
        .wait(Some(Duration::from_secs(5)))
        .metrics(
            |m| m.current_leader.is_some() && m.current_leader != Some(me),
            "another leader",
        )
        .await
        .map_err(|_| ApiError::new(ErrorKind::ClusterNotAvail))?;
    Ok(())
}

/// Keeps a group's node from starting elections until dropped.
struct NoCampaign<'a> {
    group: &'a RaftGroup,
}

impl<'a> NoCampaign<'a> {
    fn new(group: &'a RaftGroup) -> Self {
        // The node's pacer starts the group's elections (openraft's own timers are off).
        group.signals().set_campaigns(false);
        NoCampaign { group }
    }
}

impl Drop for NoCampaign<'_> {
    fn drop(&mut self) {
        self.group.signals().set_campaigns(true);
    }
}
