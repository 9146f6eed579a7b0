//! One origin's copy task: read the origin from where this stream's replicated position
//! says, propose what was read as `Sourced` commands (one Raft entry per batch), republish
//! what was stored, report progress, and when caught up poll the origin again after a pause
//! that grows while nothing arrives (`IDLE_POLL_MIN` to `IDLE_POLL_MAX`).
//!
//! The chain rule (`jscore::sourcing`): each command names the position it continues; a
//! refused copy (this stream's discard-new limits) breaks the chain, the task reads the
//! position again and retries after `RETRY_PAUSE`, as nats-server retries a source.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::durable;
use super::durable_consumer::DurableConsumer;
use super::origin::{OriginMsg, OriginReader, ReadError};
use crate::jetstream::republish::StreamTransforms;
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::stream_config::{RetentionPolicy, StreamConsumerSource, StreamSource};
use crate::jsapi::stream_source::{source_header_value, sourced_headers};
use crate::jsapi::time::Timestamp;
use crate::jsapi::ApiError;
use crate::jscore::group::{StreamCommand, StreamOutcome};
use crate::jscore::sourcing::{SourceKind, SourcedMessage};
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::ServerShared;
use crate::subject::pattern::is_subset_match;
use crate::subject::transform::SubjectTransform;

/// Most origin messages read before they are proposed as one entry.
const MAX_BATCH: usize = 256;
/// First pause once the origin has nothing new.
const IDLE_POLL_MIN: Duration = Duration::from_millis(5);
/// Longest pause between polls of an idle origin.
const IDLE_POLL_MAX: Duration = Duration::from_millis(250);
/// Pause after an error (origin unreachable, copy refused).
pub(super) const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// What to copy from one origin and how.
#[derive(Debug, Clone)]
pub struct OriginPlan {
    /// The key of the replicated position and of the progress (`STREAM.INFO`).
    pub(super) key: String,
    pub(super) origin: String,
    pub(super) kind: SourceKind,
    pub(super) start_seq: u64,
    pub(super) start_time: Option<Timestamp>,
    /// The subject the origin reads filter on.
    request_filter: String,
    /// The subjects a consumer on the origin filters on (empty: all).
    pub(super) consumer_filters: Vec<String>,
    /// The durable consumer the config names (2.14); `None`: read through the API, or
    /// through a consumer of our own if the origin's retention needs one (`durable.rs`).
    pub(super) consumer: Option<StreamConsumerSource>,
    /// Transforms in order (a source pattern and its transform, `None` keeps the subject);
    /// empty: every message read, subject kept.
    transforms: Vec<(String, Option<SubjectTransform>)>,
}

impl OriginPlan {
    pub fn mirror(config: &StreamSource) -> Self {
        Self::new(config, config.name.clone(), SourceKind::Mirror)
    }

    pub fn source(config: &StreamSource) -> Self {
        Self::new(config, config.internal_name(), SourceKind::Source)
    }

    fn new(config: &StreamSource, key: String, kind: SourceKind) -> Self {
        let transforms: Vec<(String, Option<SubjectTransform>)> = config
            .subject_transforms
            .iter()
            .map(|t| {
                let src = if t.src.is_empty() { ">" } else { &t.src };
                let transform = (!t.dest.is_empty())
                    .then(|| SubjectTransform::new(src, &t.dest).ok())
                    .flatten();
                (src.to_owned(), transform)
            })
            .collect();
        let request_filter = match transforms.as_slice() {
            [(only, _)] => only.clone(),
            [] if !config.filter_subject.is_empty() => config.filter_subject.clone(),
            _ => ">".to_owned(),
        };
        let consumer_filters = if config.subject_transforms.is_empty() {
            Some(config.filter_subject.clone())
                .filter(|f| !f.is_empty() && f != ">")
                .into_iter()
                .collect()
        } else if transforms.iter().any(|(src, _)| src == ">") {
            Vec::new()
        } else {
            transforms.iter().map(|(src, _)| src.clone()).collect()
        };
        Self {
            key,
            origin: config.name.clone(),
            kind,
            start_seq: config.opt_start_seq,
            start_time: config.opt_start_time,
            request_filter,
            consumer_filters,
            consumer: config.consumer.clone(),
            transforms,
        }
    }

