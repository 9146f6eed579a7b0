//! The router: every subscription on this node, and the question "who gets a message
//! published on this subject?".
//!
//! One `Router` per node. The trie sits behind a read-write lock (no `.await` is ever held
//! inside it); readers mostly avoid it through their per-connection `MatchCache`, which the
//! `generation` counter invalidates on every subscribe and unsubscribe.
//!
//! In a cluster the trie also holds the interest of the other nodes, as subscriptions whose
//! subscriber is [`Subscriber::Remote`]: matching, the match cache and queue-group member
//! choice treat them like any other. This node's own interest (client and internal
//! subscriptions) is counted per (subject, queue); the first subscription of a key and the
//! removal of its last are reported to the [`InterestListener`] (the routes), in order.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

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

    /// Whether a message would find a receiver now: a subscription on this node, or one
    /// whose route to its node is up (interest can arrive before the route back is open).
    pub fn has_receiver(&self) -> bool {
        let up = |sub: &Arc<Subscription>| match &sub.subscriber {
            Subscriber::Remote(link) => link.is_up(),
            _ => true,
        };
        self.plain.iter().any(up) || self.queue_groups.iter().flatten().any(up)
    }
}

/// One unit of interest as peers see it: a subject pattern and an optional queue group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Interest {
    pub subject: Bytes,
    pub queue: Option<Bytes>,
}

impl Interest {
    fn of(sub: &Subscription) -> Self {
        Interest {
            subject: sub.subject.clone(),
            queue: sub.queue.clone(),
        }
    }
}

/// Told when this node's interest in a (subject, queue) appears or disappears. Called with
/// the router's interest lock held, in the order the changes happen: it must only queue work
/// (never block, never call back into the router).
pub trait InterestListener: Send + Sync + fmt::Debug {
    fn interest_changed(&self, interest: &Interest, present: bool);
}

/// This node's own interest, refcounted per (subject, queue).
#[derive(Debug, Default)]
struct LocalInterest {
    counts: HashMap<Interest, usize>,
    listener: Option<Arc<dyn InterestListener>>,
}

impl LocalInterest {
    fn add(&mut self, sub: &Subscription) {
        let key = Interest::of(sub);
        let count = self.counts.entry(key).or_insert(0);
        *count += 1;
        if *count == 1 {
            if let Some(listener) = &self.listener {
                listener.interest_changed(&Interest::of(sub), true);
            }
        }
    }

    fn remove(&mut self, sub: &Subscription) {
        let key = Interest::of(sub);
        let Some(count) = self.counts.get_mut(&key) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.counts.remove(&key);
            if let Some(listener) = &self.listener {
                listener.interest_changed(&key, false);
            }
        }
    }
}

#[derive(Debug)]
pub struct Router {
    /// Lock order: `interest` before `trie`; the listener's own locks after `interest`.
    interest: Mutex<LocalInterest>,
    trie: RwLock<SubjectTrie<Subscription>>,
    /// How many of the trie's subscriptions are remote.
    remote_subs: AtomicUsize,
    generation: AtomicU64,
    /// Bumped by every subscription added (local or remote): a push consumer without
    /// interest waits on it instead of polling for its deliver subject.
    added: tokio::sync::watch::Sender<()>,
    stats: Arc<ServerStats>,
}

impl Router {
    pub fn new(stats: Arc<ServerStats>) -> Self {
        Router {
            interest: Mutex::new(LocalInterest::default()),
            trie: RwLock::new(SubjectTrie::default()),
            remote_subs: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            added: tokio::sync::watch::Sender::new(()),
            stats,
        }
    }

    /// The current generation; a match computed after reading it is valid until it changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub fn subscribe(&self, sub: Arc<Subscription>) {
        if sub.is_remote() {
            self.insert(sub);
            self.remote_subs.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // The interest lock spans the trie change, so listeners see changes in trie order. The
        // trie first: a peer told of the interest may forward a message at once, which must
        // find the subscription here (a request forwarded within ~100 µs of an API
        // subscription's announcement was dropped, `jetstream/api/relay.rs`).
        let mut interest = self.interest.lock();
        self.insert(sub.clone());
        interest.add(&sub);
        ServerStats::add(&self.stats.subscriptions, 1);
    }

    fn insert(&self, sub: Arc<Subscription>) {
        let mut trie = self.trie.write();
        trie.insert(&sub.subject.clone(), sub);
        self.generation.fetch_add(1, Ordering::AcqRel);
        drop(trie);
        self.added.send_replace(());
    }

    /// Changes whenever a subscription is added. Mark it seen before asking
    /// [`Router::matches`], then wait for the change: no subscription is missed in between.
    pub fn subscriptions_added(&self) -> tokio::sync::watch::Receiver<()> {
        self.added.subscribe()
    }

