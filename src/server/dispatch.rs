//! Delivering a routed message to its matches: each plain subscription a copy, each queue
//! group one member. The router says who gets a message; this file delivers it. Used by client
//! read loops and, through [`publish`], by the server's own publishers (replies, deliveries).
//!
//! A `Dispatch` collects the client writers that need waking, so a read loop wakes each
//! writer once per read rather than once per message.
//!
//! In a cluster, some matches are other nodes' interest ([`Subscriber::Remote`]). A message
//! goes to each such peer at most once, however many of its subscriptions match: one frame
//! that lists the queue groups whose chosen member is on that peer. Queue groups prefer this
//! node's own members, as nats-server does; another node's member is chosen only when no local
//! one can take the message. A message that came in over a route is delivered with
//! [`Dispatch::route_forwarded`], which only ever reaches this node's own subscriptions (full
//! mesh: nothing is forwarded twice).

use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;

use super::client::ClientHandle;
use super::message::Message;
use super::router::{Matches, Router};
use super::stats::ServerStats;
use super::subscription::{Claim, RemoteSubscriber, Subscriber, Subscription};

/// One peer a message is forwarded to, and the queue groups it delivers for.
#[derive(Debug)]
struct RemoteTarget {
    peer: u64,
    link: Arc<dyn RemoteSubscriber>,
    queues: Vec<Bytes>,
}

/// Publishes a server-originated message (replies, deliveries, advisories) to everyone its
/// subject reaches. Returns whether anyone received it.
pub fn publish(router: &Router, msg: &Message) -> bool {
    let matches = router.matches(&msg.subject);
    let mut dispatch = Dispatch::default();
    let delivered = dispatch.route(router, &matches, msg, None);
    dispatch.wake_all(router.stats());
    delivered
}

#[derive(Debug, Default)]
pub struct Dispatch {
    /// The peers the message being routed goes to (emptied after each message; its capacity
    /// is kept, so forwarding allocates nothing once warm).
    remote: Vec<RemoteTarget>,
    /// Routes whose writer needs waking at `wake_all`.
    remote_wake: Vec<Arc<dyn RemoteSubscriber>>,
    to_wake: Vec<Arc<ClientHandle>>,
    /// Receivers with more than half their outbound limit queued.
    backed_up: Vec<Arc<ClientHandle>>,
    /// Deliveries since the last `wake_all`, added to the node's counters there (one atomic
    /// update per batch instead of two per message).
    out_msgs: u64,
    out_bytes: u64,
    /// The subject messages are matched by when it differs from their own (see
    /// [`Dispatch::routing_by`]); forwarded with them so the receiving node matches the same.
    route_subject: Option<Bytes>,
    /// The messages come from another node's route ([`Dispatch::from_peer`]).
    from_peer: bool,
}

impl Dispatch {
    /// A dispatch of the messages a peer forwards over its route: internal subscribers get
    /// them through [`InternalSubscriber::receive_from_peer`](super::subscription::InternalSubscriber::receive_from_peer).
    pub fn from_peer() -> Self {
        Dispatch {
            from_peer: true,
            ..Dispatch::default()
        }
    }

    /// Messages routed from now on were matched by `route` rather than by their own subject
    /// (JetStream deliveries: matched by the pull request's inbox, carrying the stored
    /// subject).
    pub fn routing_by(&mut self, route: Option<Bytes>) {
        self.route_subject = route;
    }

    /// Delivers `msg` to `matches`, skipping subscriptions of client `skip_client` (a
    /// publisher with echo off). Returns whether anyone received it.
    pub fn route(
        &mut self,
        router: &Router,
        matches: &Matches,
        msg: &Message,
        skip_client: Option<u64>,
    ) -> bool {
        let mut delivered = false;
        for sub in &matches.plain {
            if let Subscriber::Remote(link) = &sub.subscriber {
                self.note_remote(sub, link, None);
            } else {
                delivered |= self.deliver(router, sub, msg, skip_client);
            }
        }
        for group in &matches.queue_groups {
            // Start at a random member; move on past members that cannot take it. As in
            // nats-server, this node's own members come first: another node's member (which
            // takes it for its node) only if no local one could.
            let start = rand::rng().random_range(0..group.len());
            let members = group.iter().cycle().skip(start).take(group.len());
            let mut remote = None;
            let mut taken = false;
            for sub in members {
                match &sub.subscriber {
                    Subscriber::Remote(link) => {
                        if remote.is_none() && !sub.is_removed() {
                            remote = Some((sub, link));
                        }
                    }
                    _ => {
                        if self.deliver(router, sub, msg, skip_client) {
                            taken = true;
                            break;
                        }
                    }
                }
            }
            if !taken {
                if let Some((sub, link)) = remote {
                    taken = self.note_remote(sub, link, sub.queue.as_ref());
                }
            }
            delivered |= taken;
        }
        if !self.remote.is_empty() {
            delivered |= self.forward_noted(msg);
        }
        delivered
    }