    /// The subject an origin message is stored under, `None` if it is not copied.
    pub(super) fn stored_subject(&self, subject: &str) -> Option<String> {
        if self.transforms.is_empty() {
            return Some(subject.to_owned());
        }
        self.transforms
            .iter()
            .find(|(src, _)| src == ">" || is_subset_match(subject, src))
            .map(|(_, transform)| match transform {
                Some(transform) => transform.apply_or_keep(subject),
                None => subject.to_owned(),
            })
    }

    pub(super) fn command(
        &self,
        msg: OriginMsg,
        subject: String,
        expected_position: u64,
    ) -> SourcedMessage {
        let (headers, ts_nanos) = match self.kind {
            SourceKind::Mirror => (msg.headers, msg.ts_nanos),
            SourceKind::Source => {
                let value = source_header_value(&self.key, msg.seq);
                let block = sourced_headers(msg.headers.as_deref(), &value);
                (Some(Bytes::from(block)), crate::jetstream::now_nanos())
            }
        };
        SourcedMessage {
            source: self.key.clone(),
            kind: self.kind,
            origin_seq: msg.seq,
            expected_position,
            subject,
            headers,
            payload: msg.payload,
            ts_nanos,
        }
    }
}

/// What one round of reading found.
struct Round {
    commands: Vec<SourcedMessage>,
    /// Where the next round reads from.
    next: u64,
    caught_up: bool,
    error: Option<ApiError>,
    contacted: bool,
}

pub async fn run(
    shared: Arc<ServerShared>,
    stream: Arc<StreamHandle>,
    plan: OriginPlan,
    stop: CancellationToken,
) {
    let mut reader = OriginReader::new(shared.clone(), &plan.origin);
    // How to read: through a durable consumer when the config names one, or when the
    // origin's retention would lose what an API read leaves on it (nats-server 2.14 sources
    // a work-queue or interest origin through a durable consumer of its own).
    let consumer = loop {
        if let Some(consumer) = &plan.consumer {
            break Some(DurableConsumer::named(consumer));
        }
        match reader.retention().await {
            Ok(RetentionPolicy::Limits) => break None,
            Ok(_) => break Some(DurableConsumer::managed(stream.name(), &plan)),
            Err(error) => {
                stream.sources().update(&plan.key, |progress| {
                    progress.error = Some(error.to_api_error());
                });
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                }
            }
        }
    };
    match consumer {
        Some(consumer) => durable::run(shared, stream, plan, consumer, reader, stop).await,
        None => read_loop(shared, stream, plan, reader, stop).await,
    }
}

