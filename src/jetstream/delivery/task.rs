//! One consumer's delivery task — the single owner of its waiting pull requests, push
//! state and timers. It wakes on an event (pull request, config change, deletion,
//! flow-control answer), on every entry its stream group applies (new messages, acks), and
//! at the earliest deadline (request expiry, heartbeat, redelivery due time, inactivity).
//! Each wake: expire requests (408) and send heartbeats, then deliver while there is demand
//! (a waiting request, or interest on the push deliver subject) by proposing `DeliverNext`
//! and sending what it returns.
//!
//! One per consumer on the stream's leader (spawned by `DeliveryRegistry`). How it
//! delivers (peek, propose, send) is in `deliver.rs`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{sleep_until, Instant};

use super::outbox::{self, Outbox};
use super::pause::{PauseChange, PauseState};
use super::priority::{Pin, PriorityState};
use super::pull;
use super::push::PushState;
use super::waiting::WaitingQueue;
use super::{Activity, DeliveryRegistry};
use crate::jetstream::advisories;
use crate::jetstream::now_nanos;
use crate::jetstream::stream::StreamHandle;
use crate::jsapi::advisory::{Action, Advisory};
use crate::jsapi::{ConsumerConfig, ErrorKind, PullRequest, PullRequestError};
use crate::jscore::group::StreamCommand;

/// Most messages one pull `DeliverNext` proposal delivers.
pub(super) const MAX_PULL_BATCH: i64 = 1024;
/// Pause after a failed proposal.
pub(super) const RETRY_AFTER: Duration = Duration::from_millis(250);
/// How often waiting requests are checked for lost interest, and stale redeliveries retired.
pub(super) const SWEEP_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(super) enum Event {
    Pull {
        reply: Bytes,
        request: Result<PullRequest, PullRequestError>,
        /// The stream's ingest mark when the request came (`ingest_progress`).
        after_publishes: u64,
    },
    ConfigChanged,
    Deleted,
    /// The stream group stopped under this task (it is restarted with a new handle and a
    /// new task): waiting requests get `409 Leadership Change`.
    LeadershipChange,
    /// The server is stopping: waiting requests get `409 Server Shutdown`; the sender
    /// learns when they were queued.
    ServerShutdown(oneshot::Sender<()>),
    /// A reply to a flow-control request, with its `Nats-Last-Stream` if it carried one.
    FlowControlReply {
        subject: String,
        last_stream: Option<u64>,
    },
    /// `CONSUMER.UNPIN` (the API handler checked the group and advises).
    Unpin,
    /// Answered once the task is between deliveries: every message the consumer's state
    /// counts as delivered has been sent (`DeliveryRegistry::sent_delivered`).
    Sent(oneshot::Sender<()>),
}

/// Why a consumer's task ended, and so what its waiting requests are told.
enum Ending {
    /// Deleted (or its stream was): `409 Consumer Deleted`.
    Deleted,
    /// Its group stopped or was replaced: `409 Leadership Change`.
    LeadershipChange,
    /// Shutdown or inactivity: nothing more to say.
    Quiet,
}

/// What the consumer's state says about delivering now.
pub(super) enum Next {
    Gone,
    Nothing,
    /// A message is ready; `size` is what a byte budget is charged for it.
    Ready {
        size: i64,
    },
}

/// The consumer no longer exists in its stream.
pub(super) struct Gone;

