//! Delivery: getting stored messages to consumers and their acknowledgements back.
//!
//! * `registry` (this file) — `DeliveryRegistry`, one per node: the streams this node
//!   delivers for, one delivery task per consumer (`task.rs`), one ack batcher per stream
//!   behind a bounded queue (`acks.rs`), started by the stream's first ack (an idle stream
//!   costs no task), and, per stream it delivers for, the internal subscriptions on
//!   `$JS.ACK.<stream>.>` and `$JS.FC.<stream>.>`.
//! * `task.rs` / `deliver.rs` — a consumer's delivery task: its loop and timers, and how
//!   it proposes `DeliverNext` and sends the result.
//! * `pull.rs` / `waiting.rs` — pull requests (`CONSUMER.MSG.NEXT`) and their queue.
//! * `pause.rs` — a paused consumer's held delivery and its pause advisories.
//! * `priority.rs` — priority groups of pull consumers (overflow, pinned client, prioritized).
//! * `push.rs` — push consumers: deliver subject, flow control, idle heartbeats.
//! * `flow_ack.rs` — `ack_policy: flow_control`: acknowledged by flow-control answers.
//! * `outbox.rs` — status messages, ack subjects, routing by inbox with the stored subject.
//! * `info.rs` — ConsumerInfo from the replicated state plus this node's activity record.
//! * `local.rs` — the leader's copy of a consumer that delivers without Raft (ADR 0034).
//!
//! Every delivery is a replicated `DeliverNext` command (see `jscore::consumer`); only the
//! waiting pull requests, timers and activity times live here, in the leader's memory. The
//! exception: an ack-none, memory-storage consumer on a limits stream (every ordered
//! consumer) is delivered from the leader's own copy of its state (`local.rs`, ADR 0034).
//!
//! Only the node delivering for a stream (its leader) subscribes the stream's ack and
//! flow-control subjects, as nats-server subscribes a consumer's ack subject on its leader
//! only. In a cluster that interest reaches the other nodes, so an ack sent through any node
//! travels to the leader once and nowhere else (a node-wide `$JS.ACK.>` on every node had
//! every ack forwarded to every node, to be parsed and dropped there).
//!
//! Locking: `streams` is a small map behind a std-style mutex, never held across an
//! `.await` nor while publishing (a publish can re-enter through the ack subscriber).

mod ack_sample;
mod acks;
mod deliver;
mod flow_ack;
pub mod info;
mod local;
pub mod outbox;
mod pause;
pub mod priority;
pub mod pull;
mod push;
mod task;
pub mod waiting;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::queue::{self, Dropped, QueueSender};

/// Longest a `CONSUMER.INFO` waits for the consumer's task to send what it delivered.
const SENT_BOUND: std::time::Duration = std::time::Duration::from_secs(1);
use super::stream::StreamHandle;
use crate::jsapi::{PullRequest, PullRequestError};
use crate::server::subscription::Subscription;
use crate::server::ServerShared;
use acks::AckItem;
use local::LocalCopy;
use outbox::Outbox;
use task::Event;

/// The subjects a stream's delivered messages' ack replies, and its flow-control replies,
/// fall under (`$JS.ACK.<stream>.>`, `$JS.FC.<stream>.>`). Stream names hold no `.`, `*`
/// or `>`, so each is one token.
fn stream_reply_subjects(stream: &str) -> [String; 2] {
    [
        format!("{}{stream}.>", crate::jsapi::ACK_PREFIX),
        format!("{}{stream}.>", outbox::FLOW_CONTROL_PREFIX),
    ]
}

/// What this node knows about one consumer's activity (leader memory, not replicated):
/// `last_active` times, `num_waiting`, `push_bound`, when this node first saw it (ConsumerInfo
/// `created` of consumers from before the creation time was replicated), and what
/// inactivity cleanup measures. Shared between the registry, the consumer's task and the
/// ack batcher.
#[derive(Debug, Default)]
pub struct Activity {
    pub created_nanos: AtomicI64,
    pub last_delivered_nanos: AtomicI64,
    pub last_acked_nanos: AtomicI64,
    /// Last pull request, ack, delivery or observed push interest.
    pub last_active_nanos: AtomicI64,
    pub num_waiting: AtomicU64,
    pub push_bound: AtomicBool,
    /// The pin of a `pinned_client` consumer (id, when given), for ConsumerInfo.
    pub pin: Mutex<Option<(String, crate::jsapi::Timestamp)>>,
    /// The leader's copy of a consumer that delivers without Raft (`local.rs`).
    pub local: LocalCopy,
}

impl Activity {
    fn new(now_nanos: i64) -> Self {
        let activity = Activity::default();
        activity.created_nanos.store(now_nanos, Ordering::Relaxed);
        activity
            .last_active_nanos
            .store(now_nanos, Ordering::Relaxed);
        activity
    }

