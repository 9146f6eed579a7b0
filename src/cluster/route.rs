//! The core-NATS route between nodes: subscription interest and the messages that follow it.
//!
//! One [`Routes`] per node. For every peer there is one outbound route: a task that holds a
//! client-streaming `Route` RPC open to the peer and sends, in order, `RouteOpen`, a snapshot
//! of this node's whole interest, then interest changes and forwarded messages as they happen.
//! Interest frames and messages share one FIFO per peer, so a client's SUB here precedes any
//! later message this node forwards to that peer (request/reply across nodes relies on it).
//!
//! The other direction arrives through the gRPC service ([`Routes::serve_inbound`]): a peer's
//! interest is installed into the local router as subscriptions with a
//! [`Subscriber::Remote`] subscriber (the outbound link to that peer), so matching, the match
//! cache and queue-group member choice need nothing route-specific. A message reaches each
//! peer at most once (see `server::dispatch`); the receiver delivers it to its own
//! subscriptions only, never forwarding it again (the cluster is a full mesh).
//!
//! Bounded memory: a peer's outbound queue holds at most [`MAX_QUEUED_BYTES`] of messages;
//! past that, messages to it are dropped (and counted) but interest frames never are.
//! While a route is down nothing is queued for it: a new stream starts over from a snapshot.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::proto;
use super::proto::route_frame::Frame;
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::router::{Interest, InterestListener, Matches};
use crate::server::subscription::{Forwarded, RemoteSubscriber, Subscriber, Subscription};
use crate::server::ServerShared;
use crate::subject::cache::MatchCache;
use crate::subject::validate::{is_valid_queue, is_valid_subject};

/// Messages queued for one peer beyond which further messages to it are dropped.
pub const MAX_QUEUED_BYTES: usize = 64 * 1024 * 1024;
/// A `RouteBatch` carries frames up to about this many bytes (at least one frame).
const BATCH_BYTES: usize = 1024 * 1024;
const MIN_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// A stream that lived this long counts as a success: the next reconnect starts fast again.
const HEALTHY_STREAM: Duration = Duration::from_secs(1);
/// Longest an inbound route pauses per batch for backed-up local receivers.
const MAX_INBOUND_PAUSE: Duration = Duration::from_millis(10);
const MATCH_CACHE_ENTRIES: usize = 1024;
/// Fixed per-message cost counted against the queue bound besides the message's bytes.
const FRAME_OVERHEAD: usize = 64;

/// The routes of one node: an outbound link per peer, and the interest peers declared to it.
#[derive(Debug)]
pub struct Routes {
    shared: Arc<ServerShared>,
    local_node: u64,
    /// Outbound links by peer. Lock order: the router's interest lock, then this, then a
    /// link's queue.
    peers: Mutex<HashMap<u64, Arc<PeerLink>>>,
    /// Interest installed for each peer by its current inbound stream. Lock order: this, then
    /// `peers`, then the router's trie.
    inbound: Mutex<HashMap<u64, InboundNode>>,
    next_stream: AtomicU64,
}

/// One peer's interest as its current inbound stream declared it.
#[derive(Debug)]
struct InboundNode {
    stream: u64,
    /// Cancelled when a newer stream from the same node takes over.
    superseded: CancellationToken,
    subs: HashMap<Interest, Arc<Subscription>>,
}

impl Routes {
    /// Creates the node's routes and registers them with the router, which from now on
    /// reports every change of this node's interest to them.
    pub fn new(shared: Arc<ServerShared>, local_node: u64) -> Arc<Routes> {
        let routes = Arc::new(Routes {
            shared,
            local_node,
            peers: Mutex::new(HashMap::new()),
            inbound: Mutex::new(HashMap::new()),
            next_stream: AtomicU64::new(1),
        });
        routes
            .shared
            .router
            .set_interest_listener(Arc::new(Listener(Arc::downgrade(&routes))));
        routes
    }

    pub fn local_node(&self) -> u64 {
        self.local_node
    }

    /// The largest `RouteBatch` this node's peers send (same config): one batch of about
    /// 1 MiB plus one message at the limits. The gRPC server must accept it
    /// (`ClusterServer::max_decoding_message_size`; tonic's default is 4 MiB).
    pub fn max_batch_size(&self) -> usize {
        let config = &self.shared.config;
        BATCH_BYTES + config.max_payload + 2 * config.max_control_line + 4 * FRAME_OVERHEAD
    }

