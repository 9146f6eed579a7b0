//! The time zone of a cron schedule (`Nats-Schedule-Time-Zone`, nats-server 2.14): an IANA
//! name looked up in the time zone database bundled with jetraft (every replica runs the
//! same binary, so reads the same rules; the host's database is never read). `UTC` is no
//! zone at all: the schedule runs on UTC's fast path (`cron.rs`).
//!
//! nats-server loads the name with Go's `time.LoadLocation`, whose `Local` is the host's
//! zone; here `Local` is refused like an unknown name, since replicas on hosts set to
//! different zones would fire at different times.

use jiff::tz::TimeZone;

use crate::jsapi::time::civil_from_days;

/// A named zone other than UTC.
#[derive(Debug, Clone)]
pub struct Zone {
    name: Box<str>,
    tz: TimeZone,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

impl Eq for Zone {}

/// What a `Nats-Schedule-Time-Zone` value names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ZoneName {
    Utc,
    Zone(Zone),
}

impl ZoneName {
    /// The zone `name` names, `None` for a name the database does not hold (or empty, or
    /// `Local`).
    pub fn parse(name: &[u8]) -> Option<ZoneName> {
        let name = std::str::from_utf8(name).ok()?.trim();
        if name == "UTC" {
            return Some(ZoneName::Utc);
        }
        if name.is_empty() || name == "Local" {
            return None;
        }
        let tz = jiff::tz::db().get(name).ok()?;
        // Names are matched exactly, as Go's `time.LoadLocation` reads files (`utc` fails).
        if tz.iana_name() != Some(name) {
            return None;
        }
        Some(ZoneName::Zone(Zone {
            name: name.into(),
            tz,
        }))
    }
}

impl Zone {
    /// The zone's offset from UTC, in seconds, at Unix second `unix_secs`.
    pub fn offset_at(&self, unix_secs: i64) -> i64 {
        match jiff::Timestamp::from_second(unix_secs) {
            Ok(at) => i64::from(self.tz.to_offset(at).seconds()),
            Err(_) => 0,
        }
    }

    /// The Unix second of local time `local_secs` (seconds since 1970-01-01T00:00 local),
    /// as Go's `time.Date` resolves it: a time that does not exist (clocks jump forward)
    /// takes the offset from before the jump, so lands after it; a time that happens twice
    /// (clocks go back) is the second one.
    pub fn unix_of_local(&self, local_secs: i64) -> i64 {
        let guess = self.offset_at(local_secs);
        local_secs - self.offset_at(local_secs - guess)
    }

    /// Unix second `unix_secs` as Go's `time.RFC3339` writes a time in this zone: local date
    /// and time, then the offset (`Z` when it is zero).
    pub fn rfc3339(&self, unix_secs: i64) -> String {
        let offset = self.offset_at(unix_secs);
        let local = unix_secs + offset;
        let (year, month, day) = civil_from_days(local.div_euclid(86_400));
        let of_day = local.rem_euclid(86_400);
        let (hour, minute, second) = (of_day / 3600, of_day / 60 % 60, of_day % 60);
        let zone = match offset {
            0 => "Z".to_string(),
            _ => {
                let sign = if offset < 0 { '-' } else { '+' };
                let minutes = offset.abs() / 60;
                format!("{sign}{:02}:{:02}", minutes / 60, minutes % 60)
            }
        };
        format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}{zone}")
    }

    /// Local seconds (since 1970-01-01T00:00 local) of Unix second `unix_secs`.
    pub fn local_of_unix(&self, unix_secs: i64) -> i64 {
        unix_secs + self.offset_at(unix_secs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str) -> Zone {
        match ZoneName::parse(name.as_bytes()) {
            Some(ZoneName::Zone(zone)) => zone,
            other => panic!("{name}: {other:?}"),
        }
    }

    #[test]
    fn names_are_read_from_the_bundled_database() {
        assert_eq!(ZoneName::parse(b"UTC"), Some(ZoneName::Utc));
        for bad in [
            "",
            "Local",
            "Mars/Olympus",
            "Europe/../etc",
            "utc",
            "europe/amsterdam",
        ] {
            assert_eq!(ZoneName::parse(bad.as_bytes()), None, "{bad:?}");
        }
        zone("Europe/Amsterdam");
        zone("America/New_York");
        zone("Asia/Kolkata");
    }

    #[test]
    fn offsets_and_local_times_as_go_resolves_them() {
        let amsterdam = zone("Europe/Amsterdam");
        // 2027-01-15T12:00Z: CET, +1 h; 2027-07-15T12:00Z: CEST, +2 h.
        assert_eq!(amsterdam.offset_at(1_800_014_400), 3600);
        assert_eq!(amsterdam.offset_at(1_815_652_800), 7200);
        // Clocks jump from 02:00 to 03:00 local on 2027-03-28 (01:00Z): 02:30 local does
        // not exist and resolves to 01:30Z (03:30 local), as Go's time.Date does.
        let day = 1_806_192_000; // 2027-03-28T00:00 as local seconds
        assert_eq!(
            amsterdam.unix_of_local(day + 2 * 3600 + 1800),
            day + 3600 + 1800
        );
        // Clocks go back from 03:00 to 02:00 local on 2026-10-25 (01:00Z): 02:30 local
        // happens twice; Go takes the second, 01:30Z.
        let day = 1_792_886_400; // 2026-10-25T00:00 as local seconds
        assert_eq!(
            amsterdam.unix_of_local(day + 2 * 3600 + 1800),
            day + 3600 + 1800
        );
        assert_eq!(
            amsterdam.local_of_unix(day + 1800),
            day + 9000,
            "00:30Z is 02:30 CEST"
        );
        assert_eq!(
            amsterdam.local_of_unix(day + 5400),
            day + 9000,
            "01:30Z is 02:30 CET"
        );
        assert_eq!(amsterdam.rfc3339(day + 1800), "2026-10-25T02:30:00+02:00");
        assert_eq!(amsterdam.rfc3339(day + 5400), "2026-10-25T02:30:00+01:00");
        assert_eq!(
            zone("America/New_York").rfc3339(day),
            "2026-10-24T20:00:00-04:00"
        );
        assert_eq!(
            zone("Europe/London").rfc3339(1_800_014_400),
            "2027-01-15T12:00:00Z"
        );
        assert_eq!(
            zone("Asia/Kolkata").rfc3339(day),
            "2026-10-25T05:30:00+05:30"
        );
    }
}
