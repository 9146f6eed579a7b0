//! What delivery sends: the status messages of pull requests and push consumers (`404 No
//! Messages`, `408 Request Timeout`, `409 …`, `100 Idle Heartbeat`, `100 FlowControl
//! Request`), the shape of a delivered stream message (stored subject, `$JS.ACK…` reply,
//! stored headers and payload, `headers_only`), and `Outbox`, which routes a message by one
//! subject (the pull request's inbox, the push deliver subject) while its `MSG` line carries
//! another (the stored subject) — `dispatch::publish` routes by the message's own subject.
//!
//! Status texts and header names are nats-server's (`server/consumer.go`); clients match
//! them case-insensitively on substrings, so keep them exact.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};

use crate::jetstream::token::random_token;
use crate::jsapi::AckReply;
use crate::jscore::consumer::Delivery;
use crate::jscore::stream::StoredMsg;
use crate::server::dispatch::{self, Dispatch};
use crate::server::message::Message;
use crate::server::ServerShared;
use crate::wire::headers::{self, status_block};

/// Header naming the messages a pull request still wanted when it ended.
pub const PENDING_MESSAGES: &str = "Nats-Pending-Messages";
/// Header naming the bytes a pull request still allowed when it ended.
pub const PENDING_BYTES: &str = "Nats-Pending-Bytes";

/// `404 No Messages`: a `no_wait` pull request found nothing (more) to deliver.
pub fn no_messages() -> Bytes {
    status_block(404, Some("No Messages"), &[])
}

/// `408 Request Timeout` with what the request still wanted.
pub fn request_timeout(pending_messages: i64, pending_bytes: i64) -> Bytes {
    with_pending(408, "Request Timeout", pending_messages, pending_bytes)
}

/// `409 Message Size Exceeds MaxBytes`: the next message does not fit the request's budget.
pub fn message_too_big(pending_messages: i64, pending_bytes: i64) -> Bytes {
    with_pending(
        409,
        "Message Size Exceeds MaxBytes",
        pending_messages,
        pending_bytes,
    )
}

/// `409 Batch Completed`: a request with a byte budget got its whole batch while bytes
/// were left (pending messages 0, the bytes it still allowed).
pub fn batch_completed(pending_bytes: i64) -> Bytes {
    with_pending(409, "Batch Completed", 0, pending_bytes)
}

/// `408 Requests Pending`: a `no_wait` request while the waiting requests already ask for
/// more than the consumer has pending.
pub fn requests_pending() -> Bytes {
    status_block(408, Some("Requests Pending"), &[])
}

/// `409 Leadership Change`: the stream group this request waited on lost its leader (here:
/// stopped and restarted); the client re-pulls.
pub fn leadership_change() -> Bytes {
    conflict("Leadership Change")
}

/// `409 Server Shutdown` with what the request still wanted.
pub fn server_shutdown(pending_messages: i64, pending_bytes: i64) -> Bytes {
    with_pending(409, "Server Shutdown", pending_messages, pending_bytes)
}

/// A `409` without headers: `Consumer Deleted`, `Consumer is push based`, `Exceeded
/// MaxWaiting`, `Exceeded MaxRequestBatch of <n>`…
pub fn conflict(description: &str) -> Bytes {
    status_block(409, Some(description), &[])
}

/// `400 Bad Request - <reason>` for an unusable pull request body.
pub fn bad_request(reason: &str) -> Bytes {
    status_block(400, Some(&format!("Bad Request - {reason}")), &[])
}

/// `503` as for a request nobody answers (no such stream or consumer to pull from).
pub fn no_responders(request_subject: &str) -> Bytes {
    status_block(503, None, &[("Nats-Subject", request_subject)])
}

/// `100 Idle Heartbeat` with the last delivered sequences, and the outstanding
/// flow-control subject when delivery is stalled on it.
pub fn idle_heartbeat(
    last_consumer_seq: u64,
    last_stream_seq: u64,
    stalled: Option<&str>,
) -> Bytes {
    let consumer = last_consumer_seq.to_string();
    let stream = last_stream_seq.to_string();
    let mut headers = vec![
        (LAST_CONSUMER_HEADER, consumer.as_str()),
        (LAST_STREAM_HEADER, stream.as_str()),
    ];
    if let Some(subject) = stalled {
        headers.push((STALLED_HEADER, subject));
    }
    status_block(100, Some("Idle Heartbeat"), &headers)
}

/// `100 FlowControl Request` (sent with a `$JS.FC…` reply subject).
pub fn flow_control_request() -> Bytes {
    status_block(100, Some("FlowControl Request"), &[])
}

fn with_pending(status: u16, description: &str, messages: i64, bytes: i64) -> Bytes {
    let messages = messages.max(0).to_string();
    let bytes = bytes.max(0).to_string();
    status_block(
        status,
        Some(description),
        &[(PENDING_MESSAGES, &messages), (PENDING_BYTES, &bytes)],
    )
}

