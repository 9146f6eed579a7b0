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
use super::durable_consumer::DurableConsumer;
use super::origin::{Forward, OriginMsg, OriginReader};
use crate::jetstream::delivery::outbox::{
    sequence_header, LAST_CONSUMER_HEADER, LAST_STREAM_HEADER, STALLED_HEADER,
};
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::consumer_config::AckPolicy;
use crate::jsapi::{AckReply, ApiError, ErrorKind};
use crate::jscore::sourcing::{SourceKind, SourcedMessage};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::ServerShared;
use crate::wire::headers;

/// fails, attach again.
const SILENCE: Duration = Duration::from_secs(3);
/// Most delivered messages proposed as one entry.
const MAX_BATCH: usize = 256;

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
        Arc::new(Forward { queue }),
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
        heard: false,
        lag: None,
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
    /// Something came from the consumer since the last report, and the origin's pending
    /// count the last message gave.
    heard: bool,
    lag: Option<u64>,
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
        self.heard = true;
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
        self.heard = true;
        self.lag = Some(ack.num_pending);
        self.batch.push(Received { ack, msg });
        false
    }

    /// Proposes the batch, then answers the flow-control requests that came after it with
    /// what is stored. False when the copies were not all stored (the caller resets).
    async fn flush(&mut self) -> bool {
        self.report_contact();
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

    /// Reports what was heard since the last flush (`STREAM.INFO`'s `active` and `lag`):
    /// once per batch, not per message.
    fn report_contact(&mut self) {
        if !std::mem::take(&mut self.heard) {
            return;
        }
        let lag = self.lag.take();
        self.stream.sources().update(&self.plan.key, |progress| {
            progress.last_contact = Some(std::time::Instant::now());
            if let Some(lag) = lag {
                progress.lag = lag;
            }
        });
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
