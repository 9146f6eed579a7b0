//! `NATS/1.0` header blocks: building the status messages the server originates, and looking
//! up a header in a block a client sent (exact, case-sensitive, first occurrence wins, as
//! nats-server does for its own `Nats-*` headers).
//!
//! Application headers are never rewritten: the server forwards the client's block byte-exact.

use bytes::{BufMut, Bytes, BytesMut};

/// Builds a header block with a status line, e.g. `NATS/1.0 503` or `NATS/1.0 404 No Messages`.
pub fn status_block(status: u16, description: Option<&str>, headers: &[(&str, &str)]) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_slice(b"NATS/1.0 ");
    out.put_slice(itoa::Buffer::new().format(status).as_bytes());
    if let Some(description) = description {
        out.put_u8(b' ');
        out.put_slice(description.as_bytes());
    }
    out.put_slice(b"\r\n");
    for (name, value) in headers {
        out.put_slice(name.as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    out.put_slice(b"\r\n");
    out.freeze()
}

/// The value of the first header named exactly `name`, with leading spaces skipped.
pub fn lookup<'a>(block: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let mut lines = block.split(|b| *b == b'\n').skip(1);
    lines.find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let rest = line.strip_prefix(name.as_bytes())?.strip_prefix(b":")?;
        let start = rest.iter().position(|b| *b != b' ').unwrap_or(rest.len());
        Some(&rest[start..])
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_responders_block_has_nats_server_length() {
        let block = status_block(503, None, &[("Nats-Subject", "svc.x")]);
        assert_eq!(&block[..], b"NATS/1.0 503\r\nNats-Subject: svc.x\r\n\r\n");
        assert_eq!(block.len(), 32 + "svc.x".len());
    }

    #[test]
    fn status_with_description() {
        assert_eq!(
            &status_block(404, Some("No Messages"), &[])[..],
            b"NATS/1.0 404 No Messages\r\n\r\n"
        );
    }

    #[test]
    fn lookup_is_exact_and_first_wins() {
        let block =
            b"NATS/1.0\r\nnats-msg-id: lower\r\nNats-Msg-Id:   one\r\nNats-Msg-Id: two\r\n\r\n";
        assert_eq!(lookup(block, "Nats-Msg-Id"), Some(&b"one"[..]));
        assert_eq!(lookup(block, "Nats-Msg"), None);
        assert_eq!(lookup(block, "Missing"), None);
    }
}