    /// Starts (once per peer; later calls are ignored) the outbound route to `peer`: a task
    /// that keeps a `Route` stream open through `client`, reconnecting with backoff (100 ms
    /// doubling to 2 s) and resending the interest snapshot on every new stream, until the
    /// node shuts down.
    pub fn add_peer(
        self: &Arc<Self>,
        peer: u64,
        client: proto::cluster_client::ClusterClient<tonic::transport::Channel>,
    ) {
        if peer == self.local_node {
            return;
        }
        let link = self.link(peer);
        if link.started.swap(true, Ordering::AcqRel) {
            return;
        }
        let routes = self.clone();
        self.shared
            .tasks
            .spawn(async move { routes.run_outbound(link, client).await });
    }

    /// Messages dropped because `peer`'s route was backed up past [`MAX_QUEUED_BYTES`].
    pub fn dropped_messages(&self, peer: u64) -> u64 {
        self.peers
            .lock()
            .get(&peer)
            .map_or(0, |link| link.dropped.load(Ordering::Relaxed))
    }

    /// Whether the outbound stream to `peer` is currently open.
    pub fn is_connected(&self, peer: u64) -> bool {
        self.peers
            .lock()
            .get(&peer)
            .is_some_and(|link| link.queue.lock().connected)
    }

    /// Whether an inbound route stream from `peer` is open.
    pub fn has_inbound(&self, peer: u64) -> bool {
        self.inbound.lock().contains_key(&peer)
    }

    /// How many (subject, queue) interests `peer` currently has installed here.
    pub fn remote_interest_count(&self, peer: u64) -> usize {
        self.inbound
            .lock()
            .get(&peer)
            .map_or(0, |node| node.subs.len())
    }

    /// The outbound link to `peer`, created (not yet connected) if new.
    fn link(&self, peer: u64) -> Arc<PeerLink> {
        self.peers
            .lock()
            .entry(peer)
            .or_insert_with(|| Arc::new(PeerLink::new(peer)))
            .clone()
    }

