//! `StreamGroup`: one stream and its consumers, and the single `apply` a stream's Raft
//! state machine calls for every committed entry. It ties the pieces together: consumers
//! learn about removed messages, interest streams skip messages nobody wants, and after
//! acks and deliveries the retention step removes what work-queue and interest streams no
//! longer need.
//!
//! One per stream on every replica; entirely replicated.

use std::collections::BTreeMap;

use crate::jsapi::consumer_config::ConsumerConfig;
use crate::jsapi::error::{ApiError, ErrorKind};
use crate::jsapi::stream_config::{RetentionPolicy, StreamConfig};
use crate::jscore::consumer::{AckOutcome, ConsumerCommand, ConsumerOutcome, ConsumerState};
use crate::jscore::retention;
use crate::jscore::sourcing::{SourceKind, SourcePositions, SourcedMessage};
use crate::jscore::stream::{
    AppendOutcome, AppendRequest, CounterBase, MetaSpill, Produced, PurgeRequest, ScheduleBody,
    StoredMsg, StreamState,
};

/// The entries of a stream group's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamCommand {
    Append(AppendRequest),
    Purge(PurgeRequest),
    DeleteMsg {
        seq: u64,
    },
    Expire {
        now_nanos: i64,
    },
    UpdateStream {
        config: StreamConfig,
        now_nanos: i64,
    },
    /// Create or update a consumer (the API layer has validated the config).
    UpsertConsumer {
        name: String,
        config: ConsumerConfig,
        /// When the API accepted the create (kept for ConsumerInfo `created`; an update
        /// keeps the original).
        created_nanos: i64,
    },
    DeleteConsumer {
        name: String,
    },
    Consumer {
        name: String,
        command: ConsumerCommand,
    },
    /// A message copied from a mirror's origin or a source (`jscore::sourcing`).
    Sourced(SourcedMessage),
    /// A committed atomic batch (ADR-50): every member stored, in order, or none.
    AppendBatch(Vec<AppendRequest>),
}

