//! Publishing into a stream: a message on one of the stream's subjects reaches the stream's
//! ingest subscriber (an internal subscription, here), which checks it and queues it for the
//! stream's ingest task (`ingest_task.rs`); the task batches waiting messages into one Raft
//! entry — so many publishes share one fsync — and, once the entry is committed and applied,
//! answers each publish that had a reply subject with its PubAck.
//!
//! One ingest task per stream group on its leader, started by the stream's first message (a
//! node may lead thousands of idle streams; a task and a channel each would cost them memory
//! for nothing). A few entries are proposed at once (pipelining: the next batch is on its way
//! while the previous one is being fsynced); acks go out in proposal order.
//!
//! Backpressure: the queue in front of the ingest task is bounded like nats-server's stream
//! ingest queue (100,000 messages or 128 MiB). A publish arriving when it is full is refused
//! at once with `429 Too Many Requests` and the 10167 PubAck error, so a publisher far faster
//! than fsync cannot grow the node's memory; with a bounded number of proposals per stream
//! behind it, the WAL's request queue stays bounded too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use tokio::sync::mpsc;

use super::ingest_progress::IngestProgress;
use super::ingest_task::run;
use super::stream::StreamHandle;
use crate::jsapi::{ApiError, ErrorKind, PubAckResponse};
use crate::jscore::atomic_batch::batch_id;
use crate::jscore::stream::{header_rules, refuse_unsupported_headers, AppendError, HeaderRules};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::subscription::{InternalSubscriber, Subscription};
use crate::server::ServerShared;

/// Most messages waiting for one stream's ingest task (nats-server's default).
pub const MAX_QUEUED_MSGS: usize = 100_000;
/// Most bytes (subject, headers, payload) waiting for one stream's ingest task.
pub const MAX_QUEUED_BYTES: usize = 128 << 20;

/// Bounds of one stream's ingest queue.
#[derive(Debug, Clone, Copy)]
struct QueueLimits {
    msgs: usize,
    bytes: usize,
}

const QUEUE_LIMITS: QueueLimits = QueueLimits {
    msgs: MAX_QUEUED_MSGS,
    bytes: MAX_QUEUED_BYTES,
};

/// What waits in a stream's ingest queue; shared by the subscriber and the task.
#[derive(Debug, Default)]
pub(super) struct Backlog {
    msgs: AtomicUsize,
    bytes: AtomicUsize,
}

impl Backlog {
    pub(super) fn taken(&self, msg: &Message) {
        self.msgs.fetch_sub(1, Ordering::Relaxed);
        self.bytes.fetch_sub(queued_size(msg), Ordering::Relaxed);
    }
}

fn queued_size(msg: &Message) -> usize {
    msg.subject.len() + msg.headers.as_ref().map_or(0, Bytes::len) + msg.payload.len()
}

/// The internal subscriber on a stream's subjects.
#[derive(Debug)]
struct Ingest {
    stream: String,
    /// The ingest task's queue, set when the first message starts the task.
    queue: OnceLock<mpsc::UnboundedSender<Message>>,
    /// How to start the task (None only where `queue` is set from the start: tests).
    start: Option<TaskStart>,
    backlog: Arc<Backlog>,
    limits: QueueLimits,
    /// For refusals (weak: the router holding this subscriber lives in `ServerShared`).
    shared: Weak<ServerShared>,
}

/// What a stream's ingest task is started with, on its first message.
#[derive(Debug)]
struct TaskStart {
    stream: Arc<StreamHandle>,
    /// The subscriber runs on whichever thread publishes; the task goes to the node's runtime.
    runtime: tokio::runtime::Handle,
}

impl InternalSubscriber for Ingest {
    fn receive(&self, msg: &Message) -> bool {
        let size = queued_size(msg);
        let msgs = self.backlog.msgs.fetch_add(1, Ordering::Relaxed);
        let bytes = self.backlog.bytes.fetch_add(size, Ordering::Relaxed);
        if msgs >= self.limits.msgs || bytes + size > self.limits.bytes {
            self.backlog.taken(msg);
            self.refuse(msg);
            return true;
        }
        // Batches on a stream without `allow_atomic`, TTLs the stream does not take or
        // cannot read, increments on a stream that does not count (or cannot be read) and
        // schedules it does not take or jetraft does not implement (ADR 0023):
        // refused here, before the proposal, as nats-server does; never stored and ignored.
        // An atomic batch's member goes on to the ingest task, which stages it.
        let unsupported = msg.headers.as_deref().map_or(Ok(()), |block| {
            if batch_id(block).is_some() && self.allows_atomic() {
                return Ok(());
            }
            self.refuse_headers(block, std::str::from_utf8(&msg.subject).unwrap_or_default())
        });
        if let Err(error) = unsupported {
            self.backlog.taken(msg);
            self.send_refusal(header_refusal(&self.stream, msg.reply.clone(), &error));
            return true;
        }
        let Some(queue) = self.queue() else {
            self.backlog.taken(msg);
            return false;
        };
        let progress = self.progress();
        progress.inspect(|progress| progress.queued());
        if queue.send(msg.clone()).is_err() {
            self.backlog.taken(msg);
            progress.inspect(|progress| progress.settled(1));
            return false;
        }
        true
    }
}