    async fn run_outbound(
        self: Arc<Self>,
        link: Arc<PeerLink>,
        mut client: proto::cluster_client::ClusterClient<tonic::transport::Channel>,
    ) {
        let shutdown = self.shared.shutdown.clone();
        let mut backoff = MIN_BACKOFF;
        let mut failures = 0u32;
        while !shutdown.is_cancelled() {
            // Open + snapshot first; every later change is queued behind them.
            self.shared.router.with_local_interest(|interest| {
                link.open(self.local_node, interest);
            });
            let started = tokio::time::Instant::now();
            let stream = batches(link.clone(), shutdown.clone());
            let result = tokio::select! {
                result = client.route(stream) => result,
                _ = shutdown.cancelled() => break,
            };
            link.close();
            match result {
                Ok(_) if shutdown.is_cancelled() => break,
                Ok(_) => tracing::info!(peer = link.peer, "route closed by peer"),
                Err(status) if failures == 0 => {
                    tracing::info!(peer = link.peer, "route down: {}", status.message());
                }
                Err(status) => {
                    tracing::debug!(peer = link.peer, "route still down: {}", status.message());
                }
            }
            if started.elapsed() >= HEALTHY_STREAM {
                backoff = MIN_BACKOFF;
                failures = 0;
            } else {
                failures += 1;
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = shutdown.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
        link.close();
    }

    /// Serves one inbound route stream: installs the sender's interest into the local router
    /// as remote subscriptions and delivers the messages it forwards to local subscribers. On
    /// stream end, on shutdown, or when a newer stream from the same node arrives, that
    /// node's interest (as this stream declared it) is removed.
    pub async fn serve_inbound(
        self: &Arc<Self>,
        mut frames: tonic::Streaming<proto::RouteBatch>,
    ) -> Result<proto::RouteClosed, tonic::Status> {
        let shutdown = self.shared.shutdown.clone();
        let first = tokio::select! {
            first = frames.message() => first?,
            _ = shutdown.cancelled() => return Ok(proto::RouteClosed {}),
        };
        let Some(first) = first else {
            return Ok(proto::RouteClosed {});
        };
        let mut first = first.frames.into_iter();
        let peer = match first.next().and_then(|frame| frame.frame) {
            Some(Frame::Open(open)) => open.node_id,
            _ => {
                return Err(tonic::Status::invalid_argument(
                    "a route stream starts with RouteOpen",
                ))
            }
        };
        if peer == self.local_node {
            return Err(tonic::Status::invalid_argument(
                "route from a node with this node's id",
            ));
        }
        let (stream, superseded) = self.claim_inbound(peer);
        tracing::info!(peer, "inbound route opened");
        let mut inbound = Inbound::new(self.clone(), peer, stream);
        let result = async {
            inbound.apply(first).await?;
            loop {
                let batch = tokio::select! {
                    batch = frames.message() => batch?,
                    _ = superseded.cancelled() => return Ok(()),
                    _ = shutdown.cancelled() => return Ok(()),
                };
                match batch {
                    Some(batch) => inbound.apply(batch.frames.into_iter()).await?,
                    None => return Ok(()),
                }
            }
        }
        .await;
        self.release_inbound(peer, stream);
        tracing::info!(peer, "inbound route closed");
        result.map(|()| proto::RouteClosed {})
    }

    /// Makes a new stream from `peer` the current one: the interest of any earlier stream is
    /// void (RouteOpen says so) and that stream stops.
    fn claim_inbound(&self, peer: u64) -> (u64, CancellationToken) {
        let stream = self.next_stream.fetch_add(1, Ordering::Relaxed);
        let superseded = CancellationToken::new();
        let mut inbound = self.inbound.lock();
        let previous = inbound.insert(
            peer,
            InboundNode {
                stream,
                superseded: superseded.clone(),
                subs: HashMap::new(),
            },
        );
        if let Some(previous) = previous {
            previous.superseded.cancel();
            for sub in previous.subs.values() {
                self.shared.router.unsubscribe(sub);
            }
        }
        (stream, superseded)
    }

    /// Removes `peer`'s interest if `stream` is still its current stream.
    fn release_inbound(&self, peer: u64, stream: u64) {
        let mut inbound = self.inbound.lock();
        if inbound.get(&peer).is_some_and(|node| node.stream == stream) {
            if let Some(node) = inbound.remove(&peer) {
                for sub in node.subs.values() {
                    self.shared.router.unsubscribe(sub);
                }
            }
        }
    }

    /// Applies a subscribe or unsubscribe from `peer`'s stream `stream`. False if a newer
    /// stream took over.
    fn remote_interest(&self, peer: u64, stream: u64, interest: Interest, present: bool) -> bool {
        let mut inbound = self.inbound.lock();
        let Some(node) = inbound.get_mut(&peer).filter(|node| node.stream == stream) else {
            return false;
        };
        if present {
            if node.subs.contains_key(&interest) {
                return true;
            }
            let link = self.link(peer);
            let sub = Arc::new(Subscription::new(
                Subscriber::Remote(link),
                interest.subject.clone(),
                interest.queue.clone(),
                Bytes::from_static(b"route"),
            ));
            self.shared.router.subscribe(sub.clone());
            node.subs.insert(interest, sub);
        } else if let Some(sub) = node.subs.remove(&interest) {
            self.shared.router.unsubscribe(&sub);
        }
        true
    }

    /// A change of this node's interest, queued to every connected peer.
    fn local_interest_changed(&self, interest: &Interest, present: bool) {
        for link in self.peers.lock().values() {
            link.push_interest(interest, present);
        }
    }
}

/// The router's view of the routes (weak: the routes hold the server, which holds the router).
#[derive(Debug)]
struct Listener(Weak<Routes>);

impl InterestListener for Listener {
    fn interest_changed(&self, interest: &Interest, present: bool) {
        if let Some(routes) = self.0.upgrade() {
            routes.local_interest_changed(interest, present);
        }
    }
}

/// One inbound stream's delivery state.
struct Inbound {
    routes: Arc<Routes>,
    peer: u64,
    stream: u64,
    cache: MatchCache<Matches>,
    dispatch: Dispatch,
}

impl Inbound {
    fn new(routes: Arc<Routes>, peer: u64, stream: u64) -> Self {
        Inbound {
            routes,
            peer,
            stream,
            cache: MatchCache::new(MATCH_CACHE_ENTRIES),
            dispatch: Dispatch::default(),
        }
    }

    async fn apply(
        &mut self,
        frames: impl Iterator<Item = proto::RouteFrame>,
    ) -> Result<(), tonic::Status> {
        let mut result = Ok(());
        for frame in frames.filter_map(|frame| frame.frame) {
            let applied = match frame {
                Frame::Subscribe(interest) => self.interest(interest, true),
                Frame::Unsubscribe(interest) => self.interest(interest, false),
                Frame::Message(routed) => {
                    self.deliver(routed);
                    true
                }
                Frame::Open(_) => {
                    result = Err(tonic::Status::invalid_argument(
                        "RouteOpen in the middle of a route stream",
                    ));
                    break;
                }
            };
            if !applied {
                // A newer stream from the same node took over; it will stop this one.
                break;
            }
        }
        let shared = &self.routes.shared;
        self.dispatch.wake_all(&shared.stats);
        self.dispatch.pause_for_backed_up(MAX_INBOUND_PAUSE).await;
        result
    }

    fn interest(&mut self, interest: proto::Interest, present: bool) -> bool {
        let subject = Bytes::from(interest.subject);
        let queue = (!interest.queue.is_empty()).then(|| Bytes::from(interest.queue));
        if !is_valid_subject(&subject) || !queue.as_deref().is_none_or(is_valid_queue) {
            tracing::warn!(peer = self.peer, "ignoring invalid interest from route");
            return true;
        }
        let interest = Interest { subject, queue };
        self.routes
            .remote_interest(self.peer, self.stream, interest, present)
    }

    fn deliver(&mut self, routed: proto::RoutedMessage) {
        let msg = Message {
            subject: Bytes::from(routed.subject),
            reply: routed.has_reply.then(|| Bytes::from(routed.reply)),
            headers: routed.has_headers.then(|| Bytes::from(routed.headers)),
            payload: Bytes::from(routed.payload),
        };
        if !is_valid_subject(&msg.subject) {
            return;
        }
        let queues: Vec<Bytes> = routed.queues.into_iter().map(Bytes::from).collect();
        let route = if routed.has_route {
            Bytes::from(routed.route)
        } else {
            msg.subject.clone()
        };
        if !is_valid_subject(&route) {
            return;
        }
        let router = &self.routes.shared.router;
        let generation = router.generation();
        let matches = self
            .cache
            .get_or_compute(generation, &route, || router.matches(&route));
        self.dispatch
            .route_forwarded(router, &matches, &msg, &queues);
    }
}

/// The outbound half of a route to one peer; also the subscriber of that peer's remote
/// subscriptions here.
#[derive(Debug)]
pub(crate) struct PeerLink {
    peer: u64,
    queue: Mutex<Outbound>,
    wake_writer: Notify,
    started: AtomicBool,
    dropped: AtomicU64,
}

#[derive(Debug, Default)]
struct Outbound {
    /// A stream is open (or opening): changes and messages are queued. While false nothing
    /// is, since the next stream starts from a snapshot.
    connected: bool,
    frames: VecDeque<Outgoing>,
    /// Bytes of queued messages (interest frames are not counted: they are never dropped).
    bytes: usize,
}

#[derive(Debug)]
enum Outgoing {
    Open(u64),
    Interest(Interest, bool),
    /// A message, the queue groups it is for, and the subject the receiver matches it by.
    Message(Message, Vec<Bytes>, Option<Bytes>),
}

impl Outgoing {
    fn cost(&self) -> usize {
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

    fn into_frame(self) -> proto::RouteFrame {
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

fn message_cost(msg: &Message, queues: &[Bytes]) -> usize {
    FRAME_OVERHEAD
        + msg.subject.len()
        + msg.reply.as_ref().map_or(0, Bytes::len)
        + msg.size()
        + queues.iter().map(Bytes::len).sum::<usize>()
}

impl PeerLink {
    fn new(peer: u64) -> Self {
        PeerLink {
            peer,
            queue: Mutex::new(Outbound::default()),
            wake_writer: Notify::new(),
            started: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        }
    }

    /// Starts a new stream's queue: RouteOpen, then the snapshot. Called with the router's
    /// interest lock held.
    fn open(&self, local_node: u64, interest: &mut dyn Iterator<Item = &Interest>) {
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
    fn close(&self) {
        let mut queue = self.queue.lock();
        queue.connected = false;
        queue.frames.clear();
        queue.bytes = 0;
    }

    fn push_interest(&self, interest: &Interest, present: bool) {
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
    fn take_batch(&self) -> Option<proto::RouteBatch> {
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
fn batches(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(subject: &'static str) -> Message {
        Message::new(
            Bytes::from_static(subject.as_bytes()),
            Bytes::from_static(b"x"),
        )
    }

    fn interest(subject: &'static str, queue: Option<&'static str>) -> Interest {
        Interest {
            subject: Bytes::from_static(subject.as_bytes()),
            queue: queue.map(|q| Bytes::from_static(q.as_bytes())),
        }
    }

    fn kinds(batch: &proto::RouteBatch) -> Vec<String> {
        batch
            .frames
            .iter()
            .map(|frame| match frame.frame.as_ref().unwrap() {
                Frame::Open(open) => format!("open {}", open.node_id),
                Frame::Subscribe(i) => format!("sub {} {}", i.subject, i.queue),
                Frame::Unsubscribe(i) => format!("unsub {} {}", i.subject, i.queue),
                Frame::Message(m) => format!("msg {}", String::from_utf8_lossy(&m.subject)),
            })
            .collect()
    }

    #[test]
    fn nothing_is_queued_while_the_route_is_down() {
        let link = PeerLink::new(2);
        assert!(!link.forward(&msg("a"), &[], None).delivered);
        link.push_interest(&interest("a", None), true);
        assert!(link.take_batch().is_none());
    }

    #[test]
    fn a_stream_starts_with_open_and_the_snapshot_then_changes_in_order() {
        let link = PeerLink::new(2);
        link.push_interest(&interest("stale", None), true);
        let snapshot = [interest("a", None), interest("b", Some("q"))];
        link.open(1, &mut snapshot.iter());
        let forwarded = link.forward(&msg("a"), &[], None);
        assert!(forwarded.delivered);
        assert!(!forwarded.wake, "the queue already held the snapshot");
        link.push_interest(&interest("a", None), false);
        let batch = link.take_batch().unwrap();
        assert_eq!(
            kinds(&batch),
            ["open 1", "sub a ", "sub b q", "msg a", "unsub a "]
        );
        assert!(link.take_batch().is_none());
        // An empty queue asks the publisher to wake the writer.
        assert!(link.forward(&msg("b"), &[], None).wake);
    }

    #[test]
    fn messages_past_the_bound_are_dropped_but_interest_is_not() {
        let link = PeerLink::new(2);
        link.open(1, &mut std::iter::empty());
        let big = Message::new(
            Bytes::from_static(b"big"),
            Bytes::from(vec![0u8; MAX_QUEUED_BYTES / 2]),
        );
        assert!(link.forward(&big, &[], None).delivered);
        // Dropped, but still "delivered": the peer has interest, its route is just backed up.
        assert!(link.forward(&big, &[], None).delivered);
        assert_eq!(link.dropped.load(Ordering::Relaxed), 1);
        link.push_interest(&interest("x", None), true);
        let mut seen = Vec::new();
        while let Some(batch) = link.take_batch() {
            seen.extend(kinds(&batch));
        }
        assert_eq!(seen, ["open 1", "msg big", "sub x "]);
        assert_eq!(link.queue.lock().bytes, 0);
    }

    #[test]
    fn batches_are_bounded() {
        let link = PeerLink::new(2);
        link.open(1, &mut std::iter::empty());
        let chunk = Message::new(
            Bytes::from_static(b"c"),
            Bytes::from(vec![0u8; BATCH_BYTES / 4]),
        );
        for _ in 0..10 {
            link.forward(&chunk, &[], None);
        }
        let first = link.take_batch().unwrap();
        assert!(first.frames.len() < 11, "{}", first.frames.len());
        let mut total = first.frames.len();
        while let Some(batch) = link.take_batch() {
            total += batch.frames.len();
        }
        assert_eq!(total, 11);
    }

    #[test]
    fn forwarded_frames_carry_reply_headers_and_queues() {
        let link = PeerLink::new(2);
        link.open(1, &mut std::iter::empty());
        let message = msg("s")
            .with_reply(Some(Bytes::from_static(b"r")))
            .with_headers(Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")));
        link.forward(&message, &[Bytes::from_static(b"q")], None);
        let inbox = Bytes::from_static(b"_INBOX.x");
        link.forward(&message, &[], Some(&inbox));
        let batch = link.take_batch().unwrap();
        let Some(Frame::Message(routed)) = batch.frames[1].frame.clone() else {
            panic!("not a message");
        };
        let Some(Frame::Message(delivery)) = batch.frames[2].frame.clone() else {
            panic!("not a message");
        };
        assert!(!routed.has_route, "matched by its own subject");
        assert!(delivery.has_route && &delivery.route[..] == b"_INBOX.x");
        assert_eq!(&delivery.subject[..], b"s");
        assert!(routed.has_reply && routed.has_headers);
        assert_eq!(&routed.reply[..], b"r");
        assert_eq!(&routed.headers[..], b"NATS/1.0\r\n\r\n");
        assert_eq!(routed.queues.len(), 1);
        assert_eq!(&routed.queues[0][..], b"q");
    }
}
