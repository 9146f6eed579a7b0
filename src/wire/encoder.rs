//! Writing server operations into a connection's outbound buffer.
//!
//! Functions append to a caller-owned `BytesMut` so that many messages for one client are
//! batched into one socket write. Everything the server sends is upper case (async-nats and
//! nats-py only recognise upper-case operations).

use bytes::{BufMut, BytesMut};

pub const PING: &[u8] = b"PING\r\n";
pub const PONG: &[u8] = b"PONG\r\n";
pub const OK: &[u8] = b"+OK\r\n";

/// A message to deliver: the published subject, the reply subject and the body, plus the
/// header block for HMSG.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub subject: &'a [u8],
    pub reply: Option<&'a [u8]>,
    pub headers: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

impl Delivery<'_> {
    /// Bytes the delivery adds to an outbound buffer (excluding the sid), for accounting.
    pub fn body_len(&self) -> usize {
        self.headers.map_or(0, <[u8]>::len) + self.payload.len()
    }
}

/// The most bytes [`write_delivery`] appends for `msg` to `sid`.
pub fn delivery_len(sid: &[u8], msg: &Delivery<'_>) -> usize {
    let reply_len = msg.reply.map_or(0, |r| r.len() + 1);
    // "HMSG ", three spaces, two lengths of at most 20 digits, two CRLFs.
    const FRAMING: usize = 5 + 3 + 2 * 20 + 4;
    msg.subject.len() + sid.len() + reply_len + msg.body_len() + FRAMING
}

/// Appends `MSG` (or `HMSG` when the delivery has headers) addressed to subscription `sid`.
pub fn write_delivery(out: &mut BytesMut, sid: &[u8], msg: &Delivery<'_>) {
    out.reserve(delivery_len(sid, msg));
    match msg.headers {
        None => out.put_slice(b"MSG "),
        Some(_) => out.put_slice(b"HMSG "),
    }
    out.put_slice(msg.subject);
    out.put_u8(b' ');
    out.put_slice(sid);
    if let Some(reply) = msg.reply {
        out.put_u8(b' ');
        out.put_slice(reply);
    }
    let mut digits = itoa::Buffer::new();
    if let Some(headers) = msg.headers {
        out.put_u8(b' ');
        out.put_slice(digits.format(headers.len()).as_bytes());
    }
    out.put_u8(b' ');
    out.put_slice(digits.format(msg.body_len()).as_bytes());
    out.put_slice(b"\r\n");
    if let Some(headers) = msg.headers {
        out.put_slice(headers);
    }
    out.put_slice(msg.payload);
    out.put_slice(b"\r\n");
}

/// The bytes [`write_err`] appends for `text`.
pub fn err_len(text: &str) -> usize {
    text.len() + 9
}

/// Appends `-ERR '<text>'`.
pub fn write_err(out: &mut BytesMut, text: &str) {
    out.reserve(err_len(text));
    out.put_slice(b"-ERR '");
    out.put_slice(text.as_bytes());
    out.put_slice(b"'\r\n");
}

/// Appends `INFO <json>`.
pub fn write_info(out: &mut BytesMut, json: &[u8]) {
    out.reserve(json.len() + 8);
    out.put_slice(b"INFO ");
    out.put_slice(json);
    // nats-server puts a space before the CRLF.
    out.put_slice(b" \r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode(sid: &str, msg: Delivery<'_>) -> String {
        let mut out = BytesMut::new();
        write_delivery(&mut out, sid.as_bytes(), &msg);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn msg_with_and_without_reply() {
        let msg = Delivery {
            subject: b"foo.bar",
            reply: None,
            headers: None,
            payload: b"hello",
        };
        assert_eq!(encode("9", msg), "MSG foo.bar 9 5\r\nhello\r\n");
        let msg = Delivery {
            reply: Some(b"_INBOX.x"),
            payload: b"",
            ..msg
        };
        assert_eq!(encode("9", msg), "MSG foo.bar 9 _INBOX.x 0\r\n\r\n");
    }

    #[test]
    fn hmsg_counts_header_and_total_bytes() {
        let msg = Delivery {
            subject: b"s",
            reply: Some(b"r"),
            headers: Some(b"NATS/1.0\r\nA: b\r\n\r\n"),
            payload: b"xy",
        };
        assert_eq!(
            encode("1", msg),
            "HMSG s 1 r 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nxy\r\n"
        );
    }

    #[test]
    fn err_is_quoted() {
        let mut out = BytesMut::new();
        write_err(&mut out, "Stale Connection");
        assert_eq!(&out[..], b"-ERR 'Stale Connection'\r\n");
    }
}
