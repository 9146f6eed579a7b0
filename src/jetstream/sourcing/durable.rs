//! Copying through a durable consumer on the origin (nats-server 2.14, ADR-60): the origin
//! removes (work-queue) or releases (interest) a message only once this stream has stored
//! it, so nothing sourced from such an origin is lost to a crash or a leader change between
//! the two.
//!
//! The consumer is a push consumer with `ack_policy: flow_control`: it is named by the
//! config (`consumer: {name, deliver_subject}`, made by the user) or, for a work-queue or
//! interest origin named without one, made here (`managed`, `JS_SRC_…` / `JS_MIRROR_…`,
//! with `sourcing` set, the origin's start and filter). This stream's leader subscribes its
//! deliver subject and resets it (`CONSUMER.RESET`, back to its ack floor), so delivery
//! starts over at consumer sequence 1 from the first message not yet acknowledged.
//!
//! Each delivered message is proposed as a `Sourced` command as in the read loop
//! (`copier.rs`): the replicated position decides, so a message delivered twice is stored
//! once. The origin learns what is stored from the answers to its flow-control requests
//! (`Nats-Last-Stream`, `Nats-Last-Consumer`), sent only after the messages before the
//! request are committed here; that answer is its acknowledgement.
//!
//! Gaps: consumer sequences must follow each other. A jump (a message lost on the way, a
//! new origin leader that delivered what never arrived), an idle heartbeat whose
//! `Nats-Last-Consumer` is not the last one received, or silence for `SILENCE` resets the
//! consumer again; what arrives before the restarted delivery (consumer sequence 1) is
//! dropped. A reset by someone else (sequence 1 again) is followed as it comes: forward it
//! skips, backward the position drops what is already stored.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::copier::{propose, Chain, OriginPlan, RETRY_PAUSE};
use super::origin::{OriginMsg, OriginReader, ReadError};
use crate::jetstream::delivery::outbox::{
    sequence_header, LAST_CONSUMER_HEADER, LAST_STREAM_HEADER, STALLED_HEADER,
};
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::consumer_config::{AckPolicy, DeliverPolicy};
use crate::jsapi::stream_config::StreamConsumerSource;
use crate::jsapi::{AckReply, ApiError, ConsumerConfig, ErrorKind};
use crate::jscore::sourcing::{SourceKind, SourcedMessage};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::subscription::InternalSubscriber;
use crate::server::ServerShared;
use crate::wire::headers;

/// The idle heartbeat of the consumers made here (nats-server forces 1 s on `flow_control`
/// consumers).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// Nothing at all from the consumer for this long (three heartbeats): reset it, and if that
/// fails, attach again.
const SILENCE: Duration = Duration::from_secs(3);
/// Most delivered messages proposed as one entry.
const MAX_BATCH: usize = 256;

/// The consumer a durable copy reads.
#[derive(Debug, Clone)]
pub struct DurableConsumer {
    name: String,
    deliver_subject: String,
    /// Made (and updated) here, not by the user.
    managed: bool,
}

impl DurableConsumer {
    /// The consumer a mirror's or source's config names.
    pub fn named(consumer: &StreamConsumerSource) -> Self {
        Self {
            name: consumer.name.clone(),
            deliver_subject: consumer.deliver_subject.clone(),
            managed: false,
        }
    }

    /// The consumer this stream makes on a work-queue or interest origin: named after the
    /// stream and the origin's key, so every leader of the stream finds the same one.
    pub fn managed(stream: &str, plan: &OriginPlan) -> Self {
        Self::managed_for(stream, &plan.key, plan.kind)
    }