    /// Delivers a message forwarded by another node: every local plain subscription gets a
    /// copy, and of the queue groups the sender chose this node for (`queues`), one local
    /// member each. Remote subscriptions are skipped: a forwarded message never travels on.
    pub fn route_forwarded(
        &mut self,
        router: &Router,
        matches: &Matches,
        msg: &Message,
        queues: &[Bytes],
    ) -> bool {
        let mut delivered = false;
        for sub in matches.plain.iter().filter(|sub| !sub.is_remote()) {
            delivered |= self.deliver(router, sub, msg, None);
        }
        for queue in queues {
            let Some(group) = matches
                .queue_groups
                .iter()
                .find(|group| group[0].queue.as_ref() == Some(queue))
            else {
                continue;
            };
            let start = rand::rng().random_range(0..group.len());
            let mut members = group.iter().cycle().skip(start).take(group.len());
            delivered |=
                members.any(|sub| !sub.is_remote() && self.deliver(router, sub, msg, None));
        }
        delivered
    }

    /// Remembers that `msg` goes to `sub`'s node (once per node), for the queue group
    /// `queue` if given. Always true: the member is chosen.
    fn note_remote(
        &mut self,
        sub: &Subscription,
        link: &Arc<dyn RemoteSubscriber>,
        queue: Option<&Bytes>,
    ) -> bool {
        if sub.is_removed() {
            return false;
        }
        let peer = link.peer();
        let index = match self.remote.iter().position(|target| target.peer == peer) {
            Some(index) => index,
            None => {
                self.remote.push(RemoteTarget {
                    peer,
                    link: link.clone(),
                    queues: Vec::new(),
                });
                self.remote.len() - 1
            }
        };
        if let Some(queue) = queue {
            let queues = &mut self.remote[index].queues;
            if !queues.contains(queue) {
                queues.push(queue.clone());
            }
        }
        true
    }

    /// Sends `msg` to every noted peer, one frame each. True if any peer took it.
    fn forward_noted(&mut self, msg: &Message) -> bool {
        let mut delivered = false;
        for target in self.remote.drain(..) {
            let forwarded = target
                .link
                .forward(msg, &target.queues, self.route_subject.as_ref());
            delivered |= forwarded.delivered;
            if forwarded.wake {
                self.remote_wake.push(target.link);
            }
        }
        delivered
    }

    /// Delivers to one subscription; false if it could not take the message.
    pub fn deliver(
        &mut self,
        router: &Router,
        sub: &Arc<Subscription>,
        msg: &Message,
        skip_client: Option<u64>,
    ) -> bool {
        if skip_client.is_some() && sub.client_id() == skip_client {
            return false;
        }
        let claim = sub.claim();
        if claim == Claim::Skip {
            return false;
        }
        let taken = match &sub.subscriber {
            Subscriber::Client(client) => {
                let queued = client.queue_delivery(&sub.sid, &msg.as_delivery());
                if queued.queued {
                    self.out_msgs += 1;
                    self.out_bytes += msg.size() as u64;
                }
                if queued.wake {
                    self.to_wake.push(client.clone());
                }
                if queued.backed_up && !self.backed_up.iter().any(|c| Arc::ptr_eq(c, client)) {
                    self.backed_up.push(client.clone());
                }
                true
            }
            Subscriber::Internal(handler) if self.from_peer => handler.receive_from_peer(msg),
            Subscriber::Internal(handler) => handler.receive(msg),
            Subscriber::Remote(link) => {
                let queues = sub.queue.as_slice();
                let forwarded = link.forward(msg, queues, self.route_subject.as_ref());
                if forwarded.wake {
                    self.remote_wake.push(link.clone());
                }
                forwarded.delivered
            }
        };
        if claim == Claim::DeliverLast {
            router.unsubscribe(sub);
        }
        taken
    }

    /// Wakes every writer that received messages since the last call, and counts them.
    pub fn wake_all(&mut self, stats: &ServerStats) {
        for client in self.to_wake.drain(..) {
            client.wake();
        }
        for link in self.remote_wake.drain(..) {
            link.wake();
        }
        if self.out_msgs > 0 {
            ServerStats::add(&stats.out_msgs, self.out_msgs);
            ServerStats::add(&stats.out_bytes, self.out_bytes);
            self.out_msgs = 0;
            self.out_bytes = 0;
        }
    }

