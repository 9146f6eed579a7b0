//! Publishing into a stream: a message on one of the stream's subjects reaches the stream's
//! ingest task (an internal subscription), which batches waiting messages into one Raft
//! entry — so many publishes share one fsync — and, once the entry is committed and
//! applied, answers each publish that had a reply subject with its PubAck.
//!
//! One ingest task per stream group on its leader, started by the stream's first message (a
//! node may lead thousands of idle streams; a task and a channel each would cost them memory
//! for nothing). Up to `MAX_IN_FLIGHT` entries are
//! proposed at once (pipelining: the next batch is on its way while the previous one is
//! being fsynced); acks go out in proposal order.
//!
//! Backpressure: the queue in front of the ingest task is bounded like nats-server's stream
//! ingest queue (100,000 messages or 128 MiB). A publish arriving when it is full is refused
//! at once with `429 Too Many Requests` and the 10167 PubAck error, so a publisher far faster
//! than fsync cannot grow the node's memory; with at most `MAX_IN_FLIGHT` proposals per
//! stream behind it, the WAL's request queue stays bounded too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::sync::mpsc;

use super::atomic_publish::{self, AtomicBatches, AtomicResult, Taken};
use super::ingest_progress::IngestProgress;
use super::republish::StreamTransforms;
use super::stream::StreamHandle;
use super::stream_machine::entry;
use crate::consensus::gather::Bursts;
use crate::jsapi::{ApiError, ErrorKind, PubAck, PubAckResponse};
use crate::jscore::atomic_batch::batch_id;
use crate::jscore::group::StreamOutcome;
use crate::jscore::stream::{
    header_rules, refuse_unsupported_headers, stored_schedule_headers, value_body, AppendError,
    AppendOutcome, HeaderRules,
};
use crate::server::dispatch::{self, Dispatch};
use crate::server::message::Message;
use crate::server::subscription::{InternalSubscriber, Subscription};
use crate::server::ServerShared;

/// Most messages in one Raft entry.
const MAX_BATCH: usize = 1024;
/// Most entries being committed at once per stream.
const MAX_IN_FLIGHT: usize = 4;

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
struct Backlog {
    msgs: AtomicUsize,
    bytes: AtomicUsize,
}

