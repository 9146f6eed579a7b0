//! Offline streams: streams the meta state lists whose group cannot run on this node (its
//! log is marked corrupt, its state cannot be loaded). The `Catalog` keeps one
//! `OfflineStream` per such stream until it starts or is deleted. API calls on it answer
//! 10194 `stream is offline: <reason>`; publishes on its subjects that ask for an ack get
//! that error as their PubAck (rather than the no-responders status of a subject nobody
//! serves), and nothing is stored.

use std::sync::{Arc, Weak};

use bytes::Bytes;

use crate::jsapi::{ApiError, ErrorKind, PubAckResponse, StorageType};
use crate::server::dispatch;
use crate::server::message::Message;
use crate::server::router::Router;
use crate::server::subscription::{InternalSubscriber, Subscription};
use crate::server::ServerShared;

/// A stream that cannot run here, and why. Held by `JetStream` (one per offline stream).
#[derive(Debug)]
pub struct OfflineStream {
    pub group: u64,
    /// Which registry the group belongs to.
    pub storage: StorageType,
    pub reason: String,
    subscriptions: Vec<Arc<Subscription>>,
}

impl OfflineStream {
    /// Records `stream` as offline and answers publishes on its `subjects`.
    pub fn new(
        shared: &Arc<ServerShared>,
        stream: &str,
        group: u64,
        storage: StorageType,
        reason: String,
        subjects: &[String],
    ) -> OfflineStream {
        let answer = Arc::new(Refuse {
            stream: stream.to_owned(),
            reason: reason.clone(),
            shared: Arc::downgrade(shared),
        });
        let subscriptions = subjects
            .iter()
            .map(|subject| {
                shared
                    .router
                    .subscribe_internal(subject, None, answer.clone())
            })
            .collect();
        OfflineStream {
            group,
            storage,
            reason,
            subscriptions,
        }
    }

    /// The error API calls on the stream get.
    pub fn error(&self) -> ApiError {
        ApiError::with(ErrorKind::StreamOfflineReason, &[&self.reason])
    }

    /// Stops answering publishes (the stream started, or was deleted).
    pub fn close(&self, router: &Router) {
        for subscription in &self.subscriptions {
            router.unsubscribe(subscription);
        }
    }
}

/// The internal subscriber on an offline stream's subjects.
#[derive(Debug)]
struct Refuse {
    stream: String,
    reason: String,
    /// Weak: the router holding this subscriber lives in `ServerShared`.
    shared: Weak<ServerShared>,
}

impl InternalSubscriber for Refuse {
    fn receive(&self, msg: &Message) -> bool {
        let (Some(reply), Some(shared)) = (&msg.reply, self.shared.upgrade()) else {
            return true;
        };
        let error = ApiError::with(ErrorKind::StreamOfflineReason, &[&self.reason]);
        let body = PubAckResponse::failure(self.stream.clone(), error).to_json();
        dispatch::publish(
            &shared.router,
            &Message::new(reply.clone(), Bytes::from(body)),
        );
        true
    }
}