    pub fn touch(&self, now_nanos: i64) {
        self.last_active_nanos.store(now_nanos, Ordering::Relaxed);
    }
}

#[derive(Debug, Clone)]
struct ConsumerEntry {
    events: mpsc::UnboundedSender<Event>,
    activity: Arc<Activity>,
}

#[derive(Debug)]
struct StreamEntry {
    handle: Arc<StreamHandle>,
    consumers: HashMap<String, ConsumerEntry>,
    /// Bounded (`acks::MAX_QUEUED_ACKS`); dropping it ends the stream's ack batcher. None
    /// until the stream's first ack starts the batcher: most streams of a node that hosts
    /// thousands are idle, and a task each would cost them memory for nothing.
    acks: Option<QueueSender<AckItem>>,
    /// The stream's ack and flow-control subscriptions, removed with the entry.
    subscriptions: Vec<Arc<Subscription>>,
}

/// One per node (held by the `Catalog`).
#[derive(Debug)]
pub struct DeliveryRegistry {
    me: Weak<DeliveryRegistry>,
    outbox: Outbox,
    /// Never locked while subscribing or unsubscribing (the router calls out to the routes).
    streams: Mutex<HashMap<String, StreamEntry>>,
    /// The ack and flow-control subscriber of every stream (it looks the stream up here).
    inbox: Arc<acks::AckInbox>,
    /// Acks dropped because their stream's ack queue was full.
    acks_dropped: Dropped,
}

impl DeliveryRegistry {
    /// Creates the registry. Call from inside the runtime; tasks run on `shared.tasks` and
    /// stop with `shared.shutdown`.
    pub fn new(shared: Arc<ServerShared>) -> Arc<DeliveryRegistry> {
        Arc::new_cyclic(|me| DeliveryRegistry {
            me: me.clone(),
            outbox: Outbox::new(shared),
            streams: Mutex::new(HashMap::new()),
            inbox: Arc::new(acks::AckInbox::new(me.clone())),
            acks_dropped: Dropped::default(),
        })
    }

    fn shared(&self) -> &Arc<ServerShared> {
        self.outbox.shared()
    }

    /// The server name ConsumerInfo reports as `cluster.leader`.
    pub fn server_name(&self) -> &str {
        &self.shared().identity.server_name
    }

    /// This node leads a stream group (or its only replica runs here): subscribe the
    /// stream's ack and flow-control subjects, start its ack batcher and a delivery task for
    /// each consumer it has. Idempotent; a different handle under the same name (deleted and
    /// re-created) replaces the old one.
    pub fn attach_stream(&self, handle: &Arc<StreamHandle>) {
        let names: Vec<String> = handle
            .view()
            .read(|group| group.consumer_names().map(str::to_owned).collect());
        if !self.is_attached(handle) {
            // Subscribed before the entry exists: an ack arriving in between finds no
            // stream and is dropped, as one arriving before the leader took over would be.
            let subscriptions = self.subscribe_replies(handle.name());
            let entry = StreamEntry {
                handle: handle.clone(),
                consumers: HashMap::new(),
                acks: None,
                subscriptions,
            };
            let replaced = {
                let mut streams = self.streams.lock();
                if streams
                    .get(handle.name())
                    .is_some_and(|current| Arc::ptr_eq(&current.handle, handle))
                {
                    Err(entry) // attached concurrently
                } else {
                    Ok(streams.insert(handle.name().to_owned(), entry))
                }
            };
            match replaced {
                Ok(Some(old)) => self.retire(old, || Event::Deleted),
                Ok(None) => {}
                Err(unused) => self.unsubscribe(&unused.subscriptions),
            }
        }
        for name in names {
            self.consumer(handle, &name);
        }
    }

    /// The stream was deleted (or moved away): its waiting pull requests get `409 Consumer
    /// Deleted` and its tasks end.
    pub fn detach_stream(&self, stream: &str) {
        let removed = self.streams.lock().remove(stream);
        if let Some(entry) = removed {
            self.retire(entry, || Event::Deleted);
        }
    }

    /// The stream's group stopped (a fatal storage error) and is being restarted: waiting
    /// pull requests get `409 Leadership Change` and the consumers' tasks end; attaching
    /// the restarted handle starts new ones.
    pub fn leadership_lost(&self, stream: &str) {
        let removed = self.streams.lock().remove(stream);
        if let Some(entry) = removed {
            self.retire(entry, || Event::LeadershipChange);
        }
    }

