//! PUB/HPUB: routing one message to every matching subscription — each plain subscription a
//! copy, each queue group one member — and the no-responders status for requests nobody
//! can answer.

use bytes::Bytes;
use rand::Rng;

use super::errors;
use super::reader::{Closing, Reader};
use crate::server::client::CloseReason;
use crate::server::subscription::{Claim, Subscription};
use crate::subject::pattern::pattern_matches;
use crate::subject::validate::{is_valid_literal_subject, is_valid_subject};
use crate::wire::encoder::Delivery;
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

        let router = &self.shared.router;
        let generation = router.generation();
        let matches = self
            .cache
            .get_or_compute(generation, &subject, || router.matches(&subject));
        let msg = Delivery {
            subject: &subject,
            reply: reply.as_deref(),
            headers: headers.as_deref(),
            payload: &payload,
        };
        let mut delivered = false;
        for sub in &matches.plain {
            delivered |= self.deliver(sub, &msg);
        }
        for group in &matches.queue_groups {
            // Start at a random member; move on past members that cannot take it.
            let start = rand::rng().random_range(0..group.len());
            let mut members = group.iter().cycle().skip(start).take(group.len());
            delivered |= members.any(|sub| self.deliver(sub, &msg));
        }

        // A subscription skipped for echo:false does not count as a responder.
        if !delivered {
            if let Some(reply) = &reply {
                self.answer_no_responders(&subject, reply);
            }
        }
        Ok(())
    }

    /// Delivers to one subscription; false if it could not take the message.
    fn deliver(&mut self, sub: &std::sync::Arc<Subscription>, msg: &Delivery<'_>) -> bool {
        if sub.client.id == self.client.id && !self.echo() {
            return false;
        }
        let claim = sub.claim();
        if claim == Claim::Skip {
            return false;
        }
        if sub.client.queue_delivery(&sub.sid, msg) {
            self.to_wake.push(sub.client.clone());
        }
        if claim == Claim::DeliverLast {
            self.shared.router.unsubscribe(sub);
        }
        true
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
        let status = Delivery {
            subject: reply,
            reply: None,
            headers: Some(&block),
            payload: b"",
        };
        self.deliver(&own, &status);
    }
}
