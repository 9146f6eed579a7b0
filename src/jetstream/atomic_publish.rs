//! Atomic batch publish on a stream's leader (ADR-50, ADR 0021): the stream's ingest task
//! (`publish.rs`) hands each batch member here; members are staged in leader memory
//! (`jscore::atomic_batch::BatchStager`, bounded) until the commit, and the committed batch
//! is proposed as ONE `AppendBatch` command (one Raft entry, `STREAM_APPEND_BATCH_V1`), so
//! every replica applies all of it or none. Members get an empty reply, the commit the
//! PubAck with `batch` and `count`; refusals get nats-server's PubAck errors.
//!
//! Staged batches are not replicated: a leader that stops leading (or dies) loses them with
//! its ingest task, and the publisher's next member or commit reaches the new leader, which
//! answers 10176 (batch incomplete). Nothing of such a batch was proposed, so nothing of it
//! is stored.
//!
//! One `AtomicBatches` per stream ingest task; owned by it.

use bytes::Bytes;

use super::republish::StreamTransforms;
use super::stream::StreamHandle;
use super::stream_machine::entry;
use crate::jsapi::{batch_pub_ack_json, ApiError, PubAckResponse};
use crate::jscore::atomic_batch::{
    parse_member, BatchError, BatchLimits, BatchStager, Commit, CommittedBatch, StageOutcome,
};
use crate::jscore::group::StreamOutcome;
use crate::jscore::stream::{
    header_rules, refuse_unsupported_member_headers, stored_schedule_headers, AppendRequest,
};
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::ServerShared;

/// The batches being staged for one stream.
#[derive(Debug)]
pub struct AtomicBatches {
    stager: BatchStager<Message>,
}

/// What the ingest task does with a member.
#[derive(Debug)]
pub enum Taken {
    /// Answer at once (`None`: the member asked for no reply).
    Answer(Option<Message>),
    /// Propose the committed batch; the commit's reply waits for the outcome.
    Propose(ProposedBatch),
}

/// A committed batch on its way to the stream group.
#[derive(Debug)]
pub struct ProposedBatch {
    id: String,
    members: Vec<Message>,
    /// The reply subject of the member that committed (an `eob` member is not stored).
    reply: Option<Bytes>,
}

/// A proposed batch with its outcome.
pub struct AtomicResult {
    batch: ProposedBatch,
    now_nanos: i64,
    transforms: StreamTransforms,
    outcome: Result<StreamOutcome, ApiError>,
}

impl Default for AtomicBatches {
    fn default() -> Self {
        Self {
            stager: BatchStager::new(BatchLimits::default()),
        }
    }
}

impl AtomicBatches {
    /// Takes one member (a message with `Nats-Batch-Id` on a stream with `allow_atomic`).
    pub fn take(&mut self, stream: &StreamHandle, msg: Message, now_nanos: i64) -> Taken {
        let block = msg.headers.clone().unwrap_or_default();
        let reply = msg.reply.clone();
        let member = match parse_member(&block) {
            Ok(member) => member,
            Err(error) => return Taken::Answer(refusal(stream.name(), reply, error)),
        };
        // The stream's own header checks (TTLs, counters, schedules); the rest of a
        // member's checks run on the whole batch in the apply (`check_batch`).
        let check = match member.commit {
            Commit::No | Commit::Including => {
                let subject = String::from_utf8_lossy(&msg.subject);
                stream.view().read(|group| {
                    let rules = header_rules(group.stream().config());
                    refuse_unsupported_member_headers(&block, &subject, stream.name(), rules)
                })
            }
            .map_err(BatchError::from),
            Commit::EndOfBatch | Commit::Invalid => Ok(()),
        };
        let size = msg.size();
        match self.stager.stage(&member, msg, size, check, now_nanos) {
            StageOutcome::Staged => Taken::Answer(reply.map(|reply| Message::new(reply, ""))),
            StageOutcome::Refused(error) => Taken::Answer(refusal(stream.name(), reply, error)),
            StageOutcome::Committed(CommittedBatch { id, members }) => {
                Taken::Propose(ProposedBatch { id, members, reply })
            }
        }
    }

    /// Drops the batches idle for nats-server's timeout (10 s), without a reply as
    /// nats-server abandons them.
    pub fn abandon_idle(&mut self, stream: &str, now_nanos: i64) {
        for id in self.stager.abandon_idle(now_nanos) {
            tracing::debug!(stream, batch = %id, "atomic batch abandoned (idle)");
        }
    }

    /// When `abandon_idle` has something to do, in `now_nanos`' clock.
    pub fn next_idle_deadline(&self) -> Option<i64> {
        self.stager.next_idle_deadline()
    }
}

/// The PubAck error for a refused member (a plain JSON reply, as nats-server sends it).
fn refusal(stream: &str, reply: Option<Bytes>, error: BatchError) -> Option<Message> {
    let body = PubAckResponse::failure(stream, error.to_api_error()).to_json();
    reply.map(|reply| Message::new(reply, Bytes::from(body)))
}

/// Proposes the batch as one `AppendBatch` command, with the stored subjects the stream's
/// transform picks (as for lone publishes).
pub async fn propose(stream: std::sync::Arc<StreamHandle>, batch: ProposedBatch) -> AtomicResult {
    let now_nanos = super::now_nanos();
    let transforms = StreamTransforms::of(&stream);
    let members: Vec<AppendRequest> = batch
        .members
        .iter()
        .map(|msg| AppendRequest {
            subject: String::from_utf8_lossy(&transforms.stored_subject(&msg.subject)).into_owned(),
            // A schedule is stored with `Nats-Rollup: sub`, as a lone one (ADR 0023).
            headers: match msg.headers.as_deref().and_then(stored_schedule_headers) {
                Some(headers) => Some(Bytes::from(headers)),
                None => msg.headers.clone(),
            },
            payload: msg.payload.clone(),
            now_nanos,
        })
        .collect();
    let command = entry::encode_append_batch(&members);
    let outcome = match stream.propose_encoded(vec![command]).await {
        Ok(mut outcomes) => outcomes
            .pop()
            .unwrap_or_else(|| Err(ApiError::new(crate::jsapi::ErrorKind::ClusterNotAvail))),
        Err(error) => Err(error),
    };
    AtomicResult {
        batch,
        now_nanos,
        transforms,
        outcome,
    }
}

/// Republishes what the batch stored (when the stream republishes) and answers the commit.
pub fn answer(shared: &ServerShared, dispatch: &mut Dispatch, stream: &str, result: AtomicResult) {
    let AtomicResult {
        batch,
        now_nanos,
        transforms,
        outcome,
    } = result;
    let response = match outcome {
        Ok(StreamOutcome::BatchAppended(outcomes)) => {
            for (msg, appended) in batch.members.iter().zip(&outcomes) {
                let mut stored = msg.clone();
                stored.subject = transforms.stored_subject(&msg.subject);
                transforms.republish(
                    &shared.router,
                    dispatch,
                    stream,
                    &stored,
                    now_nanos,
                    appended,
                );
            }
            let last = outcomes.last().map_or(0, |outcome| outcome.seq());
            batch_pub_ack_json(stream, last, &batch.id, outcomes.len())
        }
        Ok(other) => {
            tracing::error!(stream, "atomic batch answered with {other:?}");
            return;
        }
        Err(error) => PubAckResponse::failure(stream, error).to_json(),
    };
    let Some(reply) = batch.reply else { return };
    let ack = Message::new(reply, Bytes::from(response));
    let matches = shared.router.matches(&ack.subject);
    dispatch.route(&shared.router, &matches, &ack, None);
}