    pub fn managed_for(stream: &str, key: &str, kind: SourceKind) -> Self {
        let hash = name_hash(stream, key);
        let prefix = match kind {
            SourceKind::Mirror => "JS_MIRROR",
            SourceKind::Source => "JS_SRC",
        };
        Self {
            name: format!("{prefix}_{hash}"),
            deliver_subject: format!("_JETRAFT_.DLV.{hash}"),
            managed: true,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn config(&self, stream: &str, plan: &OriginPlan) -> ConsumerConfig {
        let (deliver_policy, opt_start_seq, opt_start_time) =
            match (plan.start_seq, plan.start_time) {
                (seq, _) if seq > 0 => (DeliverPolicy::ByStartSequence, seq, None),
                (_, Some(time)) => (DeliverPolicy::ByStartTime, 0, Some(time)),
                _ => (DeliverPolicy::All, 0, None),
            };
        let (filter_subject, filter_subjects) = match plan.consumer_filters.as_slice() {
            [one] => (one.clone(), Vec::new()),
            many => (String::new(), many.to_vec()),
        };
        ConsumerConfig {
            durable_name: self.name.clone(),
            name: self.name.clone(),
            description: format!("stream {stream} copies {} through it", plan.origin),
            deliver_subject: self.deliver_subject.clone(),
            deliver_policy,
            opt_start_seq,
            opt_start_time,
            filter_subject,
            filter_subjects,
            ack_policy: AckPolicy::FlowControl,
            flow_control: true,
            idle_heartbeat: HEARTBEAT.as_nanos() as i64,
            max_deliver: -1,
            sourcing: true,
            ..ConsumerConfig::default()
        }
    }
}

/// 16 hex digits of FNV-1a over the stream and the origin key: stable across versions and
/// nodes (unlike std's hasher), and a valid token in names and subjects.
fn name_hash(stream: &str, key: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in stream.bytes().chain([0u8]).chain(key.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016X}")
}

#[derive(Debug)]
struct Deliveries {
    queue: mpsc::UnboundedSender<Message>,
}

impl InternalSubscriber for Deliveries {
    fn receive(&self, msg: &Message) -> bool {
        let _ = self.queue.send(msg.clone());
        true
    }
}

/// Why a session with the consumer ended.
enum End {
    Stopped,
    /// Attach again after `RETRY_PAUSE`, reporting the error if there is one.
    Reattach(Option<ApiError>),
}

pub async fn run(
    shared: Arc<ServerShared>,
    stream: Arc<StreamHandle>,
    plan: OriginPlan,
    consumer: DurableConsumer,
    mut reader: OriginReader,
    stop: CancellationToken,
) {
    loop {
        let end = attach(&shared, &stream, &plan, &consumer, &mut reader, &stop).await;
        let error = match end {
            End::Stopped => return,
            End::Reattach(error) => error,
        };
        if let Some(error) = error {
            stream.sources().update(&plan.key, |progress| {
                progress.error = Some(error);
            });
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(RETRY_PAUSE) => {}
        }
    }
}

/// One session: make the consumer if it is ours, subscribe its deliver subject, reset it,
/// then copy what it delivers until stopped or the consumer stops answering.
async fn attach(
    shared: &Arc<ServerShared>,
    stream: &Arc<StreamHandle>,
    plan: &OriginPlan,
    consumer: &DurableConsumer,
    reader: &mut OriginReader,
    stop: &CancellationToken,
) -> End {
    if consumer.managed {
        let config = consumer.config(stream.name(), plan);
        if let Err(error) = reader.create_consumer(&config).await {
            return End::Reattach(Some(error.to_api_error()));
        }
    }
    let (queue, deliveries) = mpsc::unbounded_channel();
    let subscription = shared.router.subscribe_internal(
        &consumer.deliver_subject,
        None,
        Arc::new(Deliveries { queue }),
    );
    let mut session = Session {
        shared,
        stream,
        plan,
        consumer,
        reader,
        deliveries,
        received: 0,
        restarting: None,
        stored: Stored::default(),
        batch: Vec::new(),
        answers: Vec::new(),
    };
    let end = match session.reset().await {
        Ok(()) => session.copy(stop).await,
        Err(error) => End::Reattach(Some(error)),
    };
    shared.router.unsubscribe(&subscription);
    end
}

/// The last message stored (or already held) here: what a flow-control answer reports.
#[derive(Debug, Clone, Copy, Default)]
struct Stored {
    stream_seq: u64,
    consumer_seq: u64,
}

/// A delivered message waiting to be proposed.
struct Received {
    ack: AckReply,
    msg: Message,
}

struct Session<'a> {
    shared: &'a Arc<ServerShared>,
    stream: &'a Arc<StreamHandle>,
    plan: &'a OriginPlan,
    consumer: &'a DurableConsumer,
    reader: &'a mut OriginReader,
    deliveries: mpsc::UnboundedReceiver<Message>,
    /// The last consumer sequence received in order.
    received: u64,
    /// Since when a reset waits for delivery to start over (consumer sequence 1).
    restarting: Option<Instant>,
    stored: Stored,
    batch: Vec<Received>,
    /// Flow-control subjects to answer once the batch before them is stored.
    answers: Vec<Bytes>,
}

impl Session<'_> {
    /// Resets the consumer to its ack floor and waits for delivery to start over. Refuses a
    /// consumer that is not acknowledged by flow control (10214 / 10217): with any other
    /// ack policy the origin would drop or keep messages regardless of what is stored here.
    async fn reset(&mut self) -> Result<(), ApiError> {
        self.flush().await;
        let config = self
            .reader
            .reset_consumer(&self.consumer.name)
            .await
            .map_err(|error| error.to_api_error())?;
        if config.ack_policy != AckPolicy::FlowControl {
            return Err(ApiError::new(match self.plan.kind {
                SourceKind::Mirror => ErrorKind::MirrorConsumerRequiresAckFc,
                SourceKind::Source => ErrorKind::SourceConsumerRequiresAckFc,
            }));
        }
        self.received = 0;
        self.restarting = Some(Instant::now());
        self.stream.sources().update(&self.plan.key, |progress| {
            progress.last_contact = Some(std::time::Instant::now());
            progress.error = None;
        });
        Ok(())
    }

