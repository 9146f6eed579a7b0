//! Per-message TTLs (ADR-43) as nats-server reads them, and the subject delete marker a
//! stream with `subject_delete_marker_ttl` leaves when a subject's last message expires.
//!
//! A `Nats-TTL` value is `never` (any case), a Go duration of at least one second
//! (`90s`, `1h30m`; truncated to whole seconds), or a whole number of seconds (`0` means
//! no TTL, except the bare Go duration `"0"`, which parses first and is under a second).
//! Anything else is invalid (10165). nats-server's `parseMessageTTL` and Go's
//! `time.ParseDuration` are the reference; `-1` is invalid there too (its integer parser
//! takes digits only), `never` is the only way to say "never expires".
//!
//! Pure and replicated: a message's TTL is a function of its stored header block, so every
//! replica, and a replica reloading its state, reads the same TTL.

use crate::jsapi::time::{parse_go_duration, NANOS_PER_SEC};
use crate::wire::headers::lookup;

pub const MSG_TTL: &str = "Nats-TTL";
pub const MARKER_REASON: &str = "Nats-Marker-Reason";
pub const KV_OPERATION: &str = "KV-Operation";

/// What a message's `Nats-TTL` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MsgTtl {
    /// No header, an empty one, or a zero number of seconds.
    None,
    /// `never`: exempt from `max_age` too.
    Never,
    /// Expires this many seconds after its stream timestamp.
    Seconds(u64),
}

/// The `Nats-TTL` value could not be read (nats-server's JSMessageTTLInvalidError).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidTtl;

/// The TTL a header block asks for.
pub fn msg_ttl(headers: &[u8]) -> Result<MsgTtl, InvalidTtl> {
    match lookup(headers, MSG_TTL).map(<[u8]>::trim_ascii) {
        None | Some(b"") => Ok(MsgTtl::None),
        Some(value) => parse_ttl(value),
    }
}

/// nats-server's `parseMessageTTL`.
pub fn parse_ttl(value: &[u8]) -> Result<MsgTtl, InvalidTtl> {
    if value.eq_ignore_ascii_case(b"never") {
        return Ok(MsgTtl::Never);
    }
    let text = std::str::from_utf8(value).map_err(|_| InvalidTtl)?;
    if let Some(nanos) = parse_go_duration(text) {
        return match nanos {
            n if n < NANOS_PER_SEC => Err(InvalidTtl),
            n => Ok(MsgTtl::Seconds((n / NANOS_PER_SEC) as u64)),
        };
    }
    // nats-server's `parseInt64`: ASCII digits only, no sign.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(InvalidTtl);
    }
    match text.parse::<u64>() {
        Ok(0) => Ok(MsgTtl::None),
        Ok(seconds) if seconds <= i64::MAX as u64 => Ok(MsgTtl::Seconds(seconds)),
        _ => Err(InvalidTtl),
    }
}

/// Go's `time.Duration.String()` of a whole number of seconds (`5s`, `1m0s`, `1h0m0s`),
/// which is how nats-server writes a marker's `Nats-TTL`.
pub fn go_duration_string(seconds: u64) -> String {
    let (hours, minutes, secs) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{minutes}m{secs}s"),
        _ => format!("{hours}h{minutes}m{secs}s"),
    }
}

/// The header block of the delete marker nats-server writes (`handleRemovalOrSdm`) when a
/// subject's last message ages out: reason `MaxAge`, the marker's own TTL and a subject
/// rollup. Its payload is empty.
pub fn marker_headers(marker_ttl_seconds: u64) -> Vec<u8> {
    format!(
        "NATS/1.0\r\n{MARKER_REASON}: MaxAge\r\n{MSG_TTL}: {}\r\nNats-Rollup: sub\r\n\r\n",
        go_duration_string(marker_ttl_seconds)
    )
    .into_bytes()
}

/// Whether a message is itself a tombstone (a delete marker or a key-value purge), whose
/// expiry leaves no new marker behind (nats-server's `isSubjectDeleteMarker`).
pub fn is_tombstone(headers: &[u8]) -> bool {
    lookup(headers, MARKER_REASON).is_some_and(|value| !value.is_empty())
        || lookup(headers, KV_OPERATION).is_some_and(|value| value.trim_ascii() == b"PURGE")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ttls_as_nats_server() {
        let ok = |value: &str| parse_ttl(value.as_bytes());
        assert_eq!(ok("never"), Ok(MsgTtl::Never));
        assert_eq!(ok("NeVeR"), Ok(MsgTtl::Never));
        assert_eq!(ok("1"), Ok(MsgTtl::Seconds(1)));
        assert_eq!(ok("60"), Ok(MsgTtl::Seconds(60)));
        assert_eq!(ok("1m"), Ok(MsgTtl::Seconds(60)));
        assert_eq!(ok("1.5s"), Ok(MsgTtl::Seconds(1)));
        assert_eq!(ok("1h30m"), Ok(MsgTtl::Seconds(5400)));
        assert_eq!(ok("2500ms"), Ok(MsgTtl::Seconds(2)));
        assert_eq!(ok("+3s"), Ok(MsgTtl::Seconds(3)));
        assert_eq!(ok("00"), Ok(MsgTtl::None));
        for invalid in [
            "0",
            "0s",
            "500ms",
            "-1",
            "-1s",
            "banana",
            "1x",
            "1.",
            ".s",
            "s",
            "1e3",
            " ",
            "99999999999999999999",
        ] {
            assert_eq!(ok(invalid), Err(InvalidTtl), "{invalid:?}");
        }
        let block = b"NATS/1.0\r\nNats-TTL: 2s\r\n\r\n";
        assert_eq!(msg_ttl(block), Ok(MsgTtl::Seconds(2)));
        assert_eq!(msg_ttl(b"NATS/1.0\r\nA: b\r\n\r\n"), Ok(MsgTtl::None));
    }

    #[test]
    fn durations_print_as_go() {
        assert_eq!(go_duration_string(5), "5s");
        assert_eq!(go_duration_string(60), "1m0s");
        assert_eq!(go_duration_string(3600), "1h0m0s");
        assert_eq!(go_duration_string(3725), "1h2m5s");
    }

    #[test]
    fn markers_and_purges_are_tombstones() {
        let marker = marker_headers(60);
        assert_eq!(
            marker,
            b"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 1m0s\r\nNats-Rollup: sub\r\n\r\n"
        );
        assert!(is_tombstone(&marker));
        assert_eq!(msg_ttl(&marker), Ok(MsgTtl::Seconds(60)));
        assert!(is_tombstone(b"NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n"));
        assert!(!is_tombstone(b"NATS/1.0\r\nKV-Operation: DEL\r\n\r\n"));
    }
}
