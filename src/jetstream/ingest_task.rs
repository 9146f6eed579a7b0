//! A stream's ingest task: it takes what the ingest subscriber (`publish.rs`) queued,
//! gathers a burst into one proposal of raw appends (atomic batch members are staged instead,
//! `atomic_publish.rs`), keeps up to `MAX_IN_FLIGHT` proposals on their way, and, as each is
//! applied, republishes what was stored and answers each publish with its PubAck, in
//! proposal order. It settles what it answered in the stream's `IngestProgress` (ADR 0027).

use std::sync::Arc;

use bytes::Bytes;
use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use tokio::sync::mpsc;

use super::atomic_publish::{self, AtomicBatches, AtomicResult, Taken};
use super::publish::Backlog;
use super::republish::StreamTransforms;
use super::stream::StreamHandle;
use super::stream_machine::entry;
use crate::consensus::gather::Bursts;
use crate::jsapi::{ApiError, PubAck, PubAckResponse};
use crate::jscore::atomic_batch::batch_id;
use crate::jscore::group::StreamOutcome;
use crate::jscore::stream::{stored_schedule_headers, value_body, AppendOutcome};
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::ServerShared;

/// Most messages in one Raft entry.
const MAX_BATCH: usize = 1024;
/// Most entries being committed at once per stream.
const MAX_IN_FLIGHT: usize = 4;

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

pub(super) async fn run(
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
