//! Time on the JetStream wire: timestamps as Go's `time.Time` marshals them (RFC 3339 with
//! up to nine fractional digits, trailing zeros trimmed, UTC as `Z`; "never" is Go's zero
//! time `0001-01-01T00:00:00Z`) and durations as integer nanoseconds (Go `time.Duration`),
//! plus the Go duration-string parser (`"1m30s"`) that `-NAK <delay>` and `Nats-TTL` use.
//!
//! Hand-written rather than pulled from a date crate because the format is tiny and fixed,
//! and we need year 1 (Go's zero time) to round-trip exactly.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nanoseconds per second.
pub const NANOS_PER_SEC: i64 = 1_000_000_000;

/// Seconds from 0001-01-01T00:00:00Z to the Unix epoch (negative).
const GO_ZERO_UNIX_SECS: i64 = -62_135_596_800;

/// A wall-clock instant with nanosecond precision, as JSON-encoded by Go.
///
/// `Timestamp::ZERO` (also `Default`) is Go's zero time, which JetStream uses for "never" /
/// "not set" (`first_ts` of an empty stream, jsm.go's `pause_until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Nanoseconds since the Unix epoch; i128 so that year 1 fits.
    unix_nanos: i128,
}

impl Default for Timestamp {
    fn default() -> Self {
        Self::ZERO
    }
}

/// Why a timestamp string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid RFC 3339 timestamp {0:?}")]
pub struct TimestampError(pub String);

impl Timestamp {
    /// Go's zero time, `0001-01-01T00:00:00Z`.
    pub const ZERO: Timestamp = Timestamp {
        unix_nanos: GO_ZERO_UNIX_SECS as i128 * NANOS_PER_SEC as i128,
    };

    /// From nanoseconds since the Unix epoch (what stored messages carry).
    pub const fn from_unix_nanos(nanos: i64) -> Self {
        Timestamp {
            unix_nanos: nanos as i128,
        }
    }

    /// The current system time.
    pub fn now() -> Self {
        let since = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Timestamp {
            unix_nanos: since.as_nanos() as i128,
        }
    }

    /// True for Go's zero time ("never").
    pub fn is_zero(&self) -> bool {
        *self == Self::ZERO
    }

    /// Nanoseconds since the Unix epoch, or `None` for the zero time or anything outside
    /// the i64 range (before 1678 / after 2262).
    pub fn unix_nanos(&self) -> Option<i64> {
        if self.is_zero() {
            return None;
        }
        i64::try_from(self.unix_nanos).ok()
    }

    /// Parses RFC 3339 (`2024-01-02T03:04:05.123Z`, `…+02:00`), as Go's `time.Time` accepts.
    pub fn parse(text: &str) -> Result<Self, TimestampError> {
        parse_rfc3339(text).ok_or_else(|| TimestampError(text.to_string()))
    }
}

impl fmt::Display for Timestamp {
    /// Go's `time.RFC3339Nano` in UTC.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.unix_nanos.div_euclid(NANOS_PER_SEC as i128) as i64;
        let nanos = self.unix_nanos.rem_euclid(NANOS_PER_SEC as i128) as u32;
        let days = secs.div_euclid(86_400);
        let second_of_day = secs.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            year,
            month,
            day,
            second_of_day / 3600,
            (second_of_day / 60) % 60,
            second_of_day % 60
        )?;
        if nanos != 0 {
            let digits = format!("{nanos:09}");
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        f.write_str("Z")
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    /// `null` and `""` decode as the zero time (Go leaves the field untouched in both cases
    /// for pointer fields, and clients use them to mean "unset").
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(deserializer)?;
        match text.as_deref() {
            None | Some("") => Ok(Timestamp::ZERO),
            Some(text) => Timestamp::parse(text).map_err(serde::de::Error::custom),
        }
    }
}

/// Serde helper for `Option<Timestamp>` fields that Go declares as `*time.Time` with
/// `omitempty`: absent, `null` and the zero time all decode to `None` (jsm.go always sends
/// `"pause_until":"0001-01-01T00:00:00Z"` meaning "not paused").
pub(crate) mod optional {
    use super::Timestamp;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Timestamp>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(ts) => s.collect_str(ts),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Timestamp>, D::Error> {
        let ts = Timestamp::deserialize(d)?;
        Ok(if ts.is_zero() { None } else { Some(ts) })
    }
}

