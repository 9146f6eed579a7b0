//! `$JS.API.DIRECT.GET.<S>[.<subject…>]` as nats-server answers it: not JSON but the stored
//! message itself, its header block extended with `Nats-Stream`, `Nats-Subject`,
//! `Nats-Sequence` and `Nats-Time-Stamp` (plus `Nats-Num-Pending`/`Nats-Last-Sequence` in a
//! batch), and failures as header-only status messages (`408 Bad Request`, `404 Message Not
//! Found`, …). A batch or multi-last request ends with a `204 EOB` status message.

use super::msg_get::MsgGetRequest;

/// Most messages one multi-last request may select (nats-server's `maxAllowedResponses`).
pub const MAX_MULTI_LAST: usize = 1024;

/// A header-only status reply of a direct get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectStatus {
    EmptyRequest,
    MalformedRequest,
    BadRequest,
    MessageNotFound,
    NoResults,
    TooManyResults,
}

impl DirectStatus {
    /// The `NATS/1.0 <code> <description>` header block.
    pub fn header_block(self) -> Vec<u8> {
        let line: &str = match self {
            DirectStatus::EmptyRequest => "408 Empty Request",
            DirectStatus::MalformedRequest => "408 Malformed Request",
            DirectStatus::BadRequest => "408 Bad Request",
            DirectStatus::MessageNotFound => "404 Message Not Found",
            DirectStatus::NoResults => "404 No Results",
            DirectStatus::TooManyResults => "413 Too Many Results",
        };
        format!("NATS/1.0 {line}\r\n\r\n").into_bytes()
    }
}

/// The JSON form's body, checked as nats-server's `processDirectGetRequest` checks it: an
/// empty body or one choosing nothing is an empty request, contradictory choices a bad one.
pub fn parse_request(body: &[u8]) -> Result<MsgGetRequest, DirectStatus> {
    if body.is_empty() {
        return Err(DirectStatus::EmptyRequest);
    }
    let request: MsgGetRequest =
        serde_json::from_slice(body).map_err(|_| DirectStatus::MalformedRequest)?;
    let has_seq = request.seq > 0;
    let has_last = !request.last_by_subj.is_empty();
    let has_next = !request.next_by_subj.is_empty();
    let has_multi = !request.multi_last.is_empty();
    let has_time = request.start_time.is_some();
    if !has_seq && !has_last && !has_next && !has_multi && !has_time {
        return Err(DirectStatus::EmptyRequest);
    }
    let conflicting = (has_seq && (has_last || has_time))
        || (has_last && (has_time || has_next || has_multi || request.batch > 0))
        || (has_next && has_multi)
        || (request.up_to_seq > 0 && request.up_to_time.is_some());
    if conflicting {
        return Err(DirectStatus::BadRequest);
    }
    Ok(request)
}

/// What a direct reply says about the message it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectMsgMeta<'a> {
    pub stream: &'a str,
    pub subject: &'a str,
    pub seq: u64,
    pub ts_nanos: i64,
    /// In a batch or multi-last reply: messages still pending after this one, and the
    /// sequence of the message sent before it (0 for the first).
    pub batch: Option<(u64, u64)>,
}

/// The header block of a direct reply: the stored block (if any, and unless the request
/// asked for none) with the `Nats-*` headers appended, as nats-server's `genHeader` does.
pub fn message_headers(stored: Option<&[u8]>, meta: &DirectMsgMeta<'_>) -> Vec<u8> {
    let mut block = StoredHeaders::extend(stored);
    block.line("Nats-Stream", meta.stream);
    block.line("Nats-Subject", meta.subject);
    block.line("Nats-Sequence", &meta.seq.to_string());
    let time = super::time::Timestamp::from_unix_nanos(meta.ts_nanos).to_string();
    block.line("Nats-Time-Stamp", &time);
    if let Some((pending, last)) = meta.batch {
        block.line("Nats-Num-Pending", &pending.to_string());
        block.line("Nats-Last-Sequence", &last.to_string());
    }
    block.finish()
}

/// A stored message's header block with headers appended (direct replies, republished
/// messages): the stored block without its final blank line, or a bare `NATS/1.0` line when
/// the message had none; `finish` ends it.
pub(crate) struct StoredHeaders(Vec<u8>);

