//! Counter streams (ADR-49, `allow_msg_counter`): a publish carries `Nats-Incr: <integer>`
//! and no payload; the stream stores, on the same subject, the message with the counter's
//! new value as its body, `{"val":"<integer>"}`, and the PubAck reports it (`val`). The value
//! is the last stored message of the subject's value plus the increment, in arbitrary
//! precision (`decimal.rs`), as nats-server computes it with Go's `big.Int`.
//!
//! A message copied from a source (it has `Nats-Stream-Source`) is not an increment of
//! its own: its body is the origin's value, and the stream adds the difference to what it
//! last took from that origin subject, keeping what it took per origin stream and subject in
//! the `Nats-Counter-Sources` header (JSON `{"<stream>":{"<subject>":"<value>"}}`); the
//! stored `Nats-Incr` becomes that difference. Later increments carry the header forward.
//!
//! Computed while applying, from the body of the subject's last message, which the caller
//! passes in (`CounterBase`; the stream state keeps no bodies, ADR 0016): every replica
//! applies the same commands to the same bodies and gets the same value (ADR 0020).
//!
//! The checks and their errors are nats-server's (`checkMsgHeadersPreClusteredProposal`):
//! a bad increment, or `Nats-Incr` with a rollup or any `Nats-Expected-*` header, is 10171;
//! `Nats-Incr` on a stream that is no counter stream 10168; a payload 10170; a counter
//! stream publish without `Nats-Incr` 10169; a last value that does not parse 10172.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::wire::headers::lookup;

use super::decimal::BigInt;
use super::error::AppendError;
use super::publish_headers::{
    EXPECTED_LAST_MSG_ID, EXPECTED_LAST_SEQ, EXPECTED_LAST_SUBJECT_SEQ,
    EXPECTED_LAST_SUBJECT_SEQ_SUBJECT, EXPECTED_STREAM, ROLLUP,
};
use super::unsupported_headers::MSG_INCR;

pub const COUNTER_SOURCES: &str = "Nats-Counter-Sources";
const STREAM_SOURCE: &str = "Nats-Stream-Source";

/// Whether a stream is a counter stream (its `allow_msg_counter`, fixed at creation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgCounters {
    Allowed,
    Disabled,
}

/// The body of the last message on the counted subject: where the counter stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterBase {
    pub headers: Option<Bytes>,
    pub payload: Bytes,
}

/// What a counter stream stores for one increment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub headers: Bytes,
    pub payload: Bytes,
    /// The new value, for the PubAck.
    pub value: String,
}

/// What the origin values a counter took from its sources are:
/// origin stream → origin subject → value. Sorted, as Go's `json.Marshal` writes a map.
type CounterSources = BTreeMap<String, BTreeMap<String, String>>;

#[derive(serde::Serialize, serde::Deserialize)]
struct CounterValue {
    val: String,
}

/// The value of a header, `None` when absent or empty (nats-server treats both alike).
fn header<'a>(block: &'a [u8], name: &str) -> Option<&'a [u8]> {
    lookup(block, name)
        .map(<[u8]>::trim_ascii_end)
        .filter(|value| !value.is_empty())
}

/// The checks of a `Nats-Incr` header that need only the publish: on the leader before
/// proposing (`unsupported_headers`) and again while applying. `payload_len` is `None` where
/// the payload is not at hand (the leader checks it while applying).
pub fn check_increment(
    block: &[u8],
    payload_len: Option<usize>,
    counters: MsgCounters,
) -> Result<(), AppendError> {
    let Some(incr) = header(block, MSG_INCR) else {
        return Ok(());
    };
    if BigInt::parse(incr).is_none() {
        return Err(AppendError::CounterIncrementInvalid);
    }
    if counters == MsgCounters::Disabled {
        return Err(AppendError::CountersDisabled);
    }
    if payload_len.is_some_and(|len| len > 0) {
        return Err(AppendError::CounterHasPayload);
    }
    let incompatible = [
        ROLLUP,
        EXPECTED_STREAM,
        EXPECTED_LAST_MSG_ID,
        EXPECTED_LAST_SUBJECT_SEQ_SUBJECT,
        EXPECTED_LAST_SEQ,
        EXPECTED_LAST_SUBJECT_SEQ,
    ];
    if incompatible
        .iter()
        .any(|name| header(block, name).is_some())
    {
        return Err(AppendError::CounterIncrementInvalid);
    }
    Ok(())
}