    /// The server is about to stop: every waiting pull request gets `409 Server Shutdown`
    /// (as nats-server sends for R1 consumers). Waits up to `wait` for the statuses to be
    /// queued, so they go out before the connections close.
    pub async fn signal_shutdown(&self, wait: std::time::Duration) {
        let receipts: Vec<_> = {
            let streams = self.streams.lock();
            streams
                .values()
                .flat_map(|entry| entry.consumers.values())
                .filter_map(|consumer| {
                    let (done, receipt) = tokio::sync::oneshot::channel();
                    consumer
                        .events
                        .send(Event::ServerShutdown(done))
                        .is_ok()
                        .then_some(receipt)
                })
                .collect()
        };
        let _ = tokio::time::timeout(wait, futures::future::join_all(receipts)).await;
    }

    /// A consumer was created or updated: start its task, or tell it to reload its config.
    pub fn consumer_changed(&self, handle: &Arc<StreamHandle>, consumer: &str) {
        if let Some(entry) = self.consumer(handle, consumer) {
            let _ = entry.events.send(Event::ConfigChanged);
        }
    }

    /// A reset of a consumer was applied: the leader's copy of one that delivers without
    /// Raft goes (delivery starts over from the replicated state), and its task looks again.
    pub fn consumer_reset(&self, handle: &Arc<StreamHandle>, consumer: &str) {
        if let Some(entry) = self.consumer(handle, consumer) {
            entry.activity.local.forget();
            let _ = entry.events.send(Event::ConfigChanged);
        }
    }

    /// A consumer was deleted: its waiting pull requests get `409 Consumer Deleted`.
    pub fn consumer_deleted(&self, stream: &str, consumer: &str) {
        let removed = self
            .streams
            .lock()
            .get_mut(stream)
            .and_then(|entry| entry.consumers.remove(consumer));
        if let Some(entry) = removed {
            let _ = entry.events.send(Event::Deleted);
        }
    }

    /// This node's activity record of a consumer (starting its task if needed).
    pub fn activity(&self, handle: &Arc<StreamHandle>, consumer: &str) -> Option<Arc<Activity>> {
        self.consumer(handle, consumer).map(|entry| entry.activity)
    }

    /// Hands a pull request to the consumer's task. False if the consumer does not exist.
    pub fn pull(
        &self,
        handle: &Arc<StreamHandle>,
        consumer: &str,
        reply: Bytes,
        request: Result<PullRequest, PullRequestError>,
    ) -> bool {
        let Some(entry) = self.consumer(handle, consumer) else {
            return false;
        };
        entry.activity.touch(super::now_nanos());
        // What this node's ingest queued before the request: a `no_wait` request must see it.
        let after_publishes = handle.ingest().mark();
        let pull = Event::Pull {
            reply,
            request,
            after_publishes,
        };
        entry.events.send(pull).is_ok()
    }

    /// Waits (bounded) until the consumer's task, if it runs here, has sent every message
    /// the consumer's state counted as delivered when this was called. A `CONSUMER.INFO`
    /// read before it and answered after it never reports as delivered (`num_pending` 0) a
    /// message the client has not been sent yet, as nats-server, which sends before it
    /// answers; nats-py's key-value watcher reads an empty bucket otherwise. The task answers
    /// between two deliveries, and sends each whole right after its proposal applied.
    pub async fn sent_delivered(&self, handle: &Arc<StreamHandle>, consumer: &str) {
        let entry = self
            .streams
            .lock()
            .get(handle.name())
            .filter(|entry| Arc::ptr_eq(&entry.handle, handle))
            .and_then(|entry| entry.consumers.get(consumer).cloned());
        let Some(entry) = entry else {
            return; // no task here: nothing on its way
        };
        let (done, sent) = tokio::sync::oneshot::channel();
        if entry.events.send(Event::Sent(done)).is_ok() {
            let _ = tokio::time::timeout(SENT_BOUND, sent).await;
        }
    }

    /// `CONSUMER.UNPIN`: the consumer's task drops its pin. False if the consumer does not
    /// exist.
    pub fn unpin(&self, handle: &Arc<StreamHandle>, consumer: &str) -> bool {
        let Some(entry) = self.consumer(handle, consumer) else {
            return false;
        };
        entry.events.send(Event::Unpin).is_ok()
    }

    /// Unsubscribes every stream's ack and flow-control subjects (tasks end with the
    /// server's shutdown token).
    pub fn shutdown(&self) {
        let subscriptions: Vec<Arc<Subscription>> = self
            .streams
            .lock()
            .values_mut()
            .flat_map(|entry| entry.subscriptions.drain(..))
            .collect();
        self.unsubscribe(&subscriptions);
    }

    fn is_attached(&self, handle: &Arc<StreamHandle>) -> bool {
        self.streams
            .lock()
            .get(handle.name())
            .is_some_and(|entry| Arc::ptr_eq(&entry.handle, handle))
    }

