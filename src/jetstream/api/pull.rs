//! `CONSUMER.MSG.NEXT`: a pull request from the API dispatcher, handed to the consumer's
//! delivery (`delivery::pull` queues it and answers it with messages or a status).

use crate::jetstream::delivery::outbox::no_responders;
use crate::jetstream::JetStream;
use crate::jsapi::subject::ApiRequest;
use crate::jsapi::PullRequest;
use crate::server::message::Message;

/// `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` from the API dispatcher. Requests
/// without a reply subject are ignored; an unknown stream or consumer gets the `503` a
/// request nobody answers would get (nats-server has no subscription for it).
pub async fn pull_request(js: &JetStream, request: &ApiRequest, msg: &Message) {
    let ApiRequest::ConsumerMsgNext { stream, consumer } = request else {
        return;
    };
    let Some(reply) = msg.reply.clone() else {
        return;
    };
    let parsed = PullRequest::parse(&msg.payload);
    let delivered = js
        .stream(stream)
        .is_some_and(|handle| js.delivery().pull(&handle, consumer, reply.clone(), parsed));
    if !delivered {
        let subject = String::from_utf8_lossy(&msg.subject);
        js.delivery()
            .outbox()
            .status(&reply, no_responders(&subject));
    }
}
