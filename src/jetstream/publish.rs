//! Publishing into a stream: a message on one of the stream's subjects reaches the stream's
//! ingest task (an internal subscription), which batches waiting messages into one Raft
//! entry — so many publishes share one fsync — and, once the entry is committed and
//! applied, answers each publish that had a reply subject with its PubAck.
//!
//! One ingest task per stream group on its leader. Up to `MAX_IN_FLIGHT` entries are
//! proposed at once (pipelining: the next batch is on its way while the previous one is
//! being fsynced); acks go out in proposal order.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::sync::mpsc;

use super::service::JetStream;
use super::stream::StreamHandle;
use super::stream_machine::wire;
use crate::jsapi::{ApiError, PubAck, PubAckResponse};
use crate::jscore::group::GroupOutcome;
use crate::jscore::stream::AppendOutcome;
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::subscription::{InternalSubscriber, Subscription};
use crate::server::ServerShared;

/// Most messages in one Raft entry.
const MAX_BATCH: usize = 1024;
/// Most entries being committed at once per stream.
const MAX_IN_FLIGHT: usize = 4;
/// A batch is closed once no message arrived for this long (see `gather`).
const GATHER_IDLE: Duration = Duration::from_micros(100);
/// Longest a batch gathers messages (see `gather`).
const GATHER_MAX: Duration = Duration::from_millis(2);

/// The internal subscriber on a stream's subjects.
#[derive(Debug)]
struct Ingest {
    queue: mpsc::UnboundedSender<Message>,
}

impl InternalSubscriber for Ingest {
    fn receive(&self, msg: &Message) -> bool {
        self.queue.send(msg.clone()).is_ok()
    }
}

/// Subscribes `subjects` for `stream` and starts its ingest task; returns the subscriptions
/// (unsubscribing all of them ends the task).
pub fn attach(
    js: &Arc<JetStream>,
    stream: &Arc<StreamHandle>,
    subjects: &[String],
) -> Vec<Arc<Subscription>> {
    let (queue, incoming) = mpsc::unbounded_channel();
    let ingest = Arc::new(Ingest { queue });
    let shared = js.shared().clone();
    let subscriptions = subjects
        .iter()
        .map(|subject| {
            shared
                .router
                .subscribe_internal(subject, None, ingest.clone())
        })
        .collect();
    shared
        .tasks
        .spawn(run(shared.clone(), stream.clone(), incoming));
    subscriptions
}

type BatchResult = (
    Vec<Message>,
    Result<Vec<Result<GroupOutcome, ApiError>>, ApiError>,
);

async fn run(
    shared: Arc<ServerShared>,
    stream: Arc<StreamHandle>,
    mut incoming: mpsc::UnboundedReceiver<Message>,
) {
    let mut in_flight: FuturesOrdered<BoxFuture<'static, BatchResult>> = FuturesOrdered::new();
    // Whether the last batch had more than one message (see `gather`).
    let mut bursty = false;
    loop {
        tokio::select! {
            biased;
            Some((messages, outcomes)) = in_flight.next(), if !in_flight.is_empty() => {
                answer(&shared, stream.name(), &messages, outcomes);
            }
            received = incoming.recv(), if in_flight.len() < MAX_IN_FLIGHT => {
                let Some(first) = received else { break };
                let mut batch = vec![first];
                gather(&mut incoming, &mut batch, bursty).await;
                bursty = batch.len() > 1;
                in_flight.push_back(Box::pin(propose_batch(stream.clone(), batch)));
            }
            _ = shared.shutdown.cancelled() => break,
        }
    }
    // Whatever was proposed still gets its answer if it completes.
    while let Some((messages, outcomes)) = in_flight.next().await {
        answer(&shared, stream.name(), &messages, outcomes);
    }
}

/// Takes what is queued behind the first message and, when messages come in bursts (the
/// previous batch had more than one, or more are already queued), keeps taking them while
/// they arrive less than `GATHER_IDLE` apart (at most `GATHER_MAX`). A client's burst of
/// async publishes reaches us over several reads, and openraft appends one entry of a group
/// per log flush: a burst split over two entries waits for two fsyncs (milliseconds each)
/// before its last PubAck, while gathering costs tens of microseconds. A lone publish
/// (sync publishing) is proposed at once.
async fn gather(
    incoming: &mut mpsc::UnboundedReceiver<Message>,
    batch: &mut Vec<Message>,
    bursty: bool,
) {
    let started = Instant::now();
    let mut rounds = 0;
    loop {
        let before = batch.len();
        while batch.len() < MAX_BATCH {
            match incoming.try_recv() {
                Ok(msg) => batch.push(msg),
                Err(_) => break,
            }
        }
        let quiet = batch.len() == before && rounds > 0;
        if quiet || batch.len() >= MAX_BATCH || started.elapsed() >= GATHER_MAX {
            return;
        }
        if rounds == 0 && !bursty && batch.len() == 1 {
            return;
        }
        rounds += 1;
        // A short, precise pause that leaves the cores to the reader and the client
        // (tokio's timers tick in milliseconds; spinning would take a core from them).
        let _ = tokio::task::spawn_blocking(|| std::thread::sleep(GATHER_IDLE)).await;
    }
}

async fn propose_batch(stream: Arc<StreamHandle>, batch: Vec<Message>) -> BatchResult {
    let now = super::now_nanos();
    let commands = batch
        .iter()
        .map(|msg| wire::encode_append(&msg.subject, msg.headers.as_deref(), &msg.payload, now))
        .collect();
    let outcomes = stream.propose_encoded(commands).await;
    (batch, outcomes)
}

/// Sends each publish that asked for one its PubAck (or the error).
fn answer(
    shared: &ServerShared,
    stream: &str,
    messages: &[Message],
    outcomes: Result<Vec<Result<GroupOutcome, ApiError>>, ApiError>,
) {
    let outcomes = match outcomes {
        Ok(outcomes) => outcomes,
        Err(error) => vec![Err(error); messages.len()],
    };
    // One dispatch for the whole batch: each client's writer is woken once, not per ack.
    let mut dispatch = Dispatch::default();
    for (msg, outcome) in messages.iter().zip(outcomes) {
        let Some(reply) = &msg.reply else { continue };
        let response = match outcome {
            Ok(GroupOutcome::Appended(appended)) => PubAckResponse::success(PubAck {
                stream: stream.to_owned(),
                seq: appended.seq(),
                domain: String::new(),
                duplicate: matches!(appended, AppendOutcome::Duplicate { .. }),
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
