//! PUB/HPUB: routing one message to every matching subscription — each plain subscription a
//! copy, each queue group one member — and the no-responders status for requests nobody
//! can answer.

use bytes::Bytes;

use super::errors;
use super::reader::{Closing, Reader};
use crate::server::client::CloseReason;
use crate::server::message::Message;
use crate::subject::pattern::pattern_matches;
use crate::subject::validate::{is_valid_literal_subject, is_valid_subject};
use crate::wire::headers;

impl Reader {
    pub(super) fn publish(
        &mut self,
        subject: Bytes,
        reply: Option<Bytes>,
        headers: Option<Bytes>,
        payload: Bytes,
    ) -> Result<(), Closing> {
        if headers.is_some() && !self.options.as_ref().is_some_and(|o| o.headers) {
            // HPUB from a client that did not announce headers: nats-server closes silently.
            self.client.close(CloseReason::ProtocolViolation);
            return Err(Closing);
        }
        let pedantic = self.options.as_ref().is_none_or(|o| o.pedantic);
        if pedantic && !is_valid_literal_subject(&subject) {
            // Only a warning: nats-server still routes the message.
            self.client.send_err(errors::INVALID_PUBLISH_SUBJECT);
        }
        // `+OK` precedes any echo of this message to the publisher itself.
        self.ack_if_verbose();
        self.in_msgs += 1;
        self.in_bytes += (headers.as_ref().map_or(0, Bytes::len) + payload.len()) as u64;
        if !is_valid_subject(&subject) {
            // Empty tokens or whitespace: accepted, but it matches no subscription.
            return Ok(());
        }

        let msg = Message {
            subject,
            reply,
            headers,
            payload,
        };
        let router = &self.shared.router;
        let generation = router.generation();
        let matches = self
            .cache
            .get_or_compute(generation, &msg.subject, || router.matches(&msg.subject));
        let skip = (!self.echo()).then_some(self.client.id);
        let delivered = self.dispatch.route(router, &matches, &msg, skip);

        // A subscription skipped for echo:false does not count as a responder.
        if !delivered {
            if let Some(reply) = &msg.reply {
                self.answer_no_responders(&msg.subject, reply);
            }
        }
        Ok(())
    }

    fn echo(&self) -> bool {
        self.options.as_ref().is_none_or(|o| o.echo)
    }

    /// A request nobody subscribes to: clients that asked for it get a 503 status on their
    /// own subscription for the reply subject.
    fn answer_no_responders(&mut self, subject: &[u8], reply: &[u8]) {
        let wants_status = self
            .options
            .as_ref()
            .is_some_and(|o| o.no_responders && o.headers);
        if !wants_status {
            return;
        }
        let Some(own) = self
            .subs
            .values()
            .find(|sub| !sub.is_removed() && pattern_matches(&sub.subject, reply))
            .cloned()
        else {
            return;
        };
        let subject_text = String::from_utf8_lossy(subject);
        let block = headers::status_block(503, None, &[("Nats-Subject", &subject_text)]);
        let status =
            Message::new(Bytes::copy_from_slice(reply), Bytes::new()).with_headers(Some(block));
        self.dispatch
            .deliver(&self.shared.router, &own, &status, None);
    }
}
