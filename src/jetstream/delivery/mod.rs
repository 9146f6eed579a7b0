//! Delivery: getting stored messages to consumers and their acknowledgements back.
//!
//! * `registry` (this file) — `DeliveryRegistry`, one per node: the streams this node
//!   delivers for, one delivery task per consumer (`task.rs`), one ack batcher per stream
//!   behind a bounded queue (`acks.rs`), and the internal subscriptions on `$JS.ACK.>` and
//!   `$JS.FC.>`.
//! * `task.rs` / `deliver.rs` — a consumer's delivery task: its loop and timers, and how
//!   it proposes `DeliverNext` and sends the result.
//! * `pull.rs` / `waiting.rs` — pull requests (`CONSUMER.MSG.NEXT`) and their queue.
//! * `push.rs` — push consumers: deliver subject, flow control, idle heartbeats.
//! * `outbox.rs` — status messages, ack subjects, routing by inbox with the stored subject.
//! * `info.rs` — ConsumerInfo from the replicated state plus this node's activity record.
//!
//! Every delivery is a replicated `DeliverNext` command (see `jscore::consumer`); only the
//! waiting pull requests, timers and activity times live here, in the leader's memory.
//!
//! Locking: `streams` is a small map behind a std-style mutex, never held across an
//! `.await` nor while publishing (a publish can re-enter through the ack subscriber).

mod acks;
mod deliver;
pub mod info;
pub mod outbox;
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
use super::service::JetStream;
use super::stream::StreamHandle;
use crate::jsapi::{ApiRequest, PullRequest, PullRequestError};
use crate::server::message::Message;
use crate::server::subscription::Subscription;
use crate::server::ServerShared;
use acks::AckItem;
use outbox::Outbox;
use task::Event;

/// Subjects every delivered message's ack reply falls under.
const ACK_SUBJECTS: &str = "$JS.ACK.>";
/// Subjects of flow-control replies.
const FLOW_CONTROL_SUBJECTS: &str = "$JS.FC.>";

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
    /// Bounded (`acks::MAX_QUEUED_ACKS`); dropping it ends the stream's ack batcher.
    acks: QueueSender<AckItem>,
}

/// One per node (held by `JetStream`).
#[derive(Debug)]
pub struct DeliveryRegistry {
    me: Weak<DeliveryRegistry>,
    outbox: Outbox,
    streams: Mutex<HashMap<String, StreamEntry>>,
    subscriptions: Mutex<Vec<Arc<Subscription>>>,
    /// Acks dropped because their stream's ack queue was full.
    acks_dropped: Dropped,
}

impl DeliveryRegistry {
    /// Creates the registry and subscribes `$JS.ACK.>` and `$JS.FC.>`. Call from inside the
    /// runtime; tasks run on `shared.tasks` and stop with `shared.shutdown`.
    pub fn new(shared: Arc<ServerShared>) -> Arc<DeliveryRegistry> {
        let registry = Arc::new_cyclic(|me| DeliveryRegistry {
            me: me.clone(),
            outbox: Outbox::new(shared.clone()),
            streams: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(Vec::new()),
            acks_dropped: Dropped::default(),
        });
        let inbox = Arc::new(acks::AckInbox::new(Arc::downgrade(&registry)));
        let subscriptions = vec![
            shared
                .router
                .subscribe_internal(ACK_SUBJECTS, None, inbox.clone()),
            shared
                .router
                .subscribe_internal(FLOW_CONTROL_SUBJECTS, None, inbox),
        ];
        *registry.subscriptions.lock() = subscriptions;
        registry
    }

    fn shared(&self) -> &Arc<ServerShared> {
        self.outbox.shared()
    }

    /// The server name ConsumerInfo reports as `cluster.leader`.
    pub fn server_name(&self) -> &str {
        &self.shared().identity.server_name
    }

    /// A stream group runs on this node (created, or loaded at start-up): start its ack
    /// batcher and a delivery task for each consumer it has. Idempotent; a different handle
    /// under the same name (deleted and re-created) replaces the old one.
    pub fn attach_stream(&self, handle: &Arc<StreamHandle>) {
        let names: Vec<String> = handle
            .view()
            .read(|group| group.consumer_names().map(str::to_owned).collect());
        {
            let mut streams = self.streams.lock();
            let current = streams.get(handle.name());
            if current.is_some_and(|entry| Arc::ptr_eq(&entry.handle, handle)) {
                drop(streams);
                for name in names {
                    self.consumer(handle, &name);
                }
                return;
            }
            if let Some(old) = streams.remove(handle.name()) {
                close_consumers(old);
            }
            let (acks, incoming) = queue::bounded(acks::MAX_QUEUED_ACKS);
            let shared = self.shared().clone();
            shared.tasks.spawn(acks::run(
                self.me.clone(),
                handle.clone(),
                incoming,
                self.outbox.clone(),
            ));
            streams.insert(
                handle.name().to_owned(),
                StreamEntry {
                    handle: handle.clone(),
                    consumers: HashMap::new(),
                    acks,
                },
            );
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
            close_consumers(entry);
        }
    }

    /// The stream's group stopped (a fatal storage error) and is being restarted: waiting
    /// pull requests get `409 Leadership Change` and the consumers' tasks end; attaching
    /// the restarted handle starts new ones.
    pub fn leadership_lost(&self, stream: &str) {
        let removed = self.streams.lock().remove(stream);
        if let Some(entry) = removed {
            for consumer in entry.consumers.into_values() {
                let _ = consumer.events.send(Event::LeadershipChange);
            }
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
        entry.events.send(Event::Pull { reply, request }).is_ok()
    }

    /// Unsubscribes `$JS.ACK.>` and `$JS.FC.>` (tasks end with the server's shutdown token).
    pub fn shutdown(&self) {
        for sub in self.subscriptions.lock().drain(..) {
            self.shared().router.unsubscribe(&sub);
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
        let streams = self.streams.lock();
        match streams.get(stream) {
            Some(entry) => acks::enqueue(&entry.acks, item, stream, &self.acks_dropped),
            None => tracing::debug!(stream, "ack for a stream this node does not deliver"),
        }
    }

    fn route_flow_control(&self, stream: &str, consumer: &str, subject: String) {
        let streams = self.streams.lock();
        if let Some(entry) = streams.get(stream).and_then(|s| s.consumers.get(consumer)) {
            let _ = entry.events.send(Event::FlowControlReply(subject));
        }
    }

    /// Acks dropped since start because their stream's ack queue was full.
    pub fn acks_dropped(&self) -> u64 {
        self.acks_dropped.total()
    }

    fn outbox(&self) -> &Outbox {
        &self.outbox
    }
}

fn close_consumers(entry: StreamEntry) {
    for consumer in entry.consumers.into_values() {
        let _ = consumer.events.send(Event::Deleted);
    }
}

/// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` from the API dispatcher. Requests
/// without a reply subject are ignored; an unknown stream or consumer gets the `503` a
/// request nobody answers would get (nats-server has no subscription for it).
pub async fn pull_request(js: &JetStream, request: &ApiRequest, msg: &Message) {
    let ApiRequest::ConsumerMsgNext { stream, consumer } = request else {
        return;
    };
    let Some(reply) = msg.reply.clone() else {
        return;
    };
    let parsed = PullRequest::parse(&msg.payload);
    let delivered = js
        .stream(stream)
        .is_some_and(|handle| js.delivery().pull(&handle, consumer, reply.clone(), parsed));
    if !delivered {
        let subject = String::from_utf8_lossy(&msg.subject);
        js.delivery()
            .outbox()
            .status(&reply, outbox::no_responders(&subject));
    }
}
