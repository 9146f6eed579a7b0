//! Publishing JetStream advisories (`jsapi::advisory`) from the node that acted: the one that
//! answered the API request, or the stream's leader for delivery events, so each event is
//! published once in a cluster. Like nats-server, nothing is built unless someone (on this
//! node or, through the routes, on another) subscribes the advisory's subject.

use bytes::Bytes;

use super::token::random_token;
use crate::jsapi::advisory::Advisory;
use crate::jsapi::time::Timestamp;
use crate::server::dispatch::Dispatch;
use crate::server::message::Message;
use crate::server::ServerShared;

/// Length of an advisory's `id` (nats-server uses a 22-character NUID).
const ID_LEN: usize = 22;

/// Publishes `advisory` if anyone listens (the subscribers are looked up once).
pub fn publish(shared: &ServerShared, advisory: &Advisory) {
    let subject = Bytes::from(advisory.subject());
    let matches = shared.router.matches(&subject);
    if matches.is_empty() {
        return;
    }
    let body = advisory.to_json(&random_token(ID_LEN), Timestamp::now());
    let mut dispatch = Dispatch::default();
    dispatch.route(
        &shared.router,
        &matches,
        &Message::new(subject, Bytes::from(body)),
        None,
    );
    dispatch.wake_all(&shared.stats);
}