/// What applying a `StreamCommand` did.
/// Serde (postcard) encodes the variant index: the variant order is a wire format, append only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum StreamOutcome {
    Appended(AppendOutcome),
    Purged {
        count: u64,
    },
    Removed {
        seqs: Vec<u64>,
    },
    ConsumerUpserted {
        created: bool,
    },
    ConsumerDeleted,
    /// A consumer command's outcome, plus what retention removed because of it.
    Consumer {
        outcome: ConsumerOutcome,
        removed: Vec<u64>,
    },
    /// A `Sourced` copy that did not continue its origin's chain (already applied, or
    /// proposed from a position no longer current): nothing changed. `position` is the
    /// origin's replicated position.
    SourceSkipped {
        position: u64,
    },
    /// An `Expire` that stored subject delete markers (ADR-48): what it removed, and the
    /// markers' sequences. An `Expire` that stored none answers `Removed`.
    Expired {
        removed: Vec<u64>,
        markers: Vec<u64>,
    },
    /// An `AppendBatch` stored whole: each member's outcome, in order.
    BatchAppended(Vec<AppendOutcome>),
    /// An `Expire` that fired schedules (ADR-51, `jscore::stream::fire`): what it removed
    /// (expired messages, the fired schedules, what the produced messages' limits took),
    /// its delete markers, and the produced messages with their bodies. An `Expire` that
    /// fired none answers `Removed` or `Expired` as before.
    Scheduled {
        removed: Vec<u64>,
        markers: Vec<u64>,
        produced: Vec<Produced>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamGroup {
    stream: StreamState,
    /// Boxed: a `ConsumerState` is ~700 bytes, and a map's node holds room for 11 values, so
    /// unboxed a stream's first consumer cost an 8 KiB node, kept after its delete (heaptrack
    /// after reading 1000 R3 streams through a consumer each: 7.75 MB per node).
    consumers: BTreeMap<String, Box<ConsumerState>>,
    /// How far each mirror origin or source has been copied.
    sources: SourcePositions,
}

impl StreamGroup {
    pub fn new(config: StreamConfig) -> Self {
        Self {
            stream: StreamState::new(config),
            consumers: BTreeMap::new(),
            sources: SourcePositions::default(),
        }
    }

    /// Packs every metadata chunk in memory, the open tail too: a layout change only,
    /// nothing observable (see [`StreamState::seal_metadata`]).
    pub fn seal_metadata(&mut self) {
        self.stream.seal_metadata();
    }

    pub fn stream(&self) -> &StreamState {
        &self.stream
    }

    /// Keeps the stream's sealed metadata chunks beyond the few touched last in `file`
    /// instead of memory (ADR 0033; `StreamState::spill_metadata_to`).
    pub fn spill_metadata_to(&mut self, file: std::sync::Arc<dyn MetaSpill>) {
        self.stream.spill_metadata_to(file);
    }

    pub fn consumer(&self, name: &str) -> Option<&ConsumerState> {
        self.consumers.get(name).map(Box::as_ref)
    }

    pub fn consumer_names(&self) -> impl Iterator<Item = &str> {
        self.consumers.keys().map(String::as_str)
    }

    /// The consumers by name, in name order.
    pub fn consumers(&self) -> impl Iterator<Item = (&str, &ConsumerState)> {
        self.consumers
            .iter()
            .map(|(name, consumer)| (name.as_str(), consumer.as_ref()))
    }

    /// Reassembles a group from its parts (restoring persisted state; see
    /// `StreamState::restore` and `ConsumerState::import`).
    pub fn from_parts(stream: StreamState, consumers: BTreeMap<String, ConsumerState>) -> Self {
        Self {
            stream,
            consumers: consumers
                .into_iter()
                .map(|(name, consumer)| (name, Box::new(consumer)))
                .collect(),
            sources: SourcePositions::default(),
        }
    }

    /// The group with its restored origin positions.
    pub fn with_source_positions(mut self, sources: SourcePositions) -> Self {
        self.sources = sources;
        self
    }

    pub fn source_positions(&self) -> &SourcePositions {
        &self.sources
    }

    pub fn apply(&mut self, command: StreamCommand) -> Result<StreamOutcome, ApiError> {
        self.apply_counted(command, None)
    }

    /// On a counter stream, the message whose body `command` (a publish or a copy from a
    /// source) adds to: the caller reads it (the state keeps no bodies) and passes it to
    /// `apply_counted`. `None` for other commands and streams, or nothing to add to.
    pub fn counter_base_seq(&self, command: &StreamCommand) -> Option<u64> {
        let subject = match command {
            StreamCommand::Append(request) => &request.subject,
            StreamCommand::Sourced(message) => &message.subject,
            _ => return None,
        };
        self.stream.counter_base_seq(subject)
    }

    /// `apply`, with the body of the message `counter_base_seq` named, if any.
    pub fn apply_counted(
        &mut self,
        command: StreamCommand,
        base: Option<&CounterBase>,
    ) -> Result<StreamOutcome, ApiError> {
        match command {
            StreamCommand::Append(request) => self.append(request, base),
            StreamCommand::Purge(request) => {
                let purged = self.stream.purge(&request)?;
                for consumer in self.consumers.values_mut() {
                    consumer.on_stream_purged(&self.stream);
                }
                Ok(StreamOutcome::Purged {
                    count: purged.count,
                })
            }
            StreamCommand::DeleteMsg { seq } => {
                self.stream.delete_msg(seq)?;
                self.after_removal(vec![seq])
            }
            StreamCommand::Expire { now_nanos } => {
                let expired = self.stream.expire(now_nanos);
                if expired.markers.is_empty() {
                    return self.after_removal(expired.removed);
                }
                if !expired.removed.is_empty() {
                    self.notify_removed();
                }
                Ok(StreamOutcome::Expired {
                    removed: expired.removed,
                    markers: expired.markers,
                })
            }
            StreamCommand::UpdateStream { config, now_nanos } => {
                let removed = self.stream.update_config(config, now_nanos);
                self.after_removal(removed)
            }
            StreamCommand::UpsertConsumer {
                name,
                config,
                created_nanos,
            } => self.upsert_consumer(name, config, created_nanos),
            StreamCommand::DeleteConsumer { name } => self.delete_consumer(&name),
            StreamCommand::Consumer { name, command } => self.consumer_command(&name, command),
            StreamCommand::Sourced(message) => self.apply_sourced(message, base),
            StreamCommand::AppendBatch(members) => {
                let applied = self.apply_batch_with(members, |group, member| {
                    Ok::<_, std::convert::Infallible>(group.append(member, None))
                });
                match applied {
                    Ok(outcome) => outcome,
                    Err(never) => match never {},
                }
            }
        }
    }

    /// Applies an atomic batch (ADR-50): the whole batch is checked first, so a refused
    /// batch changes nothing; then each member is applied by `apply_member` (here a plain
    /// append; the stream machine also stages each member's writes). `E` is the caller's
    /// own failure (the machine's storage errors), passed through untouched.
    pub fn apply_batch_with<E>(
        &mut self,
        members: Vec<AppendRequest>,
        mut apply_member: impl FnMut(
            &mut StreamGroup,
            AppendRequest,
        ) -> Result<Result<StreamOutcome, ApiError>, E>,
    ) -> Result<Result<StreamOutcome, ApiError>, E> {
        if let Err(refusal) = self.check_batch(&members) {
            return Ok(Err(refusal));
        }
        let mut outcomes = Vec::with_capacity(members.len());
        for member in members {
            match apply_member(self, member)? {
                Ok(StreamOutcome::Appended(outcome)) => outcomes.push(outcome),
                // The check makes these unreachable; were one reached, every replica would
                // reach it alike (the apply is deterministic), so the replicas still agree.
                Ok(_) => return Ok(Err(ApiError::new(ErrorKind::StreamInvalid))),
                Err(refusal) => return Ok(Err(refusal)),
            }
        }
        Ok(Ok(StreamOutcome::BatchAppended(outcomes)))
    }

    /// The schedules an `Expire` at `now_nanos` fires (`StreamState::due_schedules`): the
    /// caller reads their bodies (the state keeps none) for
    /// [`expire_and_fire`](Self::expire_and_fire).
    pub fn due_schedules(&self, now_nanos: i64) -> Vec<u64> {
        self.stream.due_schedules(now_nanos)
    }

    /// See [`StreamState::schedule_source_seq`].
    pub fn schedule_source_seq(&self, headers: &[u8]) -> Option<u64> {
        self.stream.schedule_source_seq(headers)
    }

    /// `Expire { now_nanos }`, firing the due schedules whose bodies are `schedules`.
    pub fn expire_and_fire(
        &mut self,
        now_nanos: i64,
        schedules: Vec<ScheduleBody>,
    ) -> Result<StreamOutcome, ApiError> {
        let expired = self.stream.expire(now_nanos);
        let consumers = &self.consumers;
        let has_interest = |subject: &str| {
            consumers
                .values()
                .any(|consumer| consumer.policy().filter.matches(subject))
        };
        let fired = self
            .stream
            .fire_schedules(now_nanos, schedules, &has_interest);
        let mut removed = expired.removed;
        removed.extend(fired.removed);
        removed.sort_unstable();
        removed.dedup();
        if !removed.is_empty() {
            self.notify_removed();
        }
        Ok(
            match (fired.produced.is_empty(), expired.markers.is_empty()) {
                (true, true) => StreamOutcome::Removed { seqs: removed },
                (true, false) => StreamOutcome::Expired {
                    removed,
                    markers: expired.markers,
                },
                (false, _) => StreamOutcome::Scheduled {
                    removed,
                    markers: expired.markers,
                    produced: fired.produced,
                },
            },
        )
    }

    /// Whether an atomic batch would be stored whole (`StreamState::check_batch`, with this
    /// group's consumers' interest).
    fn check_batch(&self, members: &[AppendRequest]) -> Result<(), ApiError> {
        let consumers = &self.consumers;
        let has_interest = |subject: &str| {
            consumers
                .values()
                .any(|consumer| consumer.policy().filter.matches(subject))
        };
        Ok(self.stream.check_batch(members, &has_interest)?)
    }

    /// Copies one origin message if it continues its origin's chain (`jscore::sourcing`).
    fn apply_sourced(
        &mut self,
        message: SourcedMessage,
        base: Option<&CounterBase>,
    ) -> Result<StreamOutcome, ApiError> {
        if !self.sources.accepts(&message) {
            return Ok(StreamOutcome::SourceSkipped {
                position: self.sources.get(&message.source),
            });
        }
        let stored = StoredMsg {
            subject: message.subject,
            headers: message.headers,
            payload: message.payload,
            ts_nanos: message.ts_nanos,
        };
        let outcome = match message.kind {
            SourceKind::Mirror => self.stream.store_mirrored(message.origin_seq, stored),
            SourceKind::Source => self.stream.store_sourced_counted(stored, base),
        }
        .map_err(|error| error.to_api_error())?;
        self.sources.set(&message.source, message.origin_seq);
        if outcome
            .stored()
            .is_some_and(|(_, removed)| !removed.is_empty())
        {
            self.notify_removed();
        }
        Ok(StreamOutcome::Appended(outcome))
    }

    fn append(
        &mut self,
        request: AppendRequest,
        base: Option<&CounterBase>,
    ) -> Result<StreamOutcome, ApiError> {
        let consumers = &self.consumers;
        let has_interest = |subject: &str| {
            consumers
                .values()
                .any(|consumer| consumer.policy().filter.matches(subject))
        };
        let outcome = self.stream.append_counted(request, &has_interest, base)?;
        if let Some((_, removed)) = outcome.stored() {
            if !removed.is_empty() {
                self.notify_removed();
            }
        }
        Ok(StreamOutcome::Appended(outcome))
    }

    fn after_removal(&mut self, removed: Vec<u64>) -> Result<StreamOutcome, ApiError> {
        if !removed.is_empty() {
            self.notify_removed();
        }
        Ok(StreamOutcome::Removed { seqs: removed })
    }

    fn notify_removed(&mut self) {
        for consumer in self.consumers.values_mut() {
            consumer.on_messages_removed(&self.stream);
        }
    }

    fn upsert_consumer(
        &mut self,
        name: String,
        config: ConsumerConfig,
        created_nanos: i64,
    ) -> Result<StreamOutcome, ApiError> {
        if self.stream.limits().retention == RetentionPolicy::WorkQueue {
            let others = self
                .consumers
                .iter()
                .filter(|(other, _)| **other != name)
                .map(|(_, consumer)| consumer.config());
            retention::check_work_queue_consumer(others, &config)?;
        }
        match self.consumers.get_mut(&name) {
            Some(existing) => {
                existing.update_config(config);
                Ok(StreamOutcome::ConsumerUpserted { created: false })
            }
            None => {
                let mut consumer = ConsumerState::new(config, &self.stream);
                consumer.set_created_nanos(created_nanos);
                self.consumers.insert(name, Box::new(consumer));
                Ok(StreamOutcome::ConsumerUpserted { created: true })
            }
        }
    }

    fn delete_consumer(&mut self, name: &str) -> Result<StreamOutcome, ApiError> {
        if self.consumers.remove(name).is_none() {
            return Err(ApiError::new(ErrorKind::ConsumerNotFound));
        }
        if self.stream.limits().retention == RetentionPolicy::Interest {
            let unneeded = retention::unneeded_messages(
                &self.stream,
                self.consumers.values().map(Box::as_ref),
            );
            self.stream.remove_acked(unneeded);
            self.notify_removed();
        }
        Ok(StreamOutcome::ConsumerDeleted)
    }

    fn consumer_command(
        &mut self,
        name: &str,
        command: ConsumerCommand,
    ) -> Result<StreamOutcome, ApiError> {
        let consumer = self
            .consumers
            .get_mut(name)
            .ok_or_else(|| ApiError::new(ErrorKind::ConsumerNotFound))?;
        let takes_acks = consumer.policy().takes_acks();
        // A reset releases what it skips over (nats-server acks it); which messages that is
        // is known only before the reset moves the floor.
        let released = match &command {
            ConsumerCommand::Reset { seq } => consumer.released_by_reset(&self.stream, *seq),
            _ => Vec::new(),
        };
        let outcome = consumer.apply(&self.stream, command);
        // Retention step: acknowledged messages, messages delivered to an ack-none consumer
        // (delivery is its acknowledgement), and messages a reset skipped may now be
        // removable.
        let candidates: Vec<u64> = match &outcome {
            ConsumerOutcome::Ack(AckOutcome::Acked { stream_seqs }) => stream_seqs.clone(),
            ConsumerOutcome::Delivered(deliveries) if !takes_acks => {
                deliveries.iter().map(|d| d.stream_seq).collect()
            }
            ConsumerOutcome::Reset { .. } => released,
            _ => Vec::new(),
        };
        let removable = retention::removable(
            self.stream.limits().retention,
            &self.stream,
            self.consumers.values().map(Box::as_ref),
            &candidates,
        );
        let removed = self.stream.remove_acked(removable);
        if !removed.is_empty() {
            self.notify_removed();
        }
        Ok(StreamOutcome::Consumer { outcome, removed })
    }
}
