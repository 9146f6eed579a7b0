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

#[derive(Debug)]
pub(super) struct ApiInbox {
    queue: QueueSender<Message>,
    dropped: Arc<Dropped>,
}

impl ApiInbox {
    pub(super) fn new(queue: QueueSender<Message>, dropped: Arc<Dropped>) -> Self {
        ApiInbox { queue, dropped }
    }
}

impl InternalSubscriber for ApiInbox {
    fn receive(&self, msg: &Message) -> bool {
        match self.queue.push(msg.clone()) {
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
        assert_eq!(&next[0].subject[..], b"$JS.API.STREAM.INFO.S4");
        assert_eq!(dropped.total(), 3);
    }

    #[test]
    fn a_closed_inbox_refuses() {
        let (sender, receiver) = bounded(3);
        let inbox = ApiInbox::new(sender, Arc::new(Dropped::default()));
        drop(receiver);
        assert!(!inbox.receive(&request(0)));
    }
}