    /// Subscribes `stream`'s ack and flow-control subjects. No lock of ours is held.
    fn subscribe_replies(&self, stream: &str) -> Vec<Arc<Subscription>> {
        let router = &self.shared().router;
        stream_reply_subjects(stream)
            .iter()
            .map(|subject| router.subscribe_internal(subject, None, self.inbox.clone()))
            .collect()
    }

    fn unsubscribe(&self, subscriptions: &[Arc<Subscription>]) {
        for sub in subscriptions {
            self.shared().router.unsubscribe(sub);
        }
    }

    /// A removed stream entry: its subscriptions go, its consumers' tasks get `event`.
    fn retire(&self, entry: StreamEntry, event: impl Fn() -> Event) {
        self.unsubscribe(&entry.subscriptions);
        for consumer in entry.consumers.into_values() {
            let _ = consumer.events.send(event());
        }
    }

    /// The consumer's entry, creating it (and spawning its task) when the consumer exists
    /// in the stream's state. Attaches the stream if nobody did yet.
    fn consumer(&self, handle: &Arc<StreamHandle>, consumer: &str) -> Option<ConsumerEntry> {
        let exists = handle
            .view()
            .read(|group| group.consumer(consumer).is_some());
        let mut streams = self.streams.lock();
        let attached = streams
            .get(handle.name())
            .is_some_and(|entry| Arc::ptr_eq(&entry.handle, handle));
        if !attached {
            drop(streams);
            if !exists {
                return None;
            }
            self.attach_stream(handle);
            streams = self.streams.lock();
        }
        let entry = streams.get_mut(handle.name())?;
        if let Some(existing) = entry.consumers.get(consumer) {
            if !existing.events.is_closed() {
                return Some(existing.clone());
            }
        }
        if !exists {
            entry.consumers.remove(consumer);
            return None;
        }
        let (events, incoming) = mpsc::unbounded_channel();
        let created = ConsumerEntry {
            events,
            activity: Arc::new(Activity::new(super::now_nanos())),
        };
        entry.consumers.insert(consumer.to_owned(), created.clone());
        let me = self.me.upgrade()?;
        let shared = self.shared().clone();
        shared.tasks.spawn(task::run(
            me,
            handle.clone(),
            consumer.to_owned(),
            created.activity.clone(),
            incoming,
        ));
        Some(created)
    }

    /// Forgets a consumer whose task ended on its own (gone, inactive), unless a newer
    /// task took its place.
    fn forget(&self, stream: &str, consumer: &str, activity: &Arc<Activity>) {
        let mut streams = self.streams.lock();
        if let Some(entry) = streams.get_mut(stream) {
            let same = entry
                .consumers
                .get(consumer)
                .is_some_and(|c| Arc::ptr_eq(&c.activity, activity));
            if same {
                entry.consumers.remove(consumer);
            }
        }
    }

    /// Routes one ack (or flow-control reply) to its stream's batcher or consumer's task.
    fn route_ack(&self, item: AckItem, stream: &str) {
        let mut streams = self.streams.lock();
        match streams.get_mut(stream) {
            Some(entry) => {
                let queue = entry
                    .acks
                    .get_or_insert_with(|| self.start_ack_batcher(&entry.handle));
                acks::enqueue(queue, item, stream, &self.acks_dropped)
            }
            None => tracing::debug!(stream, "ack for a stream this node does not deliver"),
        }
    }

    /// Starts `handle`'s ack batcher; returns its queue (whose drop ends it).
    fn start_ack_batcher(&self, handle: &Arc<StreamHandle>) -> QueueSender<AckItem> {
        let (queue, incoming) = queue::bounded(acks::MAX_QUEUED_ACKS);
        self.shared().tasks.spawn(acks::run(
            self.me.clone(),
            handle.clone(),
            incoming,
            self.outbox.clone(),
        ));
        queue
    }

    /// A reply to a flow-control request; `last_stream` is its `Nats-Last-Stream` header
    /// (what an `ack_policy: flow_control` consumer's receiver has stored).
    fn route_flow_control(
        &self,
        stream: &str,
        consumer: &str,
        subject: String,
        last_stream: Option<u64>,
    ) {
        let streams = self.streams.lock();
        if let Some(entry) = streams.get(stream).and_then(|s| s.consumers.get(consumer)) {
            let _ = entry.events.send(Event::FlowControlReply {
                subject,
                last_stream,
            });
        }
    }

    /// Acks dropped since start because their stream's ack queue was full.
    pub fn acks_dropped(&self) -> u64 {
        self.acks_dropped.total()
    }

    /// Where deliveries and statuses are sent from (the API answers pull requests it cannot
    /// hand over with it).
    pub fn outbox(&self) -> &Outbox {
        &self.outbox
    }
}