/// The ack reply subject of one delivery (v1 form, as nats-server sends by default).
pub fn ack_subject(stream: &str, consumer: &str, delivery: &Delivery, ts_nanos: i64) -> String {
    AckReply::v1_subject(
        stream,
        consumer,
        delivery.deliveries,
        delivery.stream_seq,
        delivery.consumer_seq,
        ts_nanos,
        delivery.pending_count,
    )
}

/// The last consumer (delivery) sequence: in idle heartbeats, and in the flow-control
/// replies of a receiver that stored up to it.
pub const LAST_CONSUMER_HEADER: &str = "Nats-Last-Consumer";
/// The last stream sequence, alongside `LAST_CONSUMER_HEADER`.
pub const LAST_STREAM_HEADER: &str = "Nats-Last-Stream";
/// In an idle heartbeat: the flow-control reply subject the consumer still waits on.
pub const STALLED_HEADER: &str = "Nats-Consumer-Stalled";

/// A decimal sequence header (`Nats-Last-Stream`, `Nats-Last-Consumer`) of a header block.
pub fn sequence_header(block: &[u8], name: &str) -> Option<u64> {
    std::str::from_utf8(headers::lookup(block, name)?)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `Nats-Last-Stream` of a flow-control reply: what its receiver has stored (how an
/// `ack_policy: flow_control` consumer is acknowledged, ADR-60). 0 or absent acks nothing.
pub fn last_stream_seq(block: &[u8]) -> Option<u64> {
    sequence_header(block, LAST_STREAM_HEADER).filter(|seq| *seq > 0)
}

/// Prefix of flow-control reply subjects: `$JS.FC.<stream>.<consumer>.<random>`.
pub const FLOW_CONTROL_PREFIX: &str = "$JS.FC.";

/// A fresh flow-control reply subject (4 random alphanumerics at the end, as nats-server).
pub fn flow_control_subject(stream: &str, consumer: &str) -> String {
    format!(
        "{FLOW_CONTROL_PREFIX}{stream}.{consumer}.{}",
        random_token(4)
    )
}

/// `(stream, consumer)` of a flow-control reply subject.
pub fn parse_flow_control_subject(subject: &str) -> Option<(&str, &str)> {
    let rest = subject.strip_prefix(FLOW_CONTROL_PREFIX)?;
    let mut tokens = rest.split('.');
    let stream = tokens.next()?;
    let consumer = tokens.next()?;
    tokens.next()?;
    Some((stream, consumer))
}

/// A stored message as delivered: its own subject, the ack reply, its headers and payload.
/// `headers_only` drops the payload and reports its size in `Nats-Msg-Size`.
pub fn delivered_message(stored: &StoredMsg, ack_reply: String, headers_only: bool) -> Message {
    let subject = Bytes::copy_from_slice(stored.subject.as_bytes());
    let reply = Some(Bytes::from(ack_reply));
    if !headers_only {
        return Message::new(subject, stored.payload.clone())
            .with_reply(reply)
            .with_headers(stored.headers.clone());
    }
    let size = stored.payload.len().to_string();
    let headers = append_header(stored.headers.as_deref(), "Nats-Msg-Size", &size);
    Message::new(subject, Bytes::new())
        .with_reply(reply)
        .with_headers(Some(headers))
}

/// The size a pull request's `max_bytes` budget is charged for a message (nats-server:
/// subject + ack reply + headers + payload).
pub fn charged_size(msg: &Message) -> i64 {
    let reply = msg.reply.as_ref().map_or(0, Bytes::len);
    (msg.subject.len() + reply + msg.size()) as i64
}

/// Adds `name: value` to a header block (or starts one).
pub(super) fn append_header(block: Option<&[u8]>, name: &str, value: &str) -> Bytes {
    let mut out = BytesMut::new();
    match block {
        Some(block) if block.ends_with(b"\r\n\r\n") => out.put_slice(&block[..block.len() - 2]),
        _ => out.put_slice(b"NATS/1.0\r\n"),
    }
    out.put_slice(name.as_bytes());
    out.put_slice(b": ");
    out.put_slice(value.as_bytes());
    out.put_slice(b"\r\n\r\n");
    out.freeze()
}

/// Sends server-originated messages to whoever subscribes a routing subject. One per
/// delivery task; cheap to clone.
#[derive(Debug, Clone)]
pub struct Outbox {
    shared: Arc<ServerShared>,
}

impl Outbox {
    pub fn new(shared: Arc<ServerShared>) -> Self {
        Outbox { shared }
    }

    /// True while someone subscribes a subject matching `route`.
    pub fn has_interest(&self, route: &Bytes) -> bool {
        !self.shared.router.matches(route).is_empty()
    }

    /// A message routed by its own subject.
    pub fn publish(&self, msg: &Message) -> bool {
        dispatch::publish(&self.shared.router, msg)
    }

    /// A status message (empty payload) to `route`.
    pub fn status(&self, route: &Bytes, headers: Bytes) -> bool {
        let msg = Message::new(route.clone(), Bytes::new()).with_headers(Some(headers));
        dispatch::publish(&self.shared.router, &msg)
    }

    /// A status message with a reply subject (flow-control requests).
    pub fn status_with_reply(&self, route: &Bytes, headers: Bytes, reply: String) -> bool {
        let msg = Message::new(route.clone(), Bytes::new())
            .with_headers(Some(headers))
            .with_reply(Some(Bytes::from(reply)));
        dispatch::publish(&self.shared.router, &msg)
    }

    /// Delivers `messages` to the subscribers of `route`, each keeping its own subject.
    /// Returns how many someone took; pauses briefly while receivers are backed up.
    pub async fn deliver(&self, route: &Bytes, messages: &[Message]) -> usize {
        let router = &self.shared.router;
        let matches = router.matches(route);
        let mut dispatch = Dispatch::default();
        dispatch.routing_by(Some(route.clone()));
        let taken = messages
            .iter()
            .filter(|msg| dispatch.route(router, &matches, msg, None))
            .count();
        dispatch.wake_all(&self.shared.stats);
        dispatch
            .pause_for_backed_up(Duration::from_millis(50))
            .await;
        taken
    }

    pub fn shared(&self) -> &Arc<ServerShared> {
        &self.shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_blocks_are_nats_servers() {
        assert_eq!(&no_messages()[..], b"NATS/1.0 404 No Messages\r\n\r\n");
        assert_eq!(
            &request_timeout(1, 0)[..],
            &b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\nNats-Pending-Bytes: 0\r\n\r\n"[..]
        );
        assert_eq!(
            &conflict("Exceeded MaxWaiting")[..],
            b"NATS/1.0 409 Exceeded MaxWaiting\r\n\r\n"
        );
        assert_eq!(
            &bad_request("heartbeat value too large")[..],
            &b"NATS/1.0 400 Bad Request - heartbeat value too large\r\n\r\n"[..]
        );
        let heartbeat = idle_heartbeat(0, 0, None);
        assert_eq!(
            &heartbeat[..],
            &b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n"
                [..]
        );
        assert_eq!(heartbeat.len(), 75, "ADR-9 example length");
        let stalled = idle_heartbeat(3, 9, Some("$JS.FC.S.C.abcd"));
        assert!(stalled.ends_with(b"Nats-Consumer-Stalled: $JS.FC.S.C.abcd\r\n\r\n"));
        assert_eq!(
            &flow_control_request()[..],
            b"NATS/1.0 100 FlowControl Request\r\n\r\n"
        );
    }

    #[test]
    fn ack_subjects() {
        let delivery = Delivery {
            stream_seq: 7,
            consumer_seq: 3,
            deliveries: 2,
            pending_count: 5,
        };
        assert_eq!(
            ack_subject("ORDERS", "proc", &delivery, 1_755_770_400_000_000_000),
            "$JS.ACK.ORDERS.proc.2.7.3.1755770400000000000.5"
        );
    }

    #[test]
    fn flow_control_subjects() {
        let subject = flow_control_subject("S", "C");
        assert!(subject.starts_with("$JS.FC.S.C."));
        assert_eq!(subject.len(), "$JS.FC.S.C.".len() + 4);
        assert_eq!(parse_flow_control_subject(&subject), Some(("S", "C")));
        assert_eq!(parse_flow_control_subject("$JS.FC.S"), None);
        assert_eq!(parse_flow_control_subject("$JS.ACK.S.C.x"), None);
    }

    #[test]
    fn delivered_messages_keep_their_subject_and_headers() {
        let stored = StoredMsg {
            subject: "orders.new".into(),
            headers: Some(Bytes::from_static(b"NATS/1.0\r\nA: b\r\n\r\n")),
            payload: Bytes::from_static(b"Order #1234"),
            ts_nanos: 5,
        };
        let msg = delivered_message(&stored, "$JS.ACK.S.C.1.1.1.5.0".into(), false);
        assert_eq!(&msg.subject[..], b"orders.new");
        assert_eq!(msg.reply.as_deref(), Some(&b"$JS.ACK.S.C.1.1.1.5.0"[..]));
        assert_eq!(msg.headers, stored.headers);
        assert_eq!(charged_size(&msg), (10 + 21 + 18 + 11) as i64);

        let only = delivered_message(&stored, "r".into(), true);
        assert!(only.payload.is_empty());
        assert_eq!(
            only.headers.as_deref(),
            Some(&b"NATS/1.0\r\nA: b\r\nNats-Msg-Size: 11\r\n\r\n"[..])
        );
        let bare = StoredMsg {
            headers: None,
            ..stored
        };
        let only = delivered_message(&bare, "r".into(), true);
        assert_eq!(
            only.headers.as_deref(),
            Some(&b"NATS/1.0\r\nNats-Msg-Size: 11\r\n\r\n"[..])
        );
    }
}