/// The message a counter stream stores for a message on `subject` with `headers` and
/// `payload` (a publish, or a copy from a source when `headers` has `Nats-Stream-Source`),
/// given the body of the subject's last message (`None`: the counter starts at zero).
pub fn count(
    subject: &str,
    headers: Option<&[u8]>,
    payload: &[u8],
    base: Option<&CounterBase>,
) -> Result<Counted, AppendError> {
    let block = headers.unwrap_or_default();
    let incr = header(block, MSG_INCR).ok_or(AppendError::CounterIncrementMissing)?;
    let mut incr = BigInt::parse(incr).ok_or(AppendError::CounterIncrementInvalid)?;
    let (mut value, mut sources) = match base {
        Some(base) => (
            parse_value(&base.payload)?,
            match base
                .headers
                .as_deref()
                .and_then(|b| header(b, COUNTER_SOURCES))
            {
                Some(json) => {
                    serde_json::from_slice(json).map_err(|_| AppendError::CounterBroken)?
                }
                None => CounterSources::new(),
            },
        ),
        None => (BigInt::default(), CounterSources::new()),
    };
    let mut stored = block.to_vec();
    if let Some(source) = header(block, STREAM_SOURCE) {
        // A copy: the origin's value replaces what was taken from that origin subject.
        let source = String::from_utf8_lossy(source);
        let mut fields = source.split(' ');
        let origin_stream = fields.next().unwrap_or_default().to_owned();
        let origin_subject = fields.nth(3).unwrap_or(subject).to_owned();
        let origin_value = parse_value(payload)?;
        let taken = sources.entry(origin_stream).or_default();
        let previous = taken
            .insert(origin_subject, origin_value.to_string())
            .and_then(|text| BigInt::parse(text.as_bytes()))
            .unwrap_or_default();
        incr = origin_value.sub(&previous);
        stored = set_header(&stored, MSG_INCR, &incr.to_string());
    }
    value = value.add(&incr);
    if !sources.is_empty() {
        let json = serde_json::to_string(&sources).map_err(|_| AppendError::CounterBroken)?;
        stored = set_header(&stored, COUNTER_SOURCES, &json);
    }
    let value = value.to_string();
    Ok(Counted {
        headers: Bytes::from(stored),
        payload: value_body(&value),
        value,
    })
}

/// The body a counter stream stores for `value`: `{"val":"<value>"}`.
pub fn value_body(value: &str) -> Bytes {
    let body = CounterValue {
        val: value.to_owned(),
    };
    Bytes::from(serde_json::to_vec(&body).expect("a string serializes"))
}

/// A stored counter body's value; anything else is a broken counter (10172).
fn parse_value(payload: &[u8]) -> Result<BigInt, AppendError> {
    let value: CounterValue =
        serde_json::from_slice(payload).map_err(|_| AppendError::CounterBroken)?;
    BigInt::parse(value.val.as_bytes()).ok_or(AppendError::CounterBroken)
}