pub(super) struct ConsumerTask {
    pub(super) registry: Arc<DeliveryRegistry>,
    pub(super) stream: Arc<StreamHandle>,
    pub(super) name: String,
    pub(super) outbox: Outbox,
    pub(super) activity: Arc<Activity>,
    pub(super) applied: watch::Receiver<u64>,
    pub(super) config: ConsumerConfig,
    pub(super) waiting: WaitingQueue,
    pub(super) push: Option<PushState>,
    pub(super) pause: PauseState,
    pub(super) priority: PriorityState,
    /// Push consumers: changes when the node gains a subscription, so an unbound push
    /// consumer starts delivering the moment its deliver subject gets interest.
    pub(super) subscriptions_added: Option<watch::Receiver<()>>,
    /// No proposal before this, after one failed.
    pub(super) retry_at: Option<Instant>,
    /// `ack_policy: flow_control`: the stream sequence a flow-control answer acknowledged,
    /// not yet proposed.
    pub(super) flow_control_ack: Option<u64>,
    /// No retiring of stale redeliveries before this.
    pub(super) stale_check_at: Option<Instant>,
    pub(super) next_sweep: Instant,
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
        pause: PauseState::new(&config, now_nanos()),
        priority: PriorityState::new(&config),
        subscriptions_added: (!config.is_pull())
            .then(|| registry.outbox().shared().router.subscriptions_added()),
        registry,
        stream,
        name,
        activity,
        config,
        retry_at: None,
        flow_control_ack: None,
        stale_check_at: None,
        next_sweep: now + SWEEP_EVERY,
    };
    let shutdown = task.outbox.shared().shutdown.clone();
    let ending = loop {
        if task.step().await.is_err() {
            break Ending::Deleted;
        }
        if task.inactive() && task.delete_self().await {
            break Ending::Quiet;
        }
        let deadline = task.next_wakeup();
        let watch_applied = task.wants_messages();
        let watch_interest = task.awaits_push_interest();
        let interest_added = async {
            match task.subscriptions_added.as_mut() {
                Some(added) => added.changed().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            // Events before the applied watch: a deletion announced by the registry wins
            // over the group's watch closing after it.
            biased;
            _ = shutdown.cancelled() => break Ending::Quiet,
            event = events.recv() => match event {
                None | Some(Event::Deleted) => break Ending::Deleted,
                Some(Event::LeadershipChange) => break Ending::LeadershipChange,
                Some(event) => {
                    task.settle_publishes_before(&event).await;
                    task.on_event(event);
                }
            },
            changed = task.applied.changed(), if watch_applied => {
                if changed.is_err() {
                    // The stream group stopped without the stream being deleted.
                    break Ending::LeadershipChange;
                }
            }
            _ = interest_added, if watch_interest => {}
            _ = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
        }
    };
    let final_status = match ending {
        Ending::Deleted => Some(outbox::conflict("Consumer Deleted")),
        Ending::LeadershipChange => Some(outbox::leadership_change()),
        Ending::Quiet => None,
    };
    if let Some(status) = final_status {
        for request in task.waiting.drain() {
            task.outbox.status(&request.reply, status.clone());
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
        if let Some(pin) = self.priority.lapse(now) {
            self.unpinned(&pin, "timeout");
        }
        let wall = now_nanos();
        if let Some(until) = self.pause.take_ended(wall) {
            self.advise_pause(until, false);
        }
        self.propose_flow_control_ack().await?;
        if self.pause.is_paused(wall) {
            // Requests wait (or expire) and heartbeats go on, as on nats-server.
        } else if self.push.is_some() {
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
            Event::Pull { reply, request, .. } => self.on_pull(reply, request),
            Event::ConfigChanged => {
                let config = self
                    .stream
                    .view()
                    .read(|group| group.consumer(&self.name).map(|c| c.config().clone()));
                if let Some(config) = config {
                    self.waiting.set_max(config.max_waiting);
                    if self.priority.update(&config).is_some() {
                        self.publish_pin();
                    }
                    if let PauseChange::Changed { until, paused } =
                        self.pause.update(&config, now_nanos())
                    {
                        self.advise_pause(until, paused);
                    }
                    match &mut self.push {
                        Some(push) => push.update(&config),
                        None => self.push = PushState::new(&config, Instant::now()),
                    }
                    self.config = config;
                }
            }
            Event::FlowControlReply {
                subject,
                last_stream,
            } => {
                let answered = self
                    .push
                    .as_mut()
                    .is_some_and(|push| push.flow_control_answered(&subject));
                // An `ack_policy: flow_control` consumer is acknowledged by the answer to
                // its latest request only (ADR-60); `step` proposes the ack.
                if answered && self.acks_by_flow_control() {
                    if let Some(seq) = last_stream {
                        self.flow_control_ack = Some(self.flow_control_ack.unwrap_or(0).max(seq));
                    }
                }
            }
            Event::ServerShutdown(done) => {
                for request in self.waiting.drain() {
                    let status =
                        outbox::server_shutdown(request.batch_left, request.pending_bytes());
                    self.outbox.status(&request.reply, status);
                }
                let _ = done.send(());
            }
            Event::Unpin => {
                if self.priority.unpin().is_some() {
                    self.publish_pin();
                }
            }
            Event::Sent(done) => {
                let _ = done.send(());
            }
            Event::Deleted | Event::LeadershipChange => {}
        }
    }

    /// A `no_wait` pull answers from what is stored when it is handled, so it first waits
    /// (bounded) for the publishes queued before it to be applied, as nats-server has stored
    /// a connection's earlier publishes by then (`ingest_progress`). Other requests wait for
    /// messages anyway.
    async fn settle_publishes_before(&self, event: &Event) {
        if let Event::Pull {
            request: Ok(request),
            after_publishes,
            ..
        } = event
        {
            let progress = self.stream.ingest();
            if request.no_wait && !progress.is_settled(*after_publishes) {
                progress
                    .settled_to(
                        *after_publishes,
                        crate::jetstream::ingest_progress::SETTLE_BOUND,
                    )
                    .await;
            }
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
        if let Err(status) = self.priority.admit(&request, Instant::now()) {
            self.outbox.status(&reply, status);
            return;
        }
        if request.no_wait {
            // nats-server answers a no_wait request at once when the requests already
            // waiting ask for more than the consumer has pending…
            let pending = self.messages_pending(now_nanos());
            if pending > 0 && pending < self.waiting.batch_pending() {
                self.outbox.status(&reply, outbox::requests_pending());
                return;
            }
        }
        // …and when there is nothing to deliver.
        if request.ends_when_dry() && matches!(self.peek(now_nanos()), Next::Nothing) {
            self.outbox.status(&reply, outbox::no_messages());
            return;
        }
        if self.waiting.is_full() {
            // Make room from requests that expired since the last wake, as nats-server does.
            self.expire_and_heartbeat(Instant::now());
        }
        let heartbeat = request.heartbeat.is_some();
        let queued = match self.priority.is_prioritized() {
            true => self.waiting.push_prioritized(request),
            false => self.waiting.push(request),
        };
        // A request with idle heartbeats is refused silently: its client notices the missing
        // heartbeats and retries later instead of re-pulling in a hot loop (nats-server).
        if queued.is_err() && !heartbeat {
            self.outbox
                .status(&reply, outbox::conflict("Exceeded MaxWaiting"));
        }
    }

    /// Messages the consumer could still hand out: not yet delivered ones matching its
    /// filter, plus redeliveries due now (nats-server's `numPending + len(rdq)`).
    fn messages_pending(&self, now: i64) -> u64 {
        self.read_consumer(|stream, consumer| {
            consumer.num_pending(stream) + consumer.pending().due(now).count() as u64
        })
        .unwrap_or(0)
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
        let delivered = self
            .read_consumer(|_, consumer| consumer.delivered())
            .unwrap_or_default();
        let heartbeat = |stalled: Option<&str>| {
            outbox::idle_heartbeat(delivered.consumer_seq, delivered.stream_seq, stalled)
        };
        for reply in due {
            self.outbox.status(&reply, heartbeat(None));
        }
        if let (Some(stalled), Some(push)) = (push_due, &self.push) {
            self.outbox
                .status(&push.deliver_subject, heartbeat(stalled.as_deref()));
            self.flow_control_after_heartbeat();
        }
    }

    /// A pin was dropped (`reason`: `timeout`); the group's next request takes a new one.
    fn unpinned(&self, pin: &Pin, reason: &'static str) {
        self.publish_pin();
        let advisory = Advisory::unpinned(self.stream.name(), &self.name, &pin.group, reason);
        advisories::publish(self.outbox.shared(), &advisory);
    }

    /// A pin was given to the request being served.
    pub(super) fn pinned(&self, pin: &Pin) {
        self.publish_pin();
        let advisory = Advisory::pinned(self.stream.name(), &self.name, &pin.group, &pin.id);
        advisories::publish(self.outbox.shared(), &advisory);
    }

    /// Shows the current pin to ConsumerInfo.
    fn publish_pin(&self) {
        *self.activity.pin.lock() = self.priority.current_pin();
    }

    fn advise_pause(&self, until: crate::jsapi::Timestamp, paused: bool) {
        let advisory = Advisory::pause(self.stream.name(), &self.name, until, paused);
        advisories::publish(self.outbox.shared(), &advisory);
    }

    /// Someone wants messages now (a waiting pull request, or a bound, unstalled push) and
    /// the consumer is not paused.
    fn wants_messages(&self) -> bool {
        if self.pause.is_paused(now_nanos()) {
            return false;
        }
        match &self.push {
            None => !self.waiting.is_empty(),
            Some(push) => self.activity.push_bound.load(Ordering::Relaxed) && !push.is_stalled(),
        }
    }

    /// A push consumer with no interest on its deliver subject, not paused: it waits for a
    /// subscription to appear (`deliver_push` marked the last one seen before looking).
    fn awaits_push_interest(&self) -> bool {
        self.push.is_some()
            && !self.activity.push_bound.load(Ordering::Relaxed)
            && !self.pause.is_paused(now_nanos())
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut deadlines = vec![
            self.waiting.next_deadline(),
            self.retry_at,
            self.pause.wake_at(now, now_nanos()),
            self.priority.wake_at(),
        ];
        if !self.waiting.is_empty() {
            deadlines.push(Some(self.next_sweep));
        }
        if let Some(push) = &self.push {
            deadlines.push(push.next_heartbeat());
            // Interest that appears wakes the task (`subscriptions_added`); interest that
            // goes is noticed at the next delivery or here.
            deadlines.push(Some(now + SWEEP_EVERY));
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
        let command = StreamCommand::DeleteConsumer {
            name: self.name.clone(),
        };
        match self.stream.propose_one(command).await {
            Ok(_) => {
                tracing::debug!(stream = %self.stream.name(), consumer = %self.name, "inactive consumer deleted");
                let advisory = Advisory::consumer(self.stream.name(), &self.name, Action::Delete);
                advisories::publish(self.outbox.shared(), &advisory);
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
