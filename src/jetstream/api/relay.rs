//! A request published on this node whose answering node has not shown its interest here yet.
//!
//! Every node subscribes `$JS.API.>` once its JetStream has started, and a request published
//! on a node reaches the peers whose subscription that node has heard of (`routing.rs`).
//! Right after a whole cluster starts, a node can take client requests before a peer's API
//! subscription has arrived: a request about a stream that peer leads (its vote, restored from
//! disk on every replica, says so) or a request for the meta leader on that peer then reaches
//! only nodes that stay silent, and the client waits out its timeout (5 s in the nats CLI)
//! although the leader serves a moment later.
//!
//! So the node a request was published on holds such a request, at most [`HOLD_FOR`] and
//! [`MAX_HELD`] of them at once, until either the node it expects to answer shows interest
//! (the request is forwarded to that node alone: it never had it) or this node becomes the
//! one that answers (it answers). A request the answering node had interest for when it was
//! published went to it, and is never sent again; a request another node forwarded here is
//! that node's to hold. Past [`HOLD_FOR`] the request is dropped, as it was before.
//!
//! The node expected to answer holds a request too while it does not serve yet: a leader
//! serves once it has applied its log as it stood when it came to lead
//! (`leadership_watch::CatchUp`), and every other node stays silent meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::routing::{self, Role};
use crate::consensus::NodeId;
use crate::jetstream::JetStream;
use crate::jsapi::subject::ApiRequest;
use crate::server::message::Message;
use crate::server::router::Router;
use crate::server::subscription::{RemoteSubscriber, Subscriber};

/// The longest a request is held: the API timeout of nats.go, async-nats and the nats CLI
/// (nats-py's `STREAM.INFO` gives up after 2 s).
const HOLD_FOR: Duration = Duration::from_secs(5);
/// The most requests held at once on one node; more are dropped at once.
const MAX_HELD: usize = 1_000;
/// How often a held request checks whether this node answers it now (a leadership change
/// sends no signal the hold could wait on; a peer's interest does).
const RECHECK: Duration = Duration::from_millis(50);

/// The requests this node holds (see the module docs).
#[derive(Debug, Default)]
pub struct Relay {
    held: AtomicUsize,
}

/// What became of a held request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Sent to the node expected to answer it, once its interest arrived.
    Forwarded,
    /// This node answers it now.
    AnswerHere,
    /// Nothing changed within [`HOLD_FOR`], or the node is shutting down.
    Dropped,
}

impl Relay {
    /// Called for a request this node stays silent on: when this node is the one expected
    /// to answer it but does not serve yet, or the request was published here (not
    /// `from_peer`) and the node expected to answer it has shown no interest for it here (so
    /// did not get it), the wait for it, to be run on a task of its own; its outcome says
    /// whether this node answers the request after all.
    pub fn hold(
        self: &Arc<Self>,
        js: &Arc<JetStream>,
        request: &ApiRequest,
        msg: &Message,
        from_peer: bool,
    ) -> Option<impl std::future::Future<Output = Outcome> + Send + 'static> {
        let answerer = routing::answerer(js, request)?;
        let here = answerer == js.node_id();
        if !here && (from_peer || interest_of(js.router(), &msg.subject, answerer).is_some()) {
            return None;
        }
        if self.held.fetch_add(1, Ordering::AcqRel) >= MAX_HELD {
            self.held.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        let slot = HeldSlot(self.clone());
        let (js, request, msg) = (js.clone(), request.clone(), msg.clone());
        Some(async move {
            let outcome = wait(&js, &request, &msg, answerer).await;
            drop(slot);
            tracing::debug!(
                subject = %String::from_utf8_lossy(&msg.subject),
                answerer,
                ?outcome,
                "held API request"
            );
            outcome
        })
    }
}

/// One request's place in [`Relay::held`], given back when dropped.
struct HeldSlot(Arc<Relay>);

impl Drop for HeldSlot {
    fn drop(&mut self) {
        self.0.held.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn wait(js: &JetStream, request: &ApiRequest, msg: &Message, answerer: NodeId) -> Outcome {
    let shutdown = js.shared().shutdown.clone();
    let deadline = tokio::time::Instant::now() + HOLD_FOR;
    let mut added = js.router().subscriptions_added();
    loop {
        // Seen before the match: an interest added after it wakes the wait below.
        added.borrow_and_update();
        let elsewhere = answerer != js.node_id();
        if let Some(link) = interest_of(js.router(), &msg.subject, answerer).filter(|_| elsewhere) {
            if link.is_up() {
                if link.forward(msg, &[], None).wake {
                    link.wake();
                }
                return Outcome::Forwarded;
            }
        }
        if routing::role(js, request) == Role::Answer {
            return Outcome::AnswerHere;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Outcome::Dropped,
            _ = tokio::time::sleep_until(deadline) => return Outcome::Dropped,
            _ = added.changed() => {}
            _ = tokio::time::sleep(RECHECK) => {}
        }
    }
}

/// `node`'s interest for `subject` here, if it has any.
fn interest_of(
    router: &Router,
    subject: &Bytes,
    node: NodeId,
) -> Option<Arc<dyn RemoteSubscriber>> {
    let matches = router.matches(subject);
    let mut subs = matches
        .plain
        .iter()
        .chain(matches.queue_groups.iter().flatten());
    subs.find_map(|sub| match &sub.subscriber {
        Subscriber::Remote(link) if link.peer() == node && !sub.is_removed() => Some(link.clone()),
        _ => None,
    })
}
