//! The API inbox: the internal subscriber on `$JS.API.>` and its bounded queue to the
//! dispatcher.
//!
//! Bounded as nats-server bounds its JetStream API queue (`request_queue_limit`, 10,000):
//! a request counts from its arrival until its handler is done. A request that finds
//! `MAX_PENDING_REQUESTS` pending makes the inbox drop it and every request still waiting —
//! as nats-server drains its whole queue — with no reply (the client's request times out), a
//! rate-limited warning and the count in `/varz` (`jetstream.dropped.api_requests`). Requests
//! already being handled are answered.

use std::sync::Arc;

use crate::jetstream::queue::{Dropped, PushError, QueueSender};
use crate::server::message::Message;
use crate::server::subscription::InternalSubscriber;

/// Most API requests pending (waiting or being handled) on one node: nats-server's default
/// `request_queue_limit`.
pub const MAX_PENDING_REQUESTS: usize = 10_000;

/// A request as the inbox took it.
#[derive(Debug, Clone)]
pub(super) struct Received {
    pub msg: Message,
    /// Another node forwarded it: its publisher is connected there (`relay.rs`).
    pub from_peer: bool,
}

#[derive(Debug)]
pub(super) struct ApiInbox {
    queue: QueueSender<Received>,
    dropped: Arc<Dropped>,
}

impl ApiInbox {
    pub(super) fn new(queue: QueueSender<Received>, dropped: Arc<Dropped>) -> Self {
        ApiInbox { queue, dropped }
    }

    fn take(&self, msg: &Message, from_peer: bool) -> bool {
        let received = Received {
            msg: msg.clone(),
            from_peer,
        };
        match self.queue.push(received) {
            Ok(_) => true,
            Err(PushError::Full(_)) => {
                let dropped = self.queue.drain() as u64 + 1;
                if self.dropped.record(dropped) {
                    tracing::warn!(
                        dropped,
                        total = self.dropped.total(),
                        "JetStream API queue limit reached, dropping {dropped} requests"
                    );
                }
                true
            }
            Err(PushError::Closed(_)) => false,
        }
    }
}

impl InternalSubscriber for ApiInbox {
    fn receive(&self, msg: &Message) -> bool {
        self.take(msg, false)
    }

    fn receive_from_peer(&self, msg: &Message) -> bool {
        self.take(msg, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::queue::bounded;

    fn request(n: usize) -> Message {
        Message::new(format!("$JS.API.STREAM.INFO.S{n}"), "").with_reply(Some("_INBOX.1".into()))
    }

    #[test]
    fn overflow_drops_the_request_and_everything_waiting() {
        let (sender, mut receiver) = bounded(3);
        let dropped = Arc::new(Dropped::default());
        let inbox = ApiInbox::new(sender, dropped.clone());
        assert!(inbox.receive(&request(0)));
        let handling = receiver.try_recv_many(1).expect("one request");
        assert!(inbox.receive(&request(1)));
        assert!(inbox.receive(&request(2)));
        // The fourth finds three pending: it and the two waiting are dropped.
        assert!(inbox.receive(&request(3)));
        assert_eq!(dropped.total(), 3);
        assert!(receiver.try_recv_many(10).is_none());
        // The one being handled was not dropped, and room is back once it is done.
        assert_eq!(handling.len(), 1);
        drop(handling);
        assert!(inbox.receive(&request(4)));
        let next = receiver.try_recv_many(10).expect("accepted again");
        assert_eq!(&next[0].msg.subject[..], b"$JS.API.STREAM.INFO.S4");
        assert!(!next[0].from_peer);
        assert_eq!(dropped.total(), 3);
    }

    #[test]
    fn a_request_a_peer_forwarded_is_marked_as_such() {
        let (sender, mut receiver) = bounded(3);
        let inbox = ApiInbox::new(sender, Arc::new(Dropped::default()));
        assert!(inbox.receive_from_peer(&request(0)));
        assert!(inbox.receive(&request(1)));
        let taken = receiver.try_recv_many(2).expect("two requests");
        let marks: Vec<bool> = taken.iter().map(|received| received.from_peer).collect();
        assert_eq!(marks, [true, false]);
    }

    #[test]
    fn a_closed_inbox_refuses() {
        let (sender, receiver) = bounded(3);
        let inbox = ApiInbox::new(sender, Arc::new(Dropped::default()));
        drop(receiver);
        assert!(!inbox.receive(&request(0)));
    }
}