impl StoredHeaders {
    pub(crate) fn extend(stored: Option<&[u8]>) -> StoredHeaders {
        StoredHeaders(match stored {
            Some(stored) if stored.len() > 2 && stored.ends_with(b"\r\n\r\n") => {
                stored[..stored.len() - 2].to_vec()
            }
            _ => b"NATS/1.0\r\n".to_vec(),
        })
    }

    pub(crate) fn line(&mut self, name: &str, value: &str) {
        self.0.extend_from_slice(name.as_bytes());
        self.0.extend_from_slice(b": ");
        self.0.extend_from_slice(value.as_bytes());
        self.0.extend_from_slice(b"\r\n");
    }

    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(b"\r\n");
        self.0
    }
}

/// The `204 EOB` status that ends a batch (`up_to` only for multi-last requests).
pub fn end_of_batch(pending: u64, last_seq: u64, up_to: Option<u64>) -> Vec<u8> {
    let mut block = format!(
        "NATS/1.0 204 EOB\r\nNats-Num-Pending: {pending}\r\nNats-Last-Sequence: {last_seq}\r\n"
    );
    if let Some(up_to) = up_to {
        block.push_str(&format!("Nats-UpTo-Sequence: {up_to}\r\n"));
    }
    block.push_str("\r\n");
    block.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_as_nats_server_does() {
        assert_eq!(parse_request(b"").unwrap_err(), DirectStatus::EmptyRequest);
        assert_eq!(
            parse_request(b"{}").unwrap_err(),
            DirectStatus::EmptyRequest
        );
        assert_eq!(
            parse_request(b"{nope").unwrap_err(),
            DirectStatus::MalformedRequest
        );
        for bad in [
            r#"{"seq":1,"last_by_subj":"a"}"#,
            r#"{"last_by_subj":"a","batch":2}"#,
            r#"{"next_by_subj":"a","multi_last":["b"]}"#,
            r#"{"multi_last":["a"],"up_to_seq":3,"up_to_time":"2024-01-01T00:00:00Z"}"#,
        ] {
            assert_eq!(
                parse_request(bad.as_bytes()).unwrap_err(),
                DirectStatus::BadRequest,
                "{bad}"
            );
        }
        let ok = parse_request(br#"{"seq":3,"batch":2,"next_by_subj":"a.*"}"#).unwrap();
        assert_eq!((ok.seq, ok.batch, ok.next_by_subj.as_str()), (3, 2, "a.*"));
    }

    #[test]
    fn headers_extend_the_stored_block() {
        let meta = DirectMsgMeta {
            stream: "KV_A",
            subject: "$KV.A.k",
            seq: 7,
            ts_nanos: 1_500_000_000,
            batch: None,
        };
        assert_eq!(
            String::from_utf8(message_headers(None, &meta)).unwrap(),
            "NATS/1.0\r\nNats-Stream: KV_A\r\nNats-Subject: $KV.A.k\r\nNats-Sequence: 7\r\n\
             Nats-Time-Stamp: 1970-01-01T00:00:01.5Z\r\n\r\n"
        );
        let stored = b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n";
        let batch = DirectMsgMeta {
            batch: Some((2, 5)),
            ..meta
        };
        assert_eq!(
            String::from_utf8(message_headers(Some(stored), &batch)).unwrap(),
            "NATS/1.0\r\nKV-Operation: DEL\r\nNats-Stream: KV_A\r\nNats-Subject: $KV.A.k\r\n\
             Nats-Sequence: 7\r\nNats-Time-Stamp: 1970-01-01T00:00:01.5Z\r\n\
             Nats-Num-Pending: 2\r\nNats-Last-Sequence: 5\r\n\r\n"
        );
    }

    #[test]
    fn statuses_and_end_of_batch() {
        assert_eq!(
            DirectStatus::MessageNotFound.header_block(),
            b"NATS/1.0 404 Message Not Found\r\n\r\n"
        );
        assert_eq!(
            end_of_batch(0, 9, Some(12)),
            b"NATS/1.0 204 EOB\r\nNats-Num-Pending: 0\r\nNats-Last-Sequence: 9\r\nNats-UpTo-Sequence: 12\r\n\r\n"
        );
    }
}
