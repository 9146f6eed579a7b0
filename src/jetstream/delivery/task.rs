//! One consumer's delivery task — the single owner of its waiting pull requests, push
//! state and timers. It wakes on an event (pull request, config change, deletion,
//! flow-control answer), on every entry its stream group applies (new messages, acks), and
//! at the earliest deadline (request expiry, heartbeat, redelivery due time, inactivity).
//! Each wake: expire requests (408) and send heartbeats, then deliver while there is demand
//! (a waiting request, or interest on the push deliver subject) by proposing `DeliverNext`
//! and sending what it returns.
//!
//! One per consumer on the stream's leader (spawned by `DeliveryRegistry`).

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};

use super::outbox::{self, Outbox};
use super::pull;
use super::push::PushState;
use super::waiting::WaitingQueue;
use super::{Activity, DeliveryRegistry};
use crate::jetstream::now_nanos;
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::{
    AckPolicy, ConsumerConfig, ErrorKind, PullRequest, PullRequestError, RetentionPolicy,
};
use crate::jscore::consumer::{ConsumerCommand, ConsumerOutcome};
use crate::jscore::group::{GroupCommand, GroupOutcome};
use crate::jscore::stream::StoredMsg;
use crate::server::message::Message;

/// Most messages one pull `DeliverNext` proposal delivers.
const MAX_PULL_BATCH: i64 = 1024;
/// Pause after a failed proposal.
const RETRY_AFTER: Duration = Duration::from_millis(250);
/// How often waiting requests are checked for lost interest, and stale redeliveries retired.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How often a push consumer without interest looks again.
const INTEREST_POLL: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(super) enum Event {
    Pull {
        reply: Bytes,
        request: Result<PullRequest, PullRequestError>,
    },
    ConfigChanged,
    Deleted,
    FlowControlReply(String),
}

/// What the consumer's state says about delivering now.
enum Next {
    Gone,
    Nothing,
    /// A message is ready; `size` is what a byte budget is charged for it.
    Ready {
        size: i64,
    },
}

/// The consumer no longer exists in its stream.
struct Gone;

struct ConsumerTask {
    registry: Arc<DeliveryRegistry>,
    stream: Arc<StreamHandle>,
    name: String,
    outbox: Outbox,
    activity: Arc<Activity>,
    applied: watch::Receiver<u64>,
    config: ConsumerConfig,
    waiting: WaitingQueue,
    push: Option<PushState>,
    /// No proposal before this, after one failed.
    retry_at: Option<Instant>,
    /// No retiring of stale redeliveries before this.
    stale_check_at: Option<Instant>,
    next_sweep: Instant,
}

pub(super) async fn run(
    registry: Arc<DeliveryRegistry>,
    stream: Arc<StreamHandle>,
    name: String,
    activity: Arc<Activity>,
    mut events: mpsc::UnboundedReceiver<Event>,
) {
    let config = stream
        .view()
        .read(|group| group.consumer(&name).map(|c| c.config().clone()));
    let Some(config) = config else {
        registry.forget(stream.name(), &name, &activity);
        return;
    };
    let now = Instant::now();
    let mut task = ConsumerTask {
        outbox: registry.outbox().clone(),
        applied: stream.view().applied(),
        waiting: WaitingQueue::new(config.max_waiting),
        push: PushState::new(&config, now),
        registry,
        stream,
        name,
        activity,
        config,
        retry_at: None,
        stale_check_at: None,
        next_sweep: now + SWEEP_EVERY,
    };
    let shutdown = task.outbox.shared().shutdown.clone();
    let deleted = loop {
        if task.step().await.is_err() {
            break true;
        }
        if task.inactive() && task.delete_self().await {
            break false;
        }
        let deadline = task.next_wakeup();
        let watch_applied = task.wants_messages();
        tokio::select! {
            _ = shutdown.cancelled() => break false,
            event = events.recv() => match event {
                None | Some(Event::Deleted) => break true,
                Some(event) => task.on_event(event),
            },
            changed = task.applied.changed(), if watch_applied => {
                if changed.is_err() {
                    break true; // the stream group stopped
                }
            }
            _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
        }
    };
    if deleted {
        for request in task.waiting.drain() {
            task.outbox
                .status(&request.reply, outbox::conflict("Consumer Deleted"));
        }
    }
    task.activity.num_waiting.store(0, Ordering::Relaxed);
    task.activity.push_bound.store(false, Ordering::Relaxed);
    task.registry
        .forget(task.stream.name(), &task.name, &task.activity);
}