    async fn copy(&mut self, stop: &CancellationToken) -> End {
        loop {
            let first = tokio::select! {
                _ = stop.cancelled() => return End::Stopped,
                next = tokio::time::timeout(SILENCE, self.deliveries.recv()) => next,
            };
            let mut gap = match first {
                Ok(Some(msg)) => self.take(msg),
                Ok(None) => return End::Reattach(None),
                // Silence: the consumer's leader moved, or our interest did not reach it.
                Err(_) => true,
            };
            while !gap && self.batch.len() < MAX_BATCH {
                match self.deliveries.try_recv() {
                    Ok(msg) => gap = self.take(msg),
                    Err(_) => break,
                }
            }
            if !self.flush().await {
                tokio::select! {
                    _ = stop.cancelled() => return End::Stopped,
                    _ = tokio::time::sleep(RETRY_PAUSE) => {}
                }
                gap = true;
            }
            if gap {
                if let Err(error) = self.reset().await {
                    return End::Reattach(Some(error));
                }
            }
        }
    }

    /// Takes one message from the deliver subject; true when it shows a gap.
    fn take(&mut self, msg: Message) -> bool {
        let Some(block) = msg.headers.as_deref() else {
            return self.take_delivery(msg);
        };
        if !msg.payload.is_empty() || !block.starts_with(b"NATS/1.0 100") {
            return self.take_delivery(msg);
        }
        self.stream.sources().update(&self.plan.key, |progress| {
            progress.last_contact = Some(std::time::Instant::now());
        });
        if block.starts_with(b"NATS/1.0 100 FlowControl Request") {
            if let Some(reply) = msg.reply {
                self.answers.push(reply);
            }
            return false;
        }
        // An idle heartbeat: everything delivered before it has arrived.
        if let Some(stalled) = headers::lookup(block, STALLED_HEADER) {
            self.answers.push(Bytes::copy_from_slice(stalled));
        }
        let last = sequence_header(block, LAST_CONSUMER_HEADER).unwrap_or(0);
        match self.restarting {
            Some(_) if last == 0 => {
                // Reset, and nothing delivered since.
                self.restarting = None;
                false
            }
            Some(since) => since.elapsed() >= SILENCE,
            None => last != self.received,
        }
    }

    fn take_delivery(&mut self, msg: Message) -> bool {
        let Some(ack) = msg
            .reply
            .as_deref()
            .and_then(|reply| std::str::from_utf8(reply).ok())
            .and_then(|reply| AckReply::parse(reply).ok())
        else {
            return false;
        };
        // A redelivery would come out of order; the reset brings back what was missed.
        if ack.num_delivered > 1 {
            return false;
        }
        if ack.consumer_seq == 1 {
            // Delivery started over: after our reset, or someone else's.
            self.restarting = None;
        } else if self.restarting.is_some() {
            // Still the delivery from before the reset.
            return false;
        } else if ack.consumer_seq != self.received + 1 {
            return true;
        }
        self.received = ack.consumer_seq;
        let lag = ack.num_pending;
        self.stream.sources().update(&self.plan.key, |progress| {
            progress.last_contact = Some(std::time::Instant::now());
            progress.lag = lag;
        });
        self.batch.push(Received { ack, msg });
        false
    }