impl Ingest {
    /// The refusal of a publish with header block `block` to `subject`, by what the
    /// stream's config lets headers ask for (`jscore::stream::header_rules`, its schedule
    /// rules); read only for publishes with headers.
    fn refuse_headers(&self, block: &[u8], subject: &str) -> Result<(), AppendError> {
        let refuse = |rules: HeaderRules<'_>| {
            refuse_unsupported_headers(block, subject, &self.stream, rules)
        };
        match &self.start {
            Some(start) => start
                .stream
                .view()
                .read(|group| refuse(header_rules(group.stream().config()))),
            None => refuse(HeaderRules::NONE),
        }
    }

    /// Where the queued publishes are counted (`None` only in tests without a stream).
    fn progress(&self) -> Option<&IngestProgress> {
        self.start.as_ref().map(|start| start.stream.ingest())
    }

    /// Whether the stream takes atomic batches (its replicated `allow_atomic`); read only
    /// for batch members.
    fn allows_atomic(&self) -> bool {
        self.start.as_ref().is_some_and(|start| {
            start
                .stream
                .view()
                .read(|group| group.stream().config().allow_atomic)
        })
    }

    /// The ingest task's queue, starting the task on first use; None once the server is
    /// gone.
    fn queue(&self) -> Option<&mpsc::UnboundedSender<Message>> {
        if let Some(queue) = self.queue.get() {
            return Some(queue);
        }
        let (start, shared) = (self.start.as_ref()?, self.shared.upgrade()?);
        Some(self.queue.get_or_init(|| {
            let (queue, incoming) = mpsc::unbounded_channel();
            let task = run(
                shared.clone(),
                start.stream.clone(),
                incoming,
                self.backlog.clone(),
            );
            shared.tasks.spawn_on(task, &start.runtime);
            queue
        }))
    }

    /// The queue is full: as nats-server, answer `429 Too Many Requests` with the 10167
    /// PubAck error (nothing is stored); a publish without a reply is dropped.
    fn refuse(&self, msg: &Message) {
        let (Some(reply), Some(shared)) = (&msg.reply, self.shared.upgrade()) else {
            return;
        };
        tracing::warn!(stream = %self.stream, "ingest queue full: publish refused");
        dispatch::publish(&shared.router, &refusal(&self.stream, reply.clone()));
    }

    /// Sends a refusal's answer (`None` when the publish asked for none).
    fn send_refusal(&self, answer: Option<Message>) {
        if let (Some(answer), Some(shared)) = (answer, self.shared.upgrade()) {
            tracing::debug!(stream = %self.stream, "publish with an unsupported header refused");
            dispatch::publish(&shared.router, &answer);
        }
    }
}

/// The PubAck error answering a publish whose headers ask for a feature jetraft refuses
/// (a plain JSON reply, no status line, as nats-server answers); `None` without a reply.
fn header_refusal(stream: &str, reply: Option<Bytes>, error: &AppendError) -> Option<Message> {
    reply.map(|reply| {
        let body = PubAckResponse::failure(stream, error.to_api_error()).to_json();
        Message::new(reply, Bytes::from(body))
    })
}

/// The answer to a publish refused because the stream's ingest queue is full.
fn refusal(stream: &str, reply: Bytes) -> Message {
    let error = ApiError::new(ErrorKind::StreamTooManyRequests);
    let body = PubAckResponse::failure(stream, error).to_json();
    let status = crate::wire::headers::status_block(429, Some("Too Many Requests"), &[]);
    Message::new(reply, Bytes::from(body)).with_headers(Some(status))
}

