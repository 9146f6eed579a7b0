//! Reading an origin stream the way any client would: through the JetStream API on the
//! router, so the origin's leader answers wherever it runs (this node or another), and
//! jetraft's own checks, leader changes and errors apply unchanged. `STREAM.MSG.GET` with
//! `next_by_subj` fetches the first origin message at or after a sequence on a subject;
//! `start_time` finds where an `opt_start_time` begins; `STREAM.INFO` gives the origin's
//! last sequence for the lag.
//!
//! One `OriginReader` per copy task: one internal inbox subscription for its whole life (a
//! subscription per request would invalidate every reader's match cache each time), each
//! request's reply subject ending in its own number so a late answer to an earlier request
//! is told apart and dropped.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::jetstream::token::random_token;
use crate::jsapi::msg_get::{MsgGetRequest, StoredMsg};
use crate::jsapi::stream_config::RetentionPolicy;
use crate::jsapi::time::Timestamp;
use crate::jsapi::{ApiError, ConsumerConfig, ErrorKind};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::subscription::{InternalSubscriber, Subscription};
use crate::server::ServerShared;

/// How long an origin request may take before it counts as failed (and is retried).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// An origin message as the API returned it.
#[derive(Debug, Clone)]
pub struct OriginMsg {
    pub seq: u64,
    pub subject: String,
    pub headers: Option<Bytes>,
    pub payload: Bytes,
    pub ts_nanos: i64,
}

/// Why a read did not return a message.
#[derive(Debug, Clone)]
pub enum ReadError {
    /// The origin answered with an error (no such stream, …).
    Api(ApiError),
    /// Nobody answered in time (no leader yet, or the origin's node is down).
    NoAnswer,
}

impl ReadError {
    /// As `STREAM.INFO` reports it in the source's `error`.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            ReadError::Api(error) => error.clone(),
            ReadError::NoAnswer => ApiError::new(ErrorKind::ClusterNotAvail),
        }
    }
}

/// Forwards what an internal subscription receives to a channel (API replies here, a
/// consumer's deliveries in `durable.rs`).
#[derive(Debug)]
pub(super) struct Forward {
    pub(super) queue: mpsc::UnboundedSender<Message>,
}

impl InternalSubscriber for Forward {
    fn receive(&self, msg: &Message) -> bool {
        let _ = self.queue.send(msg.clone());
        true
    }
}

#[derive(Deserialize)]
struct MsgGetReply {
    #[serde(default)]
    message: Option<StoredMsg>,
    #[serde(default)]
    error: Option<ApiError>,
}

#[derive(Deserialize)]
struct InfoReply {
    #[serde(default)]
    config: Option<InfoConfig>,
    #[serde(default)]
    state: Option<InfoState>,
    #[serde(default)]
    error: Option<ApiError>,
}

#[derive(Deserialize)]
struct InfoConfig {
    #[serde(default)]
    retention: RetentionPolicy,
}

/// What a consumer request (create, reset) answered.
#[derive(Deserialize)]
struct ConsumerReply {
    #[serde(default)]
    config: Option<ConsumerConfig>,
    #[serde(default)]
    error: Option<ApiError>,
}

#[derive(Deserialize)]
struct InfoState {
    #[serde(default)]
    last_seq: u64,
}

pub struct OriginReader {
    shared: Arc<ServerShared>,
    origin: String,
    inbox: String,
    subscription: Arc<Subscription>,
    replies: mpsc::UnboundedReceiver<Message>,
    next_request: u64,
}

impl OriginReader {
    pub fn new(shared: Arc<ServerShared>, origin: &str) -> Self {
        let inbox = format!("_JETRAFT_.SRC.{}", random_token(12));
        let (queue, replies) = mpsc::unbounded_channel();
        let subscription = shared.router.subscribe_internal(
            &format!("{inbox}.*"),
            None,
            Arc::new(Forward { queue }),
        );
        Self {
            shared,
            origin: origin.to_owned(),
            inbox,
            subscription,
            replies,
            next_request: 0,
        }
    }

    /// The first origin message at or after `from_seq` on `filter`; `None` when there is
    /// none yet.
    pub async fn next(
        &mut self,
        from_seq: u64,
        filter: &str,
    ) -> Result<Option<OriginMsg>, ReadError> {
        let request = MsgGetRequest {
            seq: from_seq.max(1),
            next_by_subj: filter.to_owned(),
            ..MsgGetRequest::default()
        };
        self.get(request).await
    }

    /// The first origin message stored at or after `time` on `filter`.
    pub async fn first_at(
        &mut self,
        time: Timestamp,
        filter: &str,
    ) -> Result<Option<OriginMsg>, ReadError> {
        let request = MsgGetRequest {
            start_time: Some(time),
            next_by_subj: filter.to_owned(),
            ..MsgGetRequest::default()
        };
        self.get(request).await
    }