    /// Proposes the batch, then answers the flow-control requests that came after it with
    /// what is stored. False when the copies were not all stored (the caller resets).
    async fn flush(&mut self) -> bool {
        let batch = std::mem::take(&mut self.batch);
        let mut stored = true;
        if let Some(last) = batch.last() {
            let last = Stored {
                stream_seq: last.ack.stream_seq,
                consumer_seq: last.ack.consumer_seq,
            };
            let commands = self.commands(batch);
            let outcome = match commands.is_empty() {
                true => Ok(Chain::Intact),
                false => propose(self.shared, self.stream, commands).await,
            };
            match outcome {
                Ok(Chain::Intact) => self.stored = last,
                Ok(Chain::Broken) => stored = false,
                Err(error) => {
                    self.stream.sources().update(&self.plan.key, |progress| {
                        progress.error = Some(error);
                    });
                    stored = false;
                }
            }
        }
        for reply in std::mem::take(&mut self.answers) {
            self.answer(reply);
        }
        stored
    }

    /// The `Sourced` commands of a batch, chained from the replicated position; what that
    /// position already covers is left out.
    fn commands(&self, batch: Vec<Received>) -> Vec<SourcedMessage> {
        let mut expected = self
            .stream
            .view()
            .read(|group| group.source_positions().get(&self.plan.key));
        let mut commands = Vec::with_capacity(batch.len());
        for Received { ack, msg } in batch {
            if ack.stream_seq <= expected {
                continue;
            }
            let Ok(subject) = std::str::from_utf8(&msg.subject) else {
                continue;
            };
            let Some(stored_subject) = self.plan.stored_subject(subject) else {
                continue;
            };
            let origin = OriginMsg {
                seq: ack.stream_seq,
                subject: subject.to_owned(),
                headers: msg.headers,
                payload: msg.payload,
                ts_nanos: ack.timestamp,
            };
            commands.push(self.plan.command(origin, stored_subject, expected));
            expected = ack.stream_seq;
        }
        commands
    }

    /// Answers a flow-control request (or a stalled heartbeat) with what is stored.
    fn answer(&self, reply: Bytes) {
        let block = format!(
            "NATS/1.0\r\n{LAST_STREAM_HEADER}: {}\r\n{LAST_CONSUMER_HEADER}: {}\r\n\r\n",
            self.stored.stream_seq, self.stored.consumer_seq
        );
        let msg = Message::new(reply, Bytes::new()).with_headers(Some(Bytes::from(block)));
        dispatch::publish(&self.shared.router, &msg);
    }
}

/// Deletes the consumer a stream made on a work-queue or interest origin, once the stream
/// no longer copies that origin (its source removed, or the stream deleted). Best effort,
/// as on nats-server: an origin that does not answer keeps it.
pub async fn delete_managed(
    shared: Arc<ServerShared>,
    stream: &str,
    origin: &str,
    key: &str,
    kind: SourceKind,
) -> Result<(), ReadError> {
    let consumer = DurableConsumer::managed_for(stream, key, kind);
    let mut reader = OriginReader::new(shared, origin);
    reader.delete_consumer(consumer.name()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managed_names_are_stable_and_distinct() {
        let a = DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Source);
        assert_eq!(
            a.name,
            DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Source).name
        );
        assert!(a.name.starts_with("JS_SRC_"));
        assert!(a.deliver_subject.starts_with("_JETRAFT_.DLV."));
        let other = DurableConsumer::managed_for("AGG2", "ORDERS", SourceKind::Source);
        assert_ne!(a.name, other.name);
        let shifted = DurableConsumer::managed_for("AGGO", "RDERS", SourceKind::Source);
        assert_ne!(a.name, shifted.name);
        let mirror = DurableConsumer::managed_for("AGG", "ORDERS", SourceKind::Mirror);
        assert!(mirror.name.starts_with("JS_MIRROR_"));
        assert_eq!(name_hash("", "").len(), 16);
        assert!(crate::jsapi::names::is_valid_name(&a.name));
    }
}
