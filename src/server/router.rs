//! The router: every subscription on this node, and the question "who gets a message
//! published on this subject?".
//!
//! One `Router` per node. The trie sits behind a read-write lock (no `.await` is ever held
//! inside it); readers mostly avoid it through their per-connection `MatchCache`, which the
//! `generation` counter invalidates on every subscribe and unsubscribe.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::RwLock;

use super::dispatch::Dispatch;
use super::message::Message;
use super::stats::ServerStats;
use super::subscription::{InternalSubscriber, Subscriber, Subscription};
use crate::subject::SubjectTrie;

/// Everyone a subject reaches: plain subscriptions each get a copy; each queue group gets
/// one copy, delivered to one of its members.
#[derive(Debug, Default)]
pub struct Matches {
    pub plain: Vec<Arc<Subscription>>,
    pub queue_groups: Vec<Vec<Arc<Subscription>>>,
}

impl Matches {
    pub fn is_empty(&self) -> bool {
        self.plain.is_empty() && self.queue_groups.is_empty()
    }
}

#[derive(Debug)]
pub struct Router {
    trie: RwLock<SubjectTrie<Subscription>>,
    generation: AtomicU64,
    stats: Arc<ServerStats>,
}

impl Router {
    pub fn new(stats: Arc<ServerStats>) -> Self {
        Router {
            trie: RwLock::new(SubjectTrie::default()),
            generation: AtomicU64::new(0),
            stats,
        }
    }

    /// The current generation; a match computed after reading it is valid until it changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn subscribe(&self, sub: Arc<Subscription>) {
        let mut trie = self.trie.write();
        trie.insert(&sub.subject.clone(), sub);
        self.generation.fetch_add(1, Ordering::AcqRel);
        ServerStats::add(&self.stats.subscriptions, 1);
    }

    /// Removes a subscription; safe to call more than once and from any connection.
    pub fn unsubscribe(&self, sub: &Arc<Subscription>) {
        if !sub.mark_removed() {
            return;
        }
        let mut trie = self.trie.write();
        trie.remove(&sub.subject, sub);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.stats.subscriptions.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn matches(&self, subject: &Bytes) -> Matches {
        let mut matches = Matches::default();
        self.trie
            .read()
            .for_each_match(subject, |sub| match &sub.queue {
                None => matches.plain.push(sub.clone()),
                Some(queue) => {
                    let group = matches
                        .queue_groups
                        .iter_mut()
                        .find(|group| group[0].queue.as_ref() == Some(queue));
                    match group {
                        Some(group) => group.push(sub.clone()),
                        None => matches.queue_groups.push(vec![sub.clone()]),
                    }
                }
            });
        matches
    }

    /// Subscribes a server component; remove it with [`Router::unsubscribe`].
    pub fn subscribe_internal(
        &self,
        subject: &str,
        queue: Option<&str>,
        handler: Arc<dyn InternalSubscriber>,
    ) -> Arc<Subscription> {
        let sub = Arc::new(Subscription::new(
            Subscriber::Internal(handler),
            Bytes::copy_from_slice(subject.as_bytes()),
            queue.map(|q| Bytes::copy_from_slice(q.as_bytes())),
            Bytes::from_static(b"internal"),
        ));
        self.subscribe(sub.clone());
        sub
    }

    /// Publishes a server-originated message (replies, deliveries). Returns whether anyone
    /// received it.
    pub fn publish(&self, msg: &Message) -> bool {
        let matches = self.matches(&msg.subject);
        let mut dispatch = Dispatch::default();
        let delivered = dispatch.route(self, &matches, msg, None);
        dispatch.wake_all(&self.stats);
        delivered
    }

    pub fn subscription_count(&self) -> usize {
        self.trie.read().len()
    }
}