// Howard Hinnant's civil-date algorithms (public domain), proleptic Gregorian calendar.
/// The (year, month 1-12, day 1-31) of a count of days since 1970-01-01.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn parse_rfc3339(text: &str) -> Option<Timestamp> {
    let b = text.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let part = text.get(range)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        part.parse().ok()
    };
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    if second > 60 {
        return None;
    }
    let mut pos = 19;
    let mut nanos: i64 = 0;
    if b[pos] == b'.' {
        pos += 1;
        let start = pos;
        while pos < b.len() && b[pos].is_ascii_digit() {
            pos += 1;
        }
        let digits = &text[start..pos];
        if digits.is_empty() {
            return None;
        }
        // Keep nine digits of precision; Go truncates beyond nanoseconds too.
        let mut padded: String = digits.chars().take(9).collect();
        while padded.len() < 9 {
            padded.push('0');
        }
        nanos = padded.parse().ok()?;
    }
    let offset_secs = match b.get(pos)? {
        b'Z' | b'z' if pos + 1 == b.len() => 0,
        sign @ (b'+' | b'-') if pos + 6 == b.len() && b[pos + 3] == b':' => {
            let hours = num(pos + 1..pos + 3)?;
            let minutes = num(pos + 4..pos + 6)?;
            let magnitude = hours * 3600 + minutes * 60;
            if *sign == b'+' {
                magnitude
            } else {
                -magnitude
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month as u32, day as u32);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_secs;
    Some(Timestamp {
        unix_nanos: secs as i128 * NANOS_PER_SEC as i128 + nanos as i128,
    })
}

/// Parses a Go duration string (`"300ms"`, `"1.5h"`, `"2m30s"`, `"-5s"`, `"0"`) into
/// nanoseconds, as Go's `time.ParseDuration` does: an optional sign, then one or more decimal
/// numbers (with an optional fraction) each followed by a unit (`ns`, `us`, `µs`, `μs`, `ms`,
/// `s`, `m`, `h`); `"0"` alone is allowed. `None` where Go returns an error (including
/// overflow). Integer arithmetic, so fractions truncate as Go's do (`-NAK` delays, `Nats-TTL`).
pub fn parse_go_duration(text: &str) -> Option<i64> {
    // Go accepts exactly 2^63 ns only with a minus sign.
    const MAX: u128 = i64::MAX as u128 + 1;
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
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
            rest[..digits].parse().ok().filter(|v| *v <= MAX)?
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
        let value = whole.checked_mul(unit).filter(|v| *v <= MAX)? + fraction * unit / scale;
        total += value;
        if total > MAX {
            return None;
        }
    }
    match (negative, total) {
        (true, MAX) => Some(i64::MIN),
        (true, total) => Some(-(total as i64)),
        (false, MAX) => None,
        (false, total) => Some(total as i64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_time_round_trips_as_go_writes_it() {
        assert_eq!(Timestamp::ZERO.to_string(), "0001-01-01T00:00:00Z");
        assert_eq!(
            Timestamp::parse("0001-01-01T00:00:00Z").unwrap(),
            Timestamp::ZERO
        );
        assert!(Timestamp::default().is_zero());
        assert_eq!(Timestamp::ZERO.unix_nanos(), None);
    }

    #[test]
    fn formats_rfc3339_nano_with_trimmed_fraction() {
        assert_eq!(
            Timestamp::from_unix_nanos(0).to_string(),
            "1970-01-01T00:00:00Z"
        );
        assert_eq!(
            Timestamp::from_unix_nanos(1_755_770_400_000_000_001).to_string(),
            "2025-08-21T10:00:00.000000001Z"
        );
        assert_eq!(
            Timestamp::from_unix_nanos(1_709_251_200_120_000_000).to_string(),
            "2024-03-01T00:00:00.12Z"
        );
    }

    #[test]
    fn parses_fractions_and_offsets() {
        let ts = Timestamp::parse("2025-08-21T12:00:00.5+02:00").unwrap();
        assert_eq!(ts.unix_nanos(), Some(1_755_770_400_500_000_000));
        let ts = Timestamp::parse("2025-08-21T10:00:00.000000001Z").unwrap();
        assert_eq!(ts.unix_nanos(), Some(1_755_770_400_000_000_001));
        assert!(Timestamp::parse("2025-08-21").is_err());
        assert!(Timestamp::parse("2025-13-21T10:00:00Z").is_err());
        assert!(Timestamp::parse("2025-08-21T10:00:00").is_err());
    }

    #[test]
    fn json_null_and_empty_are_zero() {
        let ts: Timestamp = serde_json::from_str("null").unwrap();
        assert!(ts.is_zero());
        let ts: Timestamp = serde_json::from_str("\"\"").unwrap();
        assert!(ts.is_zero());
        let json = serde_json::to_string(&Timestamp::from_unix_nanos(1_000)).unwrap();
        assert_eq!(json, "\"1970-01-01T00:00:00.000001Z\"");
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("5s"), Some(5 * NANOS_PER_SEC));
        assert_eq!(parse_go_duration("1m30s"), Some(90 * NANOS_PER_SEC));
        assert_eq!(parse_go_duration("300ms"), Some(300_000_000));
        assert_eq!(parse_go_duration("1.5h"), Some(5400 * NANOS_PER_SEC));
        assert_eq!(parse_go_duration("-2us"), Some(-2000));
        assert_eq!(parse_go_duration("0"), Some(0));
        assert_eq!(parse_go_duration("5"), None);
        assert_eq!(parse_go_duration("abc"), None);
        assert_eq!(parse_go_duration(""), None);
        assert_eq!(parse_go_duration("1h2m3.5s"), Some(3_723_500_000_000));
        assert_eq!(parse_go_duration("1\u{b5}s"), Some(1_000));
        assert_eq!(parse_go_duration(".5s"), Some(500_000_000));
        assert_eq!(parse_go_duration("1.s"), Some(NANOS_PER_SEC));
        assert_eq!(parse_go_duration("."), None);
        assert_eq!(parse_go_duration("1.0000000009s"), Some(NANOS_PER_SEC));
        assert_eq!(
            parse_go_duration("2562047h"),
            Some(9_223_369_200_000_000_000)
        );
        assert_eq!(parse_go_duration("2562048h"), None);
        assert_eq!(parse_go_duration("9223372036854775807ns"), Some(i64::MAX));
        assert_eq!(parse_go_duration("9223372036854775808ns"), None);
        assert_eq!(parse_go_duration("-9223372036854775808ns"), Some(i64::MIN));
    }
}
