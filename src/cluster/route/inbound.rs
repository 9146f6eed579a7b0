//! One inbound route stream: a peer's interest installed as remote subscriptions, and the
//! messages it forwards delivered to this node's own subscriptions.

use std::sync::Arc;

use bytes::Bytes;

use super::*;

/// One inbound stream's delivery state.
pub(super) struct Inbound {
    routes: Arc<Routes>,
    peer: u64,
    /// The peer's link, whose counters record what arrives from it.
    link: Arc<PeerLink>,
    stream: u64,
    cache: MatchCache<Matches>,
    dispatch: Dispatch,
}

impl Inbound {
    pub(super) fn new(routes: Arc<Routes>, peer: u64, stream: u64) -> Self {
        Inbound {
            link: routes.link(peer),
            routes,
            peer,
            stream,
            cache: MatchCache::new(MATCH_CACHE_ENTRIES),
            dispatch: Dispatch::from_peer(),
        }
    }

    pub(super) async fn apply(
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

    pub(super) fn interest(&mut self, interest: proto::Interest, present: bool) -> bool {
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

    pub(super) fn deliver(&mut self, routed: proto::RoutedMessage) {
        let msg = Message {
            subject: Bytes::from(routed.subject),
            reply: routed.has_reply.then(|| Bytes::from(routed.reply)),
            headers: routed.has_headers.then(|| Bytes::from(routed.headers)),
            payload: Bytes::from(routed.payload),
        };
        if !is_valid_subject(&msg.subject) {
            return;
        }
        self.link.traffic.count_in(&msg);
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