    /// The origin's last sequence.
    pub async fn last_seq(&mut self) -> Result<u64, ReadError> {
        let info = self.info().await?;
        info.state.map(|s| s.last_seq).ok_or(ReadError::NoAnswer)
    }

    /// The origin's retention policy.
    pub async fn retention(&mut self) -> Result<RetentionPolicy, ReadError> {
        let info = self.info().await?;
        info.config.map(|c| c.retention).ok_or(ReadError::NoAnswer)
    }

    async fn info(&mut self) -> Result<InfoReply, ReadError> {
        let subject = format!("$JS.API.STREAM.INFO.{}", self.origin);
        let reply = self.request(subject, Bytes::new()).await?;
        let info: InfoReply =
            serde_json::from_slice(&reply.payload).map_err(|_| ReadError::NoAnswer)?;
        match info.error {
            Some(error) => Err(ReadError::Api(error)),
            None => Ok(info),
        }
    }

    /// Creates (or updates) a durable consumer on the origin; its config as stored.
    pub async fn create_consumer(
        &mut self,
        config: &ConsumerConfig,
    ) -> Result<ConsumerConfig, ReadError> {
        let subject = format!(
            "$JS.API.CONSUMER.CREATE.{}.{}",
            self.origin, config.durable_name
        );
        let body = serde_json::json!({ "stream_name": self.origin, "config": config });
        self.consumer_request(subject, Bytes::from(body.to_string()))
            .await
    }

    /// `CONSUMER.RESET` of an origin consumer back to its ack floor (empty body): delivery
    /// starts again at consumer sequence 1 with what was not acknowledged. Its config.
    pub async fn reset_consumer(&mut self, name: &str) -> Result<ConsumerConfig, ReadError> {
        let subject = format!("$JS.API.CONSUMER.RESET.{}.{name}", self.origin);
        self.consumer_request(subject, Bytes::new()).await
    }

    /// Deletes an origin consumer; a consumer already gone is not an error.
    pub async fn delete_consumer(&mut self, name: &str) -> Result<(), ReadError> {
        let subject = format!("$JS.API.CONSUMER.DELETE.{}.{name}", self.origin);
        match self.consumer_request(subject, Bytes::new()).await {
            Err(ReadError::NoAnswer) => Ok(()),
            Err(ReadError::Api(error)) if error.is(ErrorKind::ConsumerNotFound) => Ok(()),
            Err(error) => Err(error),
            Ok(_) => Ok(()),
        }
    }

    async fn consumer_request(
        &mut self,
        subject: String,
        body: Bytes,
    ) -> Result<ConsumerConfig, ReadError> {
        let reply = self.request(subject, body).await?;
        let reply: ConsumerReply =
            serde_json::from_slice(&reply.payload).map_err(|_| ReadError::NoAnswer)?;
        match (reply.config, reply.error) {
            (_, Some(error)) => Err(ReadError::Api(error)),
            (Some(config), None) => Ok(config),
            (None, None) => Ok(ConsumerConfig::default()),
        }
    }

    async fn get(&mut self, request: MsgGetRequest) -> Result<Option<OriginMsg>, ReadError> {
        let subject = format!("$JS.API.STREAM.MSG.GET.{}", self.origin);
        let body = serde_json::to_vec(&request).expect("a request serializes");
        let reply = self.request(subject, Bytes::from(body)).await?;
        let reply: MsgGetReply =
            serde_json::from_slice(&reply.payload).map_err(|_| ReadError::NoAnswer)?;
        match (reply.message, reply.error) {
            (_, Some(error)) if error.is(ErrorKind::NoMessageFound) => Ok(None),
            (_, Some(error)) => Err(ReadError::Api(error)),
            (Some(msg), None) => Ok(Some(OriginMsg {
                seq: msg.seq,
                subject: msg.subject,
                headers: (!msg.headers.is_empty()).then(|| Bytes::from(msg.headers)),
                payload: Bytes::from(msg.data),
                ts_nanos: msg.time.unix_nanos().unwrap_or(0),
            })),
            (None, None) => Err(ReadError::NoAnswer),
        }
    }

    async fn request(&mut self, subject: String, body: Bytes) -> Result<Message, ReadError> {
        self.next_request += 1;
        let reply_to = format!("{}.{}", self.inbox, self.next_request);
        dispatch::publish(
            &self.shared.router,
            &Message::new(subject, body).with_reply(Some(Bytes::from(reply_to.clone()))),
        );
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        loop {
            let reply = tokio::time::timeout_at(deadline, self.replies.recv())
                .await
                .map_err(|_| ReadError::NoAnswer)?
                .ok_or(ReadError::NoAnswer)?;
            if reply.subject.as_ref() == reply_to.as_bytes() {
                // A status-only reply (no responders) has no JSON body.
                if reply.payload.is_empty() {
                    return Err(ReadError::NoAnswer);
                }
                return Ok(reply);
            }
        }
    }
}

impl Drop for OriginReader {
    fn drop(&mut self) {
        self.shared.router.unsubscribe(&self.subscription);
    }
}