    /// Pauses (bounded by `limit` in total) while receivers are backed up, giving their
    /// writers time to drain. A receiver that stays backed up is not waited for again: it
    /// will either catch up or cross `max_pending` and be cut off as a slow consumer.
    pub async fn pause_for_backed_up(&mut self, limit: std::time::Duration) {
        if self.backed_up.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + limit;
        for client in self.backed_up.drain(..) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            client.wait_drained(left).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use parking_lot::Mutex;

    use super::*;
    use crate::server::subscription::{Forwarded, InternalSubscriber};

    /// A peer that records what it was sent.
    #[derive(Debug)]
    struct Peer {
        id: u64,
        sent: Mutex<Vec<Vec<String>>>,
        wakes: Mutex<usize>,
    }

    impl Peer {
        fn new(id: u64) -> Arc<Self> {
            Arc::new(Peer {
                id,
                sent: Mutex::new(Vec::new()),
                wakes: Mutex::new(0),
            })
        }
    }

    impl RemoteSubscriber for Peer {
        fn peer(&self) -> u64 {
            self.id
        }
        fn is_up(&self) -> bool {
            true
        }
        fn forward(&self, _: &Message, queues: &[Bytes], _: Option<&Bytes>) -> Forwarded {
            let mut sent = self.sent.lock();
            let queues = queues
                .iter()
                .map(|q| String::from_utf8_lossy(q).into_owned())
                .collect();
            sent.push(queues);
            Forwarded {
                delivered: true,
                wake: sent.len() == 1,
            }
        }
        fn wake(&self) {
            *self.wakes.lock() += 1;
        }
    }

    #[derive(Debug, Default)]
    struct Local(Mutex<usize>);

    impl InternalSubscriber for Local {
        fn receive(&self, _: &Message) -> bool {
            *self.0.lock() += 1;
            true
        }
    }

    fn remote(
        router: &Router,
        peer: &Arc<Peer>,
        subject: &'static str,
        queue: Option<&'static str>,
    ) {
        router.subscribe(Arc::new(Subscription::new(
            Subscriber::Remote(peer.clone()),
            Bytes::from_static(subject.as_bytes()),
            queue.map(|q| Bytes::from_static(q.as_bytes())),
            Bytes::from_static(b"route"),
        )));
    }

    fn publish(router: &Router, subject: &'static str) -> bool {
        let msg = Message::new(Bytes::from_static(subject.as_bytes()), Bytes::new());
        let matches = router.matches(&msg.subject);
        let mut dispatch = Dispatch::default();
        let delivered = dispatch.route(router, &matches, &msg, None);
        dispatch.wake_all(&ServerStats::default());
        delivered
    }

    #[test]
    fn one_frame_per_peer_however_many_of_its_subscriptions_match() {
        let router = Router::new(Arc::new(ServerStats::default()));
        let (b, c) = (Peer::new(2), Peer::new(3));
        remote(&router, &b, "a.b", None);
        remote(&router, &b, "a.*", None);
        remote(&router, &b, "a.>", None);
        remote(&router, &b, "a.*", Some("q"));
        remote(&router, &c, "a.b", None);
        assert!(publish(&router, "a.b"));
        assert_eq!(*b.sent.lock(), [vec!["q".to_owned()]]);
        assert_eq!(*c.sent.lock(), [Vec::<String>::new()]);
        // The writer is woken once, after the message was queued.
        assert_eq!(*b.wakes.lock(), 1);
        assert!(!publish(&router, "other"));
    }

    #[test]
    fn a_queue_group_prefers_local_members_and_spreads_over_peers() {
        let router = Router::new(Arc::new(ServerStats::default()));
        let (b, c) = (Peer::new(2), Peer::new(3));
        remote(&router, &b, "work", Some("q"));
        remote(&router, &c, "work", Some("q"));
        let local = Arc::new(Local::default());
        let own = router.subscribe_internal("work", Some("q"), local.clone());
        for _ in 0..50 {
            assert!(publish(&router, "work"));
        }
        assert_eq!(*local.0.lock(), 50, "a local member takes every message");
        assert!(b.sent.lock().is_empty() && c.sent.lock().is_empty());

        router.unsubscribe(&own);
        for _ in 0..200 {
            assert!(publish(&router, "work"));
        }
        let (to_b, to_c) = (b.sent.lock().len(), c.sent.lock().len());
        assert_eq!(to_b + to_c, 200, "each message to exactly one peer");
        assert!(to_b > 20 && to_c > 20, "{to_b} / {to_c}");
        assert!(b.sent.lock().iter().all(|queues| queues == &["q"]));
    }

    #[test]
    fn forwarded_messages_reach_local_subscriptions_only() {
        let router = Router::new(Arc::new(ServerStats::default()));
        let peer = Peer::new(2);
        let plain = Arc::new(Local::default());
        let member = Arc::new(Local::default());
        let other_group = Arc::new(Local::default());
        router.subscribe_internal("s.*", None, plain.clone());
        router.subscribe_internal("s.x", Some("q"), member.clone());
        router.subscribe_internal("s.x", Some("other"), other_group.clone());
        remote(&router, &peer, "s.x", None);
        remote(&router, &peer, "s.x", Some("q"));

        let msg = Message::new(Bytes::from_static(b"s.x"), Bytes::new());
        let matches = router.matches(&msg.subject);
        let mut dispatch = Dispatch::default();
        for _ in 0..20 {
            assert!(dispatch.route_forwarded(&router, &matches, &msg, &[Bytes::from_static(b"q")]));
        }
        dispatch.wake_all(&ServerStats::default());
        assert_eq!(*plain.0.lock(), 20);
        assert_eq!(
            *member.0.lock(),
            20,
            "the local member, never the remote one"
        );
        assert_eq!(*other_group.0.lock(), 0, "not chosen for this node");
        assert!(peer.sent.lock().is_empty(), "never forwarded again");
    }
}