/// Subscribes `subjects` for `stream`, whose first message starts its ingest task; returns
/// the subscriptions (unsubscribing all of them ends the task). Call from inside the runtime.
pub fn attach(
    shared: &Arc<ServerShared>,
    stream: &Arc<StreamHandle>,
    subjects: &[String],
) -> Vec<Arc<Subscription>> {
    let ingest = Arc::new(Ingest {
        stream: stream.name().to_owned(),
        queue: OnceLock::new(),
        start: Some(TaskStart {
            stream: stream.clone(),
            runtime: tokio::runtime::Handle::current(),
        }),
        backlog: Arc::new(Backlog::default()),
        limits: QUEUE_LIMITS,
        shared: Arc::downgrade(shared),
    });
    let subscriptions = subjects
        .iter()
        .map(|subject| {
            shared
                .router
                .subscribe_internal(subject, None, ingest.clone())
        })
        .collect();
    subscriptions
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingest(limits: QueueLimits) -> (Ingest, mpsc::UnboundedReceiver<Message>) {
        let (queue, incoming) = mpsc::unbounded_channel();
        let ingest = Ingest {
            stream: "S".into(),
            queue: OnceLock::from(queue),
            start: None,
            backlog: Arc::new(Backlog::default()),
            limits,
            shared: Weak::new(),
        };
        (ingest, incoming)
    }

    fn publish(payload: usize) -> Message {
        Message::new(Bytes::from_static(b"s.a"), Bytes::from(vec![0u8; payload]))
    }

    #[test]
    fn a_publisher_faster_than_the_ingest_task_cannot_grow_the_queue() {
        let (ingest, mut incoming) = ingest(QueueLimits {
            msgs: 100,
            bytes: 1 << 20,
        });
        // Nobody drains: ten times the bound is offered, the bound is kept.
        for _ in 0..1000 {
            assert!(ingest.receive(&publish(10)), "taken (queued or refused)");
        }
        assert_eq!(incoming.len(), 100);
        assert_eq!(ingest.backlog.msgs.load(Ordering::Relaxed), 100);
        // The task takes some: room again for exactly as many.
        for _ in 0..40 {
            let msg = incoming.try_recv().unwrap();
            ingest.backlog.taken(&msg);
        }
        for _ in 0..100 {
            ingest.receive(&publish(10));
        }
        assert_eq!(incoming.len(), 100);
        assert_eq!(ingest.backlog.bytes.load(Ordering::Relaxed), 100 * 13);
    }

    #[test]
    fn the_byte_bound_holds_too() {
        let (ingest, incoming) = ingest(QueueLimits {
            msgs: 1000,
            bytes: 10_000,
        });
        for _ in 0..100 {
            ingest.receive(&publish(997));
        }
        assert_eq!(incoming.len(), 10, "ten messages of 1000 bytes fit");
        assert_eq!(ingest.backlog.bytes.load(Ordering::Relaxed), 10_000);
    }

    #[test]
    fn a_refusal_is_nats_servers_429_with_the_10167_puback_error() {
        let answer = refusal("ORDERS", Bytes::from_static(b"_INBOX.1"));
        assert_eq!(&answer.subject[..], b"_INBOX.1");
        assert_eq!(
            &answer.headers.unwrap()[..],
            b"NATS/1.0 429 Too Many Requests\r\n\r\n"
        );
        let body: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
        assert_eq!(body["stream"], "ORDERS");
        assert_eq!(body["error"]["code"], 429);
        assert_eq!(body["error"]["err_code"], 10167);
        assert_eq!(body["error"]["description"], "too many requests");
    }

    #[test]
    fn a_publish_with_a_ttl_is_refused_before_the_queue() {
        let (ingest, incoming) = ingest(QueueLimits {
            msgs: 10,
            bytes: 1 << 20,
        });
        let with_ttl = publish(1).with_headers(Some(Bytes::from_static(
            b"NATS/1.0\r\nNats-TTL: 1m\r\n\r\n",
        )));
        assert!(ingest.receive(&with_ttl));
        assert_eq!(incoming.len(), 0, "never proposed");
        assert_eq!(ingest.backlog.msgs.load(Ordering::Relaxed), 0);
        let answer = header_refusal(
            "S",
            Some(Bytes::from_static(b"r")),
            &AppendError::TtlDisabled,
        )
        .expect("a reply was asked for");
        assert!(answer.headers.is_none(), "a plain PubAck error, no status");
        let body: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
        assert_eq!(body["error"]["err_code"], 10166);
        assert!(header_refusal("S", None, &AppendError::TtlDisabled).is_none());
    }
}
