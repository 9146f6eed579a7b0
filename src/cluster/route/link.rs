//! The outbound half of a route to one peer (`PeerLink`): its bounded FIFO of interest frames
//! and messages, batching, and the request stream that carries them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::*;

/// The outbound link to one peer: what this node sends it, and the remote subscriber its
/// interest is installed with here.
#[derive(Debug)]
pub(crate) struct PeerLink {
    pub(super) peer: u64,
    pub(super) queue: Mutex<Outbound>,
    pub(super) wake_writer: Notify,
    /// The peer opened a route to this node, so it is up: an outbound route waiting out its
    /// reconnect backoff tries at once (a restarted peer's interest arrives over its inbound
    /// route, and until the outbound one is back nothing can be forwarded to it).
    pub(super) peer_heard: Notify,
    pub(super) started: AtomicBool,
    pub(super) dropped: AtomicU64,
    /// Traffic with this peer, as nats-server's `/routez` counts it (messages and their
    /// header + payload bytes): queued to it here, delivered from it by the inbound stream.
    pub(super) traffic: Traffic,
}

/// Message counters of one route, both ways.
#[derive(Debug, Default)]
pub(crate) struct Traffic {
    pub(super) in_msgs: AtomicU64,
    pub(super) in_bytes: AtomicU64,
    pub(super) out_msgs: AtomicU64,
    pub(super) out_bytes: AtomicU64,
}

impl Traffic {
    pub(super) fn count_in(&self, msg: &Message) {
        self.in_msgs.fetch_add(1, Ordering::Relaxed);
        self.in_bytes
            .fetch_add(msg.size() as u64, Ordering::Relaxed);
    }

