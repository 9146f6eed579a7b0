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
            n if n < NANOS_PER_SECOND as i128 => Err(InvalidTtl),
            n => Ok(MsgTtl::Seconds((n / NANOS_PER_SECOND as i128) as u64)),
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

const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers (with an
/// optional fraction) each followed by a unit (`ns`, `us`, `µs`, `μs`, `ms`, `s`, `m`,
/// `h`); `"0"` alone is allowed. `None` where Go returns an error (including overflow).
pub fn parse_go_duration(text: &str) -> Option<i128> {
    const MAX: u128 = i64::MAX as u128 + 1;
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let whole: u128 = if digits > 0 {
            rest[..digits].parse().ok().filter(|v| *v < MAX)?
        } else {
            0
        };
        rest = &rest[digits..];
        let (mut fraction, mut scale, mut fraction_digits) = (0u128, 1u128, 0usize);
        if let Some(after_dot) = rest.strip_prefix('.') {
            fraction_digits = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            for digit in after_dot[..fraction_digits].bytes() {
                // Go stops accumulating once more digits could not matter.
                if scale < 10u128.pow(30) {
                    fraction = fraction * 10 + u128::from(digit - b'0');
                    scale *= 10;
                }
            }
            rest = &after_dot[fraction_digits..];
        }
        if digits == 0 && fraction_digits == 0 {
            return None;
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(at, _)| at);
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        let mut value = whole.checked_mul(unit).filter(|v| *v <= MAX)?;
        value += fraction * unit / scale;
        total += value;
        if total > MAX {
            return None;
        }
    }
    if negative {
        Some(-(total as i128))
    } else if total > i64::MAX as u128 {
        None
    } else {
        Some(total as i128)
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
    fn go_durations_parse_and_print_as_go() {
        assert_eq!(parse_go_duration("1h2m3.5s"), Some(3_723_500_000_000));
        assert_eq!(parse_go_duration("1\u{b5}s"), Some(1_000));
        assert_eq!(parse_go_duration("-2ms"), Some(-2_000_000));
        assert_eq!(
            parse_go_duration("2562047h"),
            Some(9_223_369_200_000_000_000)
        );
        assert_eq!(parse_go_duration("2562048h"), None);
        assert_eq!(parse_go_duration(""), None);
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
