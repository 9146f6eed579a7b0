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

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
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

/// One route's state and counters (see [`Routes::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouteStats {
    /// The outbound stream to the peer is open.
    pub connected: bool,
    /// An inbound stream from the peer is open.
    pub inbound: bool,
    /// Bytes of messages queued for the peer, not yet sent.
    pub pending_bytes: usize,
    /// Messages (and their header + payload bytes) received from the peer.
    pub in_msgs: u64,
    pub in_bytes: u64,
    /// Messages (and bytes) forwarded to the peer.
    pub out_msgs: u64,
    pub out_bytes: u64,
    /// Messages to the peer dropped because its queue was full.
    pub dropped: u64,
    /// The peer's (subject, queue) interests installed here.
    pub subscriptions: usize,
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

    /// The route to `peer` as `/routez` shows it; `None` for a peer never seen.
    pub fn stats(&self, peer: u64) -> Option<RouteStats> {
        let link = self.peers.lock().get(&peer)?.clone();
        let (connected, pending_bytes) = {
            let queue = link.queue.lock();
            (queue.connected, queue.bytes)
        };
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Some(RouteStats {
            connected,
            inbound: self.has_inbound(peer),
            pending_bytes,
            in_msgs: load(&link.traffic.in_msgs),
            in_bytes: load(&link.traffic.in_bytes),
            out_msgs: load(&link.traffic.out_msgs),
            out_bytes: load(&link.traffic.out_bytes),
            dropped: load(&link.dropped),
            subscriptions: self.remote_interest_count(peer),
        })
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
                _ = link.peer_heard.notified() => {}
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
        let link = self.link(peer);
        if !link.is_up() {
            link.peer_heard.notify_one();
        }
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

mod inbound;
mod link;
#[cfg(test)]
mod tests;

use inbound::Inbound;
use link::batches;
pub(crate) use link::PeerLink;