/// Copies by reading the origin through the API, from the replicated position on.
async fn read_loop(
    shared: Arc<ServerShared>,
    stream: Arc<StreamHandle>,
    plan: OriginPlan,
    mut reader: OriginReader,
    stop: CancellationToken,
) {
    // Where the last round stopped reading: past origin messages that were not copied
    // (filtered out) but moved no position. Forgotten when a copy fails.
    let mut cursor: Option<u64> = None;
    let mut idle = IDLE_POLL_MIN;
    while !stop.is_cancelled() {
        let position = stream
            .view()
            .read(|group| group.source_positions().get(&plan.key));
        let round = tokio::select! {
            _ = stop.cancelled() => return,
            round = read_round(&mut reader, &plan, position, cursor) => round,
        };
        cursor = Some(round.next);
        let mut error = round.error;
        let copied = round.commands.len();
        if copied > 0 {
            match propose(&shared, &stream, round.commands).await {
                Ok(Chain::Intact) => {}
                // Another leader's copies got there first: read on from the position.
                Ok(Chain::Broken) => cursor = None,
                Err(failed) => {
                    error = Some(failed);
                    cursor = None;
                }
            }
        }
        let lag = if round.caught_up && error.is_none() {
            Some(0)
        } else if round.contacted {
            let copied_to = stream
                .view()
                .read(|group| group.source_positions().get(&plan.key));
            reader
                .last_seq()
                .await
                .ok()
                .map(|last| last.saturating_sub(copied_to))
        } else {
            None
        };
        stream.sources().update(&plan.key, |progress| {
            if round.contacted {
                progress.last_contact = Some(Instant::now());
            }
            if let Some(lag) = lag {
                progress.lag = lag;
            }
            progress.error = error.clone();
        });
        let pause = if error.is_some() {
            idle = IDLE_POLL_MIN;
            RETRY_PAUSE
        } else if copied > 0 || !round.caught_up {
            idle = IDLE_POLL_MIN;
            Duration::ZERO
        } else {
            let pause = idle;
            idle = (idle * 2).min(IDLE_POLL_MAX);
            pause
        };
        if !pause.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// Reads up to `MAX_BATCH` copies from the origin, continuing from `position`.
async fn read_round(
    reader: &mut OriginReader,
    plan: &OriginPlan,
    position: u64,
    cursor: Option<u64>,
) -> Round {
    let mut round = Round {
        commands: Vec::new(),
        next: 0,
        caught_up: false,
        error: None,
        contacted: false,
    };
    let start = match cursor {
        Some(cursor) if cursor > position => Ok(Some(cursor)),
        _ => start_of(reader, plan, position).await,
    };
    let mut next = match start {
        Ok(Some(next)) => next,
        Ok(None) => {
            round.contacted = true;
            round.caught_up = true;
            return round;
        }
        Err(error) => {
            round.error = Some(error.to_api_error());
            return round;
        }
    };
    let mut expected = position;
    while round.commands.len() < MAX_BATCH {
        match reader.next(next, &plan.request_filter).await {
            Ok(Some(msg)) => {
                round.contacted = true;
                next = msg.seq + 1;
                if let Some(subject) = plan.stored_subject(&msg.subject) {
                    let origin_seq = msg.seq;
                    round.commands.push(plan.command(msg, subject, expected));
                    expected = origin_seq;
                }
            }
            Ok(None) => {
                round.contacted = true;
                round.caught_up = true;
                break;
            }
            Err(error) => {
                round.error = Some(error.to_api_error());
                break;
            }
        }
    }
    round.next = next;
    round
}

/// Where reading starts with nothing read yet this leadership: after the position, or for
/// a fresh copy at `opt_start_seq`, at the first message from `opt_start_time` (`None`:
/// nothing stored at or after it yet), or at the beginning.
async fn start_of(
    reader: &mut OriginReader,
    plan: &OriginPlan,
    position: u64,
) -> Result<Option<u64>, ReadError> {
    if position > 0 {
        return Ok(Some(position + 1));
    }
    if plan.start_seq > 0 {
        return Ok(Some(plan.start_seq));
    }
    match plan.start_time {
        Some(time) => Ok(reader
            .first_at(time, &plan.request_filter)
            .await?
            .map(|msg| msg.seq)),
        None => Ok(Some(1)),
    }
}

/// Whether every copy of a batch continued the chain.
pub(super) enum Chain {
    Intact,
    Broken,
}

/// Proposes the copies as one entry and republishes what was stored; an error when a copy
/// was refused or the proposal failed (the chain is then read again from the position).
pub(super) async fn propose(
    shared: &ServerShared,
    stream: &StreamHandle,
    commands: Vec<SourcedMessage>,
) -> Result<Chain, ApiError> {
    let transforms = StreamTransforms::of(stream);
    let stored: Vec<(Message, i64)> = commands
        .iter()
        .map(|c| {
            let msg =
                Message::new(c.subject.clone(), c.payload.clone()).with_headers(c.headers.clone());
            (msg, c.ts_nanos)
        })
        .collect();
    let outcomes = stream
        .propose(commands.into_iter().map(StreamCommand::Sourced).collect())
        .await?;
    let mut dispatch = Dispatch::default();
    let mut result = Ok(Chain::Intact);
    for ((msg, ts_nanos), outcome) in stored.iter().zip(outcomes) {
        match outcome {
            Ok(StreamOutcome::Appended(appended)) => transforms.republish(
                &shared.router,
                &mut dispatch,
                stream.name(),
                msg,
                *ts_nanos,
                &appended,
            ),
            Ok(_) => {
                if result.is_ok() {
                    result = Ok(Chain::Broken);
                }
            }
            Err(error) => {
                if result.is_ok() {
                    result = Err(error);
                }
            }
        }
    }
    dispatch.wake_all(&shared.stats);
    result
}