impl ConsumerTask {
    /// Expiry, heartbeats, then delivery while there is demand.
    async fn step(&mut self) -> Result<(), Gone> {
        let now = Instant::now();
        self.expire_and_heartbeat(now);
        if self.push.is_some() {
            self.deliver_push().await?;
        } else {
            self.deliver_pull().await?;
        }
        self.activity
            .num_waiting
            .store(self.waiting.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn on_event(&mut self, event: Event) {
        match event {
            Event::Pull { reply, request } => self.on_pull(reply, request),
            Event::ConfigChanged => {
                let config = self
                    .stream
                    .view()
                    .read(|group| group.consumer(&self.name).map(|c| c.config().clone()));
                if let Some(config) = config {
                    self.waiting.set_max(config.max_waiting);
                    match &mut self.push {
                        Some(push) => push.update(&config),
                        None => self.push = PushState::new(&config, Instant::now()),
                    }
                    self.config = config;
                }
            }
            Event::FlowControlReply(subject) => {
                if let Some(push) = &mut self.push {
                    push.flow_control_answered(&subject);
                }
            }
            Event::Deleted => {}
        }
    }

    fn on_pull(&mut self, reply: Bytes, request: Result<PullRequest, PullRequestError>) {
        let request = match pull::admit(&self.config, reply.clone(), request, Instant::now()) {
            Ok(request) => request,
            Err(status) => {
                self.outbox.status(&reply, status);
                return;
            }
        };
        // nats-server answers a no_wait request at once when there is nothing to deliver.
        if request.ends_when_dry() && matches!(self.peek(now_nanos()), Next::Nothing) {
            self.outbox.status(&reply, outbox::no_messages());
            return;
        }
        if self.waiting.push(request).is_err() {
            self.outbox
                .status(&reply, outbox::conflict("Exceeded MaxWaiting"));
        }
    }

    fn expire_and_heartbeat(&mut self, now: Instant) {
        for request in self.waiting.take_expired(now) {
            let status = outbox::request_timeout(request.batch_left, request.pending_bytes());
            self.outbox.status(&request.reply, status);
        }
        if now >= self.next_sweep {
            self.next_sweep = now + SWEEP_EVERY;
            let outbox = &self.outbox;
            self.waiting
                .drop_uninterested(|reply| outbox.has_interest(reply));
        }
        let due = self.waiting.heartbeats_due(now);
        let push_due = self.push.as_mut().and_then(|push| push.heartbeat_due(now));
        if due.is_empty() && push_due.is_none() {
            return;
        }
        let delivered = self.stream.view().read(|group| {
            group
                .consumer(&self.name)
                .map(|c| c.delivered())
                .unwrap_or_default()
        });
        let heartbeat = |stalled: Option<&str>| {
            outbox::idle_heartbeat(delivered.consumer_seq, delivered.stream_seq, stalled)
        };
        for reply in due {
            self.outbox.status(&reply, heartbeat(None));
        }
        if let (Some(stalled), Some(push)) = (push_due, &self.push) {
            self.outbox
                .status(&push.deliver_subject, heartbeat(stalled.as_deref()));
        }
    }

    async fn deliver_pull(&mut self) -> Result<(), Gone> {
        while let Some(front) = self.waiting.front_mut() {
            if self.retry_at.is_some_and(|at| at > Instant::now()) {
                return Ok(());
            }
            let reply = front.reply.clone();
            let (ends_when_dry, limited) = (front.ends_when_dry(), front.bytes_left.is_some());
            let (batch_left, pending_bytes) = (front.batch_left, front.pending_bytes());
            if !self.outbox.has_interest(&reply) {
                self.waiting.pop_front();
                continue;
            }
            let now = now_nanos();
            let max = match self.peek(now) {
                Next::Gone => return Err(Gone),
                Next::Nothing if ends_when_dry => {
                    self.waiting.pop_front();
                    self.outbox.status(&reply, outbox::no_messages());
                    continue;
                }
                Next::Nothing if self.stale_redelivery(now) => 1,
                Next::Nothing => return Ok(()),
                Next::Ready { size } if limited && pending_bytes < size => {
                    self.waiting.pop_front();
                    let status = outbox::message_too_big(batch_left, pending_bytes);
                    self.outbox.status(&reply, status);
                    continue;
                }
                Next::Ready { .. } if limited => 1,
                Next::Ready { .. } => batch_left.clamp(1, MAX_PULL_BATCH) as usize,
            };
            let messages = self.deliver_next(max, now).await?;
            if messages.is_empty() {
                return Ok(());
            }
            let front = self
                .waiting
                .front_mut()
                .expect("only this task changes the queue");
            let delivered_at = Instant::now();
            for msg in &messages {
                front.record_delivery(outbox::charged_size(msg), delivered_at);
            }
            if front.is_done() {
                self.waiting.pop_front();
            }
            self.outbox.deliver(&reply, &messages).await;
        }
        Ok(())
    }

    async fn deliver_push(&mut self) -> Result<(), Gone> {
        let Some(subject) = self.push.as_ref().map(|p| p.deliver_subject.clone()) else {
            return Ok(());
        };
        let bound = self.outbox.has_interest(&subject);
        self.activity.push_bound.store(bound, Ordering::Relaxed);
        if !bound {
            return Ok(());
        }
        self.activity.touch(now_nanos());
        loop {
            let window = self.push.as_ref().map_or(0, PushState::window);
            if window == 0 || self.retry_at.is_some_and(|at| at > Instant::now()) {
                return Ok(());
            }
            let now = now_nanos();
            let max = match self.peek(now) {
                Next::Gone => return Err(Gone),
                Next::Nothing if self.stale_redelivery(now) => 1,
                Next::Nothing => return Ok(()),
                Next::Ready { .. } => window,
            };
            let messages = self.deliver_next(max, now).await?;
            if messages.is_empty() {
                return Ok(());
            }
            let bytes: i64 = messages.iter().map(outbox::charged_size).sum();
            self.outbox.deliver(&subject, &messages).await;
            let push = self.push.as_mut().expect("push consumer");
            if push.record_delivery(messages.len() as u64, bytes as u64, Instant::now()) {
                let reply = outbox::flow_control_subject(self.stream.name(), &self.name);
                self.outbox.status_with_reply(
                    &subject,
                    outbox::flow_control_request(),
                    reply.clone(),
                );
                push.flow_control_sent(reply);
            }
        }
    }

    /// Proposes `DeliverNext` and builds the messages it delivered.
    async fn deliver_next(&mut self, max: usize, now: i64) -> Result<Vec<Message>, Gone> {
        let prefetched = self.prefetch(max, now);
        let command = GroupCommand::Consumer {
            name: self.name.clone(),
            command: ConsumerCommand::DeliverNext {
                max_messages: max,
                now_nanos: now,
            },
        };
        let deliveries = match self.stream.propose_one(command).await {
            Ok(GroupOutcome::Consumer {
                outcome: ConsumerOutcome::Delivered(deliveries),
                ..
            }) => deliveries,
            Ok(other) => {
                tracing::error!(consumer = %self.name, "unexpected deliver outcome {other:?}");
                return Ok(Vec::new());
            }
            Err(error) if error.is(ErrorKind::ConsumerNotFound) => return Err(Gone),
            Err(error) => {
                tracing::warn!(consumer = %self.name, "delivery proposal failed: {error}");
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                return Ok(Vec::new());
            }
        };
        if !deliveries.is_empty() {
            self.activity
                .last_delivered_nanos
                .store(now, Ordering::Relaxed);
            self.activity.touch(now);
        }
        let (stream, name) = (self.stream.name(), self.name.as_str());
        let headers_only = self.config.headers_only;
        Ok(self.stream.view().read(|group| {
            deliveries
                .iter()
                .filter_map(|delivery| {
                    let stored = group
                        .stream()
                        .get(delivery.stream_seq)
                        .or_else(|| prefetched.get(&delivery.stream_seq))?;
                    let ack = outbox::ack_subject(stream, name, delivery, stored.ts_nanos);
                    Some(outbox::delivered_message(stored, ack, headers_only))
                })
                .collect()
        }))
    }

    /// An ack-none consumer on an interest or work-queue stream: the messages it is about
    /// to be handed are removed by the same apply (delivery is its ack), so read them first.
    fn prefetch(&self, max: usize, now: i64) -> HashMap<u64, StoredMsg> {
        if self.config.ack_policy != AckPolicy::None {
            return HashMap::new();
        }
        self.stream.view().read(|group| {
            let stream = group.stream();
            if stream.config().retention == RetentionPolicy::Limits {
                return HashMap::new();
            }
            let Some(consumer) = group.consumer(&self.name) else {
                return HashMap::new();
            };
            let mut rehearsal = consumer.clone();
            rehearsal
                .deliver_next(stream, max, now)
                .into_iter()
                .filter_map(|d| stream.get(d.stream_seq).map(|m| (d.stream_seq, m.clone())))
                .collect()
        })
    }

    fn peek(&self, now: i64) -> Next {
        self.stream.view().read(|group| {
            let Some(consumer) = group.consumer(&self.name) else {
                return Next::Gone;
            };
            let Some(delivery) = consumer.next_to_deliver(group.stream(), now) else {
                return Next::Nothing;
            };
            let Some(stored) = group.stream().get(delivery.stream_seq) else {
                return Next::Nothing;
            };
            let ack =
                outbox::ack_subject(self.stream.name(), &self.name, &delivery, stored.ts_nanos);
            let msg = outbox::delivered_message(stored, ack, self.config.headers_only);
            Next::Ready {
                size: outbox::charged_size(&msg),
            }
        })
    }

    /// A due redelivery that cannot go out (its message is gone or out of deliveries) is
    /// retired by a `DeliverNext`; at most once per sweep, so it cannot spin.
    fn stale_redelivery(&mut self, now: i64) -> bool {
        let due = self.redelivery_at().is_some_and(|at| at <= now);
        if !due || self.stale_check_at.is_some_and(|at| at > Instant::now()) {
            return false;
        }
        self.stale_check_at = Some(Instant::now() + SWEEP_EVERY);
        true
    }

    fn redelivery_at(&self) -> Option<i64> {
        self.stream.view().read(|group| {
            group
                .consumer(&self.name)
                .and_then(|c| c.next_redelivery_at())
        })
    }

    /// Someone wants messages now: a waiting pull request, or a bound, unstalled push.
    fn wants_messages(&self) -> bool {
        match &self.push {
            None => !self.waiting.is_empty(),
            Some(push) => self.activity.push_bound.load(Ordering::Relaxed) && !push.is_stalled(),
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut deadlines = vec![self.waiting.next_deadline(), self.retry_at];
        if !self.waiting.is_empty() {
            deadlines.push(Some(self.next_sweep));
        }
        if let Some(push) = &self.push {
            deadlines.push(push.next_heartbeat());
            // Interest comes and goes without telling us: look again soon.
            let poll = match self.activity.push_bound.load(Ordering::Relaxed) {
                true => SWEEP_EVERY,
                false => INTEREST_POLL,
            };
            deadlines.push(Some(now + poll));
        }
        if self.wants_messages() {
            let wall = now_nanos();
            // A due time already past is a stale entry: look again at the next stale check.
            let redelivery = self.redelivery_at().map(|at| match at - wall {
                left if left > 0 => now + Duration::from_nanos(left as u64),
                _ => self.stale_check_at.unwrap_or(now).max(now),
            });
            deadlines.push(redelivery);
        }
        if self.config.inactive_threshold > 0 {
            let idle_for = now_nanos() - self.activity.last_active_nanos.load(Ordering::Relaxed);
            let left = (self.config.inactive_threshold - idle_for).max(0) as u64;
            deadlines.push(Some(now + Duration::from_nanos(left)));
        }
        deadlines.into_iter().flatten().min()
    }

    /// No demand for `inactive_threshold`: ephemerals (and durables that set one) go away.
    fn inactive(&self) -> bool {
        let threshold = self.config.inactive_threshold;
        let idle = match &self.push {
            None => self.waiting.is_empty(),
            Some(_) => !self.activity.push_bound.load(Ordering::Relaxed),
        };
        let last = self.activity.last_active_nanos.load(Ordering::Relaxed);
        threshold > 0 && idle && now_nanos() - last >= threshold
    }

    /// Deletes this consumer for inactivity; false (retry later) if the proposal failed.
    async fn delete_self(&mut self) -> bool {
        let command = GroupCommand::DeleteConsumer {
            name: self.name.clone(),
        };
        match self.stream.propose_one(command).await {
            Ok(_) => {
                tracing::debug!(stream = %self.stream.name(), consumer = %self.name, "inactive consumer deleted");
                true
            }
            Err(error) if error.is(ErrorKind::ConsumerNotFound) => true,
            Err(error) => {
                tracing::warn!(consumer = %self.name, "cannot delete inactive consumer: {error}");
                self.activity.touch(now_nanos());
                false
            }
        }
    }
}
