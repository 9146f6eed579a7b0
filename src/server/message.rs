//! A message being routed: what a client published, or what the server itself publishes
//! (JetStream replies and deliveries). Owned `Bytes`, so routing shares rather than copies.

use bytes::Bytes;

use crate::wire::encoder::Delivery;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub subject: Bytes,
    pub reply: Option<Bytes>,
    /// The whole `NATS/1.0` block, byte-exact as published.
    pub headers: Option<Bytes>,
    pub payload: Bytes,
}

impl Message {
    pub fn new(subject: impl Into<Bytes>, payload: impl Into<Bytes>) -> Self {
        Message {
            subject: subject.into(),
            reply: None,
            headers: None,
            payload: payload.into(),
        }
    }

    pub fn with_reply(mut self, reply: Option<Bytes>) -> Self {
        self.reply = reply;
        self
    }

    pub fn with_headers(mut self, headers: Option<Bytes>) -> Self {
        self.headers = headers;
        self
    }

    /// Payload plus headers: what limits and byte counters measure.
    pub fn size(&self) -> usize {
        self.headers.as_ref().map_or(0, Bytes::len) + self.payload.len()
    }

    pub fn as_delivery(&self) -> Delivery<'_> {
        Delivery {
            subject: &self.subject,
            reply: self.reply.as_deref(),
            headers: self.headers.as_deref(),
            payload: &self.payload,
        }
    }
}