    /// Removes a subscription; safe to call more than once and from any connection.
    pub fn unsubscribe(&self, sub: &Arc<Subscription>) {
        if !sub.mark_removed() {
            return;
        }
        if sub.is_remote() {
            self.remove(sub);
            self.remote_subs.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        let mut interest = self.interest.lock();
        self.remove(sub);
        interest.remove(sub);
        self.stats.subscriptions.fetch_sub(1, Ordering::Relaxed);
    }

    fn remove(&self, sub: &Arc<Subscription>) {
        let mut trie = self.trie.write();
        trie.remove(&sub.subject, sub);
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Installs the listener told about every later change of this node's interest.
    pub fn set_interest_listener(&self, listener: Arc<dyn InterestListener>) {
        self.interest.lock().listener = Some(listener);
    }

    /// Runs `f` on a snapshot of this node's interest, with the interest lock held: no change
    /// reaches the listener between the snapshot and `f`'s return, so what `f` queues precedes
    /// every later change.
    pub fn with_local_interest<R>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = &Interest>) -> R,
    ) -> R {
        let interest = self.interest.lock();
        f(&mut interest.counts.keys())
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

    /// The node's traffic counters, which deliveries add to.
    pub(super) fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// This node's own subscriptions (remote interest is not counted).
    pub fn subscription_count(&self) -> usize {
        let total = self.trie.read().len();
        total.saturating_sub(self.remote_subs.load(Ordering::Relaxed))
    }

    /// Subscriptions standing for other nodes' interest.
    pub fn remote_subscription_count(&self) -> usize {
        self.remote_subs.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::message::Message;

    #[derive(Debug, Default)]
    struct Recorder(Mutex<Vec<String>>);

    impl InterestListener for Recorder {
        fn interest_changed(&self, interest: &Interest, present: bool) {
            let queue = interest.queue.as_deref().unwrap_or_default();
            self.0.lock().push(format!(
                "{} {} {}",
                if present { "+" } else { "-" },
                String::from_utf8_lossy(&interest.subject),
                String::from_utf8_lossy(queue)
            ));
        }
    }

    #[derive(Debug)]
    struct Sink;

    impl InternalSubscriber for Sink {
        fn receive(&self, _: &Message) -> bool {
            true
        }
    }

    #[derive(Debug)]
    struct Peer;

    impl super::super::subscription::RemoteSubscriber for Peer {
        fn peer(&self) -> u64 {
            7
        }
        fn is_up(&self) -> bool {
            false
        }
        fn forward(
            &self,
            _: &Message,
            _: &[Bytes],
            _: Option<&Bytes>,
        ) -> super::super::subscription::Forwarded {
            Default::default()
        }
        fn wake(&self) {}
    }

    #[test]
    fn local_interest_is_refcounted_per_subject_and_queue() {
        let router = Router::new(Arc::new(ServerStats::default()));
        let recorder = Arc::new(Recorder::default());
        router.set_interest_listener(recorder.clone());
        let a1 = router.subscribe_internal("a.*", None, Arc::new(Sink));
        let a2 = router.subscribe_internal("a.*", None, Arc::new(Sink));
        let q1 = router.subscribe_internal("a.*", Some("q"), Arc::new(Sink));
        let q2 = router.subscribe_internal("a.*", Some("q"), Arc::new(Sink));
        router.unsubscribe(&a1);
        router.unsubscribe(&a1); // idempotent
        router.unsubscribe(&q1);
        router.unsubscribe(&a2);
        router.unsubscribe(&q2);
        assert_eq!(
            *recorder.0.lock(),
            ["+ a.* ", "+ a.* q", "- a.* ", "- a.* q"]
        );
        router.with_local_interest(|interest| assert_eq!(interest.count(), 0));
    }

    /// A listener that, told of an interest, looks it up in the router as a peer's forwarded
    /// message would.
    #[derive(Debug, Default)]
    struct Matcher {
        router: std::sync::OnceLock<std::sync::Weak<Router>>,
        found: Mutex<Vec<bool>>,
    }

    impl InterestListener for Matcher {
        fn interest_changed(&self, interest: &Interest, present: bool) {
            let router = self
                .router
                .get()
                .and_then(std::sync::Weak::upgrade)
                .unwrap();
            let found = !router.matches(&interest.subject).is_empty();
            self.found.lock().push(found == present);
        }
    }

    #[test]
    fn an_interest_is_announced_once_a_message_would_find_it() {
        let router = Arc::new(Router::new(Arc::new(ServerStats::default())));
        let matcher = Arc::new(Matcher::default());
        matcher.router.set(Arc::downgrade(&router)).unwrap();
        router.set_interest_listener(matcher.clone());
        let sub = router.subscribe_internal("api.>", None, Arc::new(Sink));
        router.unsubscribe(&sub);
        assert_eq!(*matcher.found.lock(), [true, true]);
    }

    #[test]
    fn remote_interest_is_matched_but_neither_propagated_nor_counted() {
        let stats = Arc::new(ServerStats::default());
        let router = Router::new(stats.clone());
        let recorder = Arc::new(Recorder::default());
        router.set_interest_listener(recorder.clone());
        let local = router.subscribe_internal("x", None, Arc::new(Sink));
        let remote = Arc::new(Subscription::new(
            Subscriber::Remote(Arc::new(Peer)),
            Bytes::from_static(b"x"),
            None,
            Bytes::from_static(b"route"),
        ));
        let generation = router.generation();
        router.subscribe(remote.clone());
        assert_ne!(
            router.generation(),
            generation,
            "match caches see remote changes"
        );
        assert_eq!(router.matches(&Bytes::from_static(b"x")).plain.len(), 2);
        assert_eq!(router.subscription_count(), 1);
        assert_eq!(router.remote_subscription_count(), 1);
        assert_eq!(stats.subscriptions.load(Ordering::Relaxed), 1);
        router.with_local_interest(|interest| assert_eq!(interest.count(), 1));
        router.unsubscribe(&remote);
        router.unsubscribe(&local);
        assert_eq!(*recorder.0.lock(), ["+ x ", "- x "]);
        assert_eq!(router.subscription_count(), 0);
        assert_eq!(router.remote_subscription_count(), 0);
    }
}