    fn count_out(&self, msg: &Message) {
        self.out_msgs.fetch_add(1, Ordering::Relaxed);
        self.out_bytes
            .fetch_add(msg.size() as u64, Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub(super) struct Outbound {
    /// A stream is open (or opening): changes and messages are queued. While false nothing
    /// is, since the next stream starts from a snapshot.
    pub(super) connected: bool,
    pub(super) frames: VecDeque<Outgoing>,
    /// Bytes of queued messages (interest frames are not counted: they are never dropped).
    pub(super) bytes: usize,
}

#[derive(Debug)]
pub(super) enum Outgoing {
    Open(u64),
    Interest(Interest, bool),
    /// A message, the queue groups it is for, and the subject the receiver matches it by.
    Message(Message, Vec<Bytes>, Option<Bytes>),
}

impl Outgoing {
    pub(super) fn cost(&self) -> usize {
        match self {
            Outgoing::Open(_) => FRAME_OVERHEAD,
            Outgoing::Interest(interest, _) => {
                FRAME_OVERHEAD
                    + interest.subject.len()
                    + interest.queue.as_ref().map_or(0, Bytes::len)
            }
            Outgoing::Message(msg, queues, route) => {
                message_cost(msg, queues) + route.as_ref().map_or(0, Bytes::len)
            }
        }
    }

    pub(super) fn into_frame(self) -> proto::RouteFrame {
        let frame = match self {
            Outgoing::Open(node_id) => Frame::Open(proto::RouteOpen { node_id }),
            Outgoing::Interest(interest, present) => {
                let interest = proto::Interest {
                    subject: String::from_utf8_lossy(&interest.subject).into_owned(),
                    queue: interest
                        .queue
                        .as_deref()
                        .map(|q| String::from_utf8_lossy(q).into_owned())
                        .unwrap_or_default(),
                };
                if present {
                    Frame::Subscribe(interest)
                } else {
                    Frame::Unsubscribe(interest)
                }
            }
            Outgoing::Message(msg, queues, route) => Frame::Message(proto::RoutedMessage {
                has_route: route.is_some(),
                route: route.unwrap_or_default().into(),
                subject: msg.subject.into(),
                has_reply: msg.reply.is_some(),
                reply: msg.reply.unwrap_or_default().into(),
                has_headers: msg.headers.is_some(),
                headers: msg.headers.unwrap_or_default().into(),
                payload: msg.payload.into(),
                queues: queues.into_iter().map(Into::into).collect(),
            }),
        };
        proto::RouteFrame { frame: Some(frame) }
    }
}

pub(super) fn message_cost(msg: &Message, queues: &[Bytes]) -> usize {
    FRAME_OVERHEAD
        + msg.subject.len()
        + msg.reply.as_ref().map_or(0, Bytes::len)
        + msg.size()
        + queues.iter().map(Bytes::len).sum::<usize>()
}

impl PeerLink {
    pub(super) fn new(peer: u64) -> Self {
        PeerLink {
            peer,
            queue: Mutex::new(Outbound::default()),
            wake_writer: Notify::new(),
            peer_heard: Notify::new(),
            started: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
            traffic: Traffic::default(),
        }
    }

    /// Starts a new stream's queue: RouteOpen, then the snapshot. Called with the router's
    /// interest lock held.
    pub(super) fn open(&self, local_node: u64, interest: &mut dyn Iterator<Item = &Interest>) {
        let mut queue = self.queue.lock();
        queue.frames.clear();
        queue.bytes = 0;
        queue.connected = true;
        queue.frames.push_back(Outgoing::Open(local_node));
        for interest in interest {
            queue
                .frames
                .push_back(Outgoing::Interest(interest.clone(), true));
        }
        drop(queue);
        self.wake_writer.notify_one();
    }

    /// The stream ended: drop what it did not send and queue nothing until the next one.
    pub(super) fn close(&self) {
        let mut queue = self.queue.lock();
        queue.connected = false;
        queue.frames.clear();
        queue.bytes = 0;
    }

    pub(super) fn push_interest(&self, interest: &Interest, present: bool) {
        let mut queue = self.queue.lock();
        if !queue.connected {
            return;
        }
        let was_empty = queue.frames.is_empty();
        queue
            .frames
            .push_back(Outgoing::Interest(interest.clone(), present));
        drop(queue);
        if was_empty {
            self.wake_writer.notify_one();
        }
    }

    /// The next batch for the stream: queued frames up to about [`BATCH_BYTES`].
    pub(super) fn take_batch(&self) -> Option<proto::RouteBatch> {
        let mut taken = Vec::new();
        {
            let mut queue = self.queue.lock();
            let mut size = 0;
            while size < BATCH_BYTES {
                let Some(frame) = queue.frames.pop_front() else {
                    break;
                };
                let cost = frame.cost();
                if let Outgoing::Message(..) = frame {
                    queue.bytes -= cost;
                }
                size += cost;
                taken.push(frame);
            }
        }
        if taken.is_empty() {
            return None;
        }
        Some(proto::RouteBatch {
            frames: taken.into_iter().map(Outgoing::into_frame).collect(),
        })
    }
}

impl RemoteSubscriber for PeerLink {
    fn peer(&self) -> u64 {
        self.peer
    }

    fn is_up(&self) -> bool {
        self.queue.lock().connected
    }

    fn forward(&self, msg: &Message, queues: &[Bytes], route: Option<&Bytes>) -> Forwarded {
        let cost = message_cost(msg, queues) + route.map_or(0, Bytes::len);
        let mut queue = self.queue.lock();
        if !queue.connected {
            return Forwarded::default();
        }
        if queue.bytes + cost > MAX_QUEUED_BYTES {
            drop(queue);
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Forwarded {
                delivered: true,
                wake: false,
            };
        }
        let wake = queue.frames.is_empty();
        queue.bytes += cost;
        queue.frames.push_back(Outgoing::Message(
            msg.clone(),
            queues.to_vec(),
            route.cloned(),
        ));
        drop(queue);
        self.traffic.count_out(msg);
        Forwarded {
            delivered: true,
            wake,
        }
    }

    fn wake(&self) {
        self.wake_writer.notify_one();
    }
}

/// The request body of one outbound stream: batches as they are queued, until shutdown.
pub(super) fn batches(
    link: Arc<PeerLink>,
    shutdown: CancellationToken,
) -> impl futures::Stream<Item = proto::RouteBatch> + Send + 'static {
    futures::stream::unfold((link, shutdown), |(link, shutdown)| async move {
        loop {
            // `notify_one` leaves a permit when nobody waits, so no wake-up is lost between
            // the check and the wait.
            if let Some(batch) = link.take_batch() {
                return Some((batch, (link, shutdown)));
            }
            tokio::select! {
                _ = link.wake_writer.notified() => {}
                _ = shutdown.cancelled() => return None,
            }
        }
    })
}
