//! A subscription: which client, which sid, which subject and queue group, and its
//! auto-unsubscribe budget.
//!
//! Shared (`Arc`) between the router's trie, the owning session's sid map and any match
//! cache holding it; the `removed` flag makes removal idempotent from all of them.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

use super::client::ClientHandle;
use super::message::Message;

/// A server component that subscribes like a client (JetStream's API, stream subjects, acks).
/// `receive` runs on the publisher's task: it must not block, only hand the message on.
pub trait InternalSubscriber: Send + Sync + fmt::Debug {
    /// Returns false if the message could not be taken (the component is gone).
    fn receive(&self, msg: &Message) -> bool;
    /// [`receive`](Self::receive) of a message another node forwarded over its route (its
    /// publisher is connected there). Only JetStream's API tells the two apart: a request
    /// published here is the one this node may have to pass on (`jetstream::api::relay`).
    fn receive_from_peer(&self, msg: &Message) -> bool {
        self.receive(msg)
    }
}

/// Another node of the cluster, standing in for its interest (see `cluster::route`). Its
/// subscriptions are never propagated further and never counted as this node's.
pub trait RemoteSubscriber: Send + Sync + fmt::Debug {
    /// The node the messages go to.
    fn peer(&self) -> u64;
    /// Whether [`forward`](Self::forward) reaches the peer now (its route is open).
    fn is_up(&self) -> bool;
    /// Queues `msg` for the peer, which delivers it to its local plain subscriptions and to
    /// one local member of each of `queues` — matching them by `route` if given, else by the
    /// message's subject. Runs on the publisher's task: never blocks.
    fn forward(&self, msg: &Message, queues: &[Bytes], route: Option<&Bytes>) -> Forwarded;
    /// Wakes the route's writer after `forward` asked for it (once per batch).
    fn wake(&self);
}

/// What forwarding a message to a peer asks of the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Forwarded {
    /// The peer will get it, or dropped it only because its route is backed up (counted there):
    /// either way the message found a receiver (no 503 for requests).
    pub delivered: bool,
    /// The route's queue was empty: its writer must be woken.
    pub wake: bool,
}

/// Who receives a subscription's messages.
#[derive(Debug, Clone)]
pub enum Subscriber {
    Client(Arc<ClientHandle>),
    Internal(Arc<dyn InternalSubscriber>),
    /// Interest of another node; the message is forwarded over the route to it.
    Remote(Arc<dyn RemoteSubscriber>),
}

#[derive(Debug)]
pub struct Subscription {
    pub subscriber: Subscriber,
    pub subject: Bytes,
    pub queue: Option<Bytes>,
    pub sid: Bytes,
    /// `UNSUB <sid> <max>`: total deliveries after which the subscription ends; 0 = none.
    max: AtomicU64,
    delivered: AtomicU64,
    removed: AtomicBool,
}

/// Whether a message may be delivered on a subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    Deliver,
    /// Deliver, and this is the last one: the caller removes the subscription.
    DeliverLast,
    Skip,
}

impl Subscription {
    pub fn new(subscriber: Subscriber, subject: Bytes, queue: Option<Bytes>, sid: Bytes) -> Self {
        Subscription {
            subscriber,
            subject,
            queue,
            sid,
            max: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            removed: AtomicBool::new(false),
        }
    }

    /// The owning client's id; `None` for internal subscriptions.
    pub fn client_id(&self) -> Option<u64> {
        match &self.subscriber {
            Subscriber::Client(client) => Some(client.id),
            Subscriber::Internal(_) | Subscriber::Remote(_) => None,
        }
    }

    /// The peer a remote subscription stands for; `None` for this node's own.
    pub fn remote_peer(&self) -> Option<u64> {
        match &self.subscriber {
            Subscriber::Remote(remote) => Some(remote.peer()),
            _ => None,
        }
    }

    pub fn is_remote(&self) -> bool {
        matches!(self.subscriber, Subscriber::Remote(_))
    }

    pub fn is_removed(&self) -> bool {
        self.removed.load(Ordering::Acquire)
    }

    /// Marks the subscription removed; true only for the first caller.
    pub fn mark_removed(&self) -> bool {
        !self.removed.swap(true, Ordering::AcqRel)
    }

    /// Sets the auto-unsubscribe limit. Returns false if `max` deliveries already happened,
    /// in which case the caller removes the subscription now.
    pub fn limit_to(&self, max: u64) -> bool {
        self.max.store(max, Ordering::Release);
        self.delivered.load(Ordering::Acquire) < max
    }

    /// Counts one delivery against the limit.
    pub fn claim(&self) -> Claim {
        if self.is_removed() {
            return Claim::Skip;
        }
        let max = self.max.load(Ordering::Acquire);
        let delivered = self.delivered.fetch_add(1, Ordering::AcqRel) + 1;
        match max {
            0 => Claim::Deliver,
            max if delivered < max => Claim::Deliver,
            max if delivered == max => Claim::DeliverLast,
            _ => Claim::Skip,
        }
    }
}