impl Backlog {
    fn taken(&self, msg: &Message) {
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

/// A proposed batch: the messages (with the subjects they were stored under), when, the
/// stream's transforms at the time, and the outcomes.
struct BatchResult {
    messages: Vec<Message>,
    now_nanos: i64,
    transforms: StreamTransforms,
    outcomes: Result<Vec<Result<StreamOutcome, ApiError>>, ApiError>,
}

/// A proposal of the ingest task: gathered publishes, or a committed atomic batch.
enum Proposed {
    Publishes(BatchResult),
    Atomic(AtomicResult),
}

async fn run(
    shared: Arc<ServerShared>,
    stream: Arc<StreamHandle>,
    mut incoming: mpsc::UnboundedReceiver<Message>,
    backlog: Arc<Backlog>,
) {
    let mut in_flight: FuturesOrdered<BoxFuture<'static, Proposed>> = FuturesOrdered::new();
    // Whether the last batch was a burst (see `gather`).
    let mut bursts = Bursts::default();
    // Atomic batches being staged (leader memory: they end with this task).
    let mut atomic = AtomicBatches::default();
    loop {
        let idle_deadline = atomic.next_idle_deadline();
        tokio::select! {
            biased;
            Some(proposed) = in_flight.next(), if !in_flight.is_empty() => {
                let count = answer_proposed(&shared, stream.name(), proposed);
                stream.ingest().settled(count);
            }
            received = incoming.recv(), if in_flight.len() < MAX_IN_FLIGHT => {
                let Some(first) = received else { break };
                backlog.taken(&first);
                let mut batch = vec![first];
                gather(&mut incoming, &backlog, &mut batch, &bursts).await;
                bursts.record(batch.len());
                let (batch, answered) =
                    stage_members(&shared, &stream, &mut atomic, batch, &mut in_flight);
                stream.ingest().settled(answered);
                if !batch.is_empty() {
                    let proposal = propose_batch(stream.clone(), batch);
                    in_flight.push_back(Box::pin(async { Proposed::Publishes(proposal.await) }));
                }
            }
            _ = sleep_until_nanos(idle_deadline.unwrap_or(i64::MAX)), if idle_deadline.is_some() => {
                atomic.abandon_idle(stream.name(), super::now_nanos());
            }
            _ = shared.shutdown.cancelled() => break,
        }
    }
    // Whatever was proposed still gets its answer if it completes.
    while let Some(proposed) = in_flight.next().await {
        let count = answer_proposed(&shared, stream.name(), proposed);
        stream.ingest().settled(count);
    }
}

/// Hands the atomic batch members among `batch` to `atomic` (answering them, or proposing
/// a committed batch); returns the other messages, in order, and how many members it is
/// done with (all but those whose batch it proposed).
fn stage_members(
    shared: &ServerShared,
    stream: &Arc<StreamHandle>,
    atomic: &mut AtomicBatches,
    batch: Vec<Message>,
    in_flight: &mut FuturesOrdered<BoxFuture<'static, Proposed>>,
) -> (Vec<Message>, u64) {
    let is_member = |msg: &Message| msg.headers.as_deref().and_then(batch_id).is_some();
    if !batch.iter().any(is_member) {
        return (batch, 0);
    }
    let mut done = 0;
    let mut dispatch = Dispatch::default();
    let mut others = Vec::with_capacity(batch.len());
    for msg in batch {
        if !is_member(&msg) {
            others.push(msg);
            continue;
        }
        match atomic.take(stream, msg, super::now_nanos()) {
            Taken::Answer(Some(answer)) => {
                done += 1;
                let matches = shared.router.matches(&answer.subject);
                dispatch.route(&shared.router, &matches, &answer, None);
            }
            Taken::Answer(None) => done += 1,
            Taken::Propose(committed) => {
                let proposal = atomic_publish::propose(stream.clone(), committed);
                in_flight.push_back(Box::pin(async { Proposed::Atomic(proposal.await) }));
            }
        }
    }
    dispatch.wake_all(&shared.stats);
    (others, done)
}

/// Sleeps until the wall-clock time `deadline_nanos` (`now_nanos`' clock).
async fn sleep_until_nanos(deadline_nanos: i64) {
    let wait = deadline_nanos.saturating_sub(super::now_nanos()).max(0);
    tokio::time::sleep(std::time::Duration::from_nanos(wait as u64)).await;
}

/// Answers a proposal's publishes; returns how many publishes of the ingest queue it settled
/// (an atomic batch is settled by its commit message, the one publish that proposed it).
fn answer_proposed(shared: &ServerShared, stream: &str, proposed: Proposed) -> u64 {
    match proposed {
        Proposed::Publishes(batch) => {
            let count = batch.messages.len() as u64;
            answer(shared, stream, batch);
            count
        }
        Proposed::Atomic(result) => {
            let mut dispatch = Dispatch::default();
            atomic_publish::answer(shared, &mut dispatch, stream, result);
            dispatch.wake_all(&shared.stats);
            1
        }
    }
}

/// Takes what is queued behind the first message and, while messages come in bursts, keeps
/// taking them until the burst goes quiet (the gather rule, `consensus::gather`). A client's
/// burst of async publishes reaches us over several reads, and a burst split over two entries
/// waits for two fsyncs before its last PubAck. A lone publish (sync publishing) is proposed
/// at once. Every message taken leaves the ingest queue's backlog (see `Backlog`), so
/// gathering frees room for publishers as it goes.
///
/// Why two gathering stages (this one and the `ProposalBatcher` behind it): this one packs
/// messages into one proposal of up to `MAX_BATCH` appends and keeps up to `MAX_IN_FLIGHT`
/// proposals on their way, so the next batch is encoded and queued while the previous one is
/// fsynced; the batcher packs whole proposals from every source of the group (this batch,
/// acks, pull requests) into one entry while one entry is in openraft. Each stage gathers
/// only while its own input is bursty, so a lone publish passes both without a pause.
async fn gather(
    incoming: &mut mpsc::UnboundedReceiver<Message>,
    backlog: &Backlog,
    batch: &mut Vec<Message>,
    bursts: &Bursts,
) {
    let mut gathering = bursts.start();
    loop {
        while batch.len() < MAX_BATCH {
            match incoming.try_recv() {
                Ok(msg) => {
                    backlog.taken(&msg);
                    batch.push(msg);
                }
                Err(_) => break,
            }
        }
        if batch.len() >= MAX_BATCH || !gathering.pause_for_more(batch.len()).await {
            return;
        }
    }
}

async fn propose_batch(stream: Arc<StreamHandle>, mut batch: Vec<Message>) -> BatchResult {
    let now = super::now_nanos();
    // The stream's subject transform picks the stored subject here, on the leader.
    let transforms = StreamTransforms::of(&stream);
    for msg in &mut batch {
        msg.subject = transforms.stored_subject(&msg.subject);
        // A schedule is stored with `Nats-Rollup: sub` (checked by the ingest, ADR 0023).
        if let Some(headers) = msg.headers.as_deref().and_then(stored_schedule_headers) {
            msg.headers = Some(Bytes::from(headers));
        }
    }
    let commands = batch
        .iter()
        .map(|msg| entry::encode_append(&msg.subject, msg.headers.as_deref(), &msg.payload, now))
        .collect();
    let outcomes = stream.propose_encoded(commands).await;
    BatchResult {
        messages: batch,
        now_nanos: now,
        transforms,
        outcomes,
    }
}

/// Republishes what was stored (when the stream republishes) and sends each publish that
/// asked for one its PubAck (or the error), in the order the appends were applied.
fn answer(shared: &ServerShared, stream: &str, batch: BatchResult) {
    let BatchResult {
        messages,
        now_nanos,
        transforms,
        outcomes,
    } = batch;
    let outcomes = match outcomes {
        Ok(outcomes) => outcomes,
        Err(error) => vec![Err(error); messages.len()],
    };
    // One dispatch for the whole batch: each client's writer is woken once, not per ack.
    let mut dispatch = Dispatch::default();
    for (msg, outcome) in messages.iter().zip(outcomes) {
        if let Ok(StreamOutcome::Appended(appended)) = &outcome {
            // A counter stream republishes what it stored: the counter's value.
            let counted = counted_message(msg, appended);
            transforms.republish(
                &shared.router,
                &mut dispatch,
                stream,
                counted.as_ref().unwrap_or(msg),
                now_nanos,
                appended.uncounted(),
            );
        }
        let Some(reply) = &msg.reply else { continue };
        let response = match outcome {
            Ok(StreamOutcome::Appended(appended)) => PubAckResponse::success(PubAck {
                stream: stream.to_owned(),
                seq: appended.seq(),
                domain: String::new(),
                duplicate: matches!(appended, AppendOutcome::Duplicate { .. }),
                val: match &appended {
                    AppendOutcome::Counted { val, .. } => val.clone(),
                    _ => String::new(),
                },
            }),
            Ok(other) => {
                tracing::error!(stream, "append answered with {other:?}");
                continue;
            }
            Err(error) => PubAckResponse::failure(stream, error),
        };
        let ack = Message::new(reply.clone(), Bytes::from(response.to_json()));
        let matches = shared.router.matches(&ack.subject);
        dispatch.route(&shared.router, &matches, &ack, None);
    }
    dispatch.wake_all(&shared.stats);
}

/// What a counter stream stored for `msg` (`Counted`): its headers and the value body.
fn counted_message(msg: &Message, outcome: &AppendOutcome) -> Option<Message> {
    let AppendOutcome::Counted { val, headers, .. } = outcome else {
        return None;
    };
    let stored = Message::new(msg.subject.clone(), value_body(val));
    Some(stored.with_headers(Some(headers.clone())))
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