/// `block` with header `name` set to `value`: replaced in place where it is, else added
/// last (nats-server's `setHeader`).
fn set_header(block: &[u8], name: &str, value: &str) -> Vec<u8> {
    let text = String::from_utf8_lossy(block);
    let mut lines: Vec<String> = text
        .split("\r\n")
        .filter(|line| !line.is_empty())
        .map(str::to_owned)
        .collect();
    if lines.is_empty() {
        lines.push("NATS/1.0".to_owned());
    }
    let prefix = format!("{name}:");
    let line = format!("{name}: {value}");
    match lines.iter_mut().skip(1).find(|l| l.starts_with(&prefix)) {
        Some(existing) => *existing = line,
        None => lines.push(line),
    }
    let mut out = lines.join("\r\n").into_bytes();
    out.extend_from_slice(b"\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::jscore::stream::publish_headers::header_block as block;

    fn base(counted: &Counted) -> CounterBase {
        CounterBase {
            headers: Some(counted.headers.clone()),
            payload: counted.payload.clone(),
        }
    }

    #[test]
    fn increments_add_to_the_last_value_beyond_64_bits() {
        let first = count("c.a", Some(&block(&[("Nats-Incr", "5")])), b"", None).unwrap();
        assert_eq!(first.value, "5");
        assert_eq!(&first.payload[..], br#"{"val":"5"}"#);
        assert_eq!(&first.headers[..], &block(&[("Nats-Incr", "5")])[..]);
        let big = "99999999999999999999999";
        let second = count(
            "c.a",
            Some(&block(&[("Nats-Incr", big)])),
            b"",
            Some(&base(&first)),
        );
        assert_eq!(second.unwrap().value, "100000000000000000000004");
        let down = count(
            "c.a",
            Some(&block(&[("Nats-Incr", "-7")])),
            b"",
            Some(&base(&first)),
        );
        assert_eq!(down.unwrap().value, "-2");
    }

    #[test]
    fn errors_are_nats_servers() {
        let none = count("c.a", None, b"", None);
        assert_eq!(none, Err(AppendError::CounterIncrementMissing));
        let broken = CounterBase {
            headers: None,
            payload: Bytes::from_static(b"not json"),
        };
        let incr = block(&[("Nats-Incr", "1")]);
        assert_eq!(
            count("c.a", Some(&incr), b"", Some(&broken)),
            Err(AppendError::CounterBroken)
        );
        let check = |headers: &[(&str, &str)], payload: usize, counters| {
            check_increment(&block(headers), Some(payload), counters)
        };
        assert_eq!(
            check(&[("Nats-Incr", "1")], 0, MsgCounters::Allowed),
            Ok(())
        );
        assert_eq!(check(&[], 3, MsgCounters::Allowed), Ok(()));
        assert_eq!(
            check(&[("Nats-Incr", "1")], 0, MsgCounters::Disabled),
            Err(AppendError::CountersDisabled)
        );
        assert_eq!(
            check(&[("Nats-Incr", "x")], 0, MsgCounters::Disabled),
            Err(AppendError::CounterIncrementInvalid)
        );
        assert_eq!(
            check(&[("Nats-Incr", "1")], 2, MsgCounters::Allowed),
            Err(AppendError::CounterHasPayload)
        );
        for incompatible in [
            "Nats-Rollup",
            "Nats-Expected-Stream",
            "Nats-Expected-Last-Msg-Id",
            "Nats-Expected-Last-Subject-Sequence-Subject",
            "Nats-Expected-Last-Sequence",
            "Nats-Expected-Last-Subject-Sequence",
        ] {
            assert_eq!(
                check(
                    &[("Nats-Incr", "1"), (incompatible, "1")],
                    0,
                    MsgCounters::Allowed
                ),
                Err(AppendError::CounterIncrementInvalid),
                "{incompatible}"
            );
        }
        // A message id is compatible: a retried increment is deduplicated.
        assert_eq!(
            check(
                &[("Nats-Incr", "1"), ("Nats-Msg-Id", "m")],
                0,
                MsgCounters::Allowed
            ),
            Ok(())
        );
        for (error, code) in [
            (AppendError::CounterIncrementMissing, 10169),
            (AppendError::CounterHasPayload, 10170),
            (AppendError::CounterBroken, 10172),
        ] {
            let api = error.to_api_error();
            assert_eq!((api.code, api.err_code), (400, code), "{error}");
        }
    }

    #[test]
    fn sourced_values_add_their_difference_and_are_remembered_per_origin() {
        let sourced = |value: &str, base: Option<&CounterBase>| {
            let headers = block(&[("Nats-Incr", "1"), ("Nats-Stream-Source", "A 7 > >")]);
            let body = format!(r#"{{"val":"{value}"}}"#);
            count("c.a", Some(&headers), body.as_bytes(), base).unwrap()
        };
        let first = sourced("10", None);
        assert_eq!(first.value, "10");
        assert_eq!(
            lookup(&first.headers, COUNTER_SOURCES),
            Some(&br#"{"A":{"c.a":"10"}}"#[..])
        );
        assert_eq!(lookup(&first.headers, MSG_INCR), Some(&b"10"[..]));
        // A local increment keeps the sources.
        let local = count(
            "c.a",
            Some(&block(&[("Nats-Incr", "3")])),
            b"",
            Some(&base(&first)),
        )
        .unwrap();
        assert_eq!(local.value, "13");
        assert!(lookup(&local.headers, COUNTER_SOURCES).is_some());
        // The origin moved from 10 to 12: only the difference is added.
        let second = sourced("12", Some(&base(&local)));
        assert_eq!(second.value, "15");
        assert_eq!(lookup(&second.headers, MSG_INCR), Some(&b"2"[..]));
        assert_eq!(
            lookup(&second.headers, COUNTER_SOURCES),
            Some(&br#"{"A":{"c.a":"12"}}"#[..])
        );
    }
}
