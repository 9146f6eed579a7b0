//! Cron patterns of repeating message schedules (ADR-51, nats-server 2.14), in UTC or in a
//! time zone (`zone.rs`, walked in `cron_zoned.rs`): six
//! fields, `second minute hour day-of-month month day-of-week`, each a comma list of `*`
//! (or `?`), `n`, `a-b`, with an optional `/step` (`n/step` runs to the field's maximum);
//! months and weekdays also by their three-letter English names. As nats-server (after
//! robfig/cron): when either day field is a plain `*`, both day fields must match,
//! otherwise either may; the next time is searched at most five years ahead.
//!
//! Pure: the next firing is a function of the pattern and the time it follows, so every
//! replica computes the same one.

use crate::jsapi::time::{civil_from_days, NANOS_PER_SEC};

use super::zone::Zone;

pub(super) const SECS_PER_DAY: i64 = 86_400;
/// Set on a day field written as a plain `*` (or `?`): see the module docs.
const STAR: u64 = 1 << 63;

/// A parsed cron pattern: one bit per allowed value of each field, and the zone it runs in
/// (`None`: UTC).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    pub(super) second: u64,
    pub(super) minute: u64,
    pub(super) hour: u64,
    pub(super) day_of_month: u64,
    pub(super) month: u64,
    pub(super) day_of_week: u64,
    zone: Option<Zone>,
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const SECONDS: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DAYS_OF_MONTH: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DAYS_OF_WEEK: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

impl Cron {
    /// Parses a six-field pattern, or one of the predefined `@yearly` (`@annually`),
    /// `@monthly`, `@weekly`, `@daily` (`@midnight`) and `@hourly`.
    pub fn parse(pattern: &str) -> Option<Cron> {
        let pattern = match pattern {
            "@yearly" | "@annually" => "0 0 0 1 1 *",
            "@monthly" => "0 0 0 1 * *",
            "@weekly" => "0 0 0 * * 0",
            "@daily" | "@midnight" => "0 0 0 * * *",
            "@hourly" => "0 0 * * * *",
            other => other,
        };
        let fields: Vec<&str> = pattern.split_ascii_whitespace().collect();
        let [second, minute, hour, day_of_month, month, day_of_week] = fields[..] else {
            return None;
        };
        Some(Cron {
            second: field(second, &SECONDS)?,
            minute: field(minute, &MINUTES)?,
            hour: field(hour, &HOURS)?,
            day_of_month: field(day_of_month, &DAYS_OF_MONTH)?,
            month: field(month, &MONTHS)?,
            day_of_week: field(day_of_week, &DAYS_OF_WEEK)?,
            zone: None,
        })
    }

    /// Time `nanos` as a produced message's `Nats-Schedule-Next` writes it: RFC 3339 in UTC,
    /// or in the pattern's zone with its offset (nats-server formats the time it computed,
    /// which is in the zone).
    pub fn format_time(&self, nanos: i64) -> String {
        match &self.zone {
            Some(zone) => zone.rfc3339(nanos.div_euclid(NANOS_PER_SEC)),
            None => crate::jsapi::time::Timestamp::from_unix_nanos(nanos).to_string(),
        }
    }

    /// The same pattern in `zone` (`None`: UTC).
    pub fn in_zone(self, zone: Option<Zone>) -> Cron {
        Cron { zone, ..self }
    }

    /// The first time the pattern names after `after_nanos` (Unix nanoseconds): from
    /// `after` rounded to the second, the next whole second on; `None` if none comes within
    /// five years.
    pub fn next_after(&self, after_nanos: i64) -> Option<i64> {
        if let Some(zone) = &self.zone {
            return self.next_in_zone(zone, after_nanos);
        }
        let rounded = after_nanos.div_euclid(NANOS_PER_SEC)
            + i64::from(after_nanos.rem_euclid(NANOS_PER_SEC) >= NANOS_PER_SEC / 2);
        let start = rounded + 1;
        let first_day = start.div_euclid(SECS_PER_DAY);
        let (first_year, _, _) = civil_from_days(first_day);
        for day in first_day.. {
            let (year, month, day_of_month) = civil_from_days(day);
            if year > first_year + 5 {
                return None;
            }
            if !bit(self.month, month) || !self.day_matches(day_of_month, weekday(day)) {
                continue;
            }
            let from = if day == first_day {
                start.rem_euclid(SECS_PER_DAY)
            } else {
                0
            };
            if let Some(second_of_day) = self.first_time_of_day(from) {
                return Some((day * SECS_PER_DAY + second_of_day) * NANOS_PER_SEC);
            }
        }
        None
    }

    pub(super) fn day_matches(&self, day_of_month: u32, day_of_week: u32) -> bool {
        let by_month = bit(self.day_of_month, day_of_month);
        let by_week = bit(self.day_of_week, day_of_week);
        if self.day_of_month & STAR != 0 || self.day_of_week & STAR != 0 {
            by_month && by_week
        } else {
            by_month || by_week
        }
    }

    /// The first second of a day, at or after `from`, whose hour, minute and second match.
    fn first_time_of_day(&self, from: i64) -> Option<i64> {
        let from = u32::try_from(from).ok()?;
        for hour in from / 3600..24 {
            if !bit(self.hour, hour) {
                continue;
            }
            for minute in 0..60 {
                if !bit(self.minute, minute) {
                    continue;
                }
                for second in 0..60 {
                    let at = hour * 3600 + minute * 60 + second;
                    if at >= from && bit(self.second, second) {
                        return Some(i64::from(at));
                    }
                }
            }
        }
        None
    }
}

pub(super) fn bit(bits: u64, value: u32) -> bool {
    bits & (1 << value) != 0
}

/// A comma list of ranges.
fn field(text: &str, bounds: &Bounds) -> Option<u64> {
    text.split(',')
        .filter(|range| !range.is_empty())
        .try_fold(0u64, |bits, range| Some(bits | range_bits(range, bounds)?))
}

/// `*` | `?` | `n` | `a-b`, with an optional `/step`.
fn range_bits(expr: &str, bounds: &Bounds) -> Option<u64> {
    let mut parts = expr.split('/');
    let range = parts.next()?;
    let step = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let (mut start, mut end, mut extra) = (bounds.min, bounds.max, 0);
    let single = !range.contains('-');
    if range == "*" || range == "?" {
        extra = STAR;
    } else {
        let mut ends = range.split('-');
        start = number(ends.next()?, bounds)?;
        end = match ends.next() {
            Some(high) => number(high, bounds)?,
            None => start,
        };
        if ends.next().is_some() {
            return None;
        }
    }
    let step = match step {
        Some(step) => {
            if single && extra == 0 {
                end = bounds.max;
            }
            let step: u32 = step.parse().ok()?;
            if step > 1 {
                extra = 0;
            }
            step
        }
        None => 1,
    };
    if start < bounds.min || end > bounds.max || start > end || step == 0 {
        return None;
    }
    let bits = (start..=end)
        .step_by(step as usize)
        .fold(0u64, |bits, value| bits | 1 << value);
    Some(bits | extra)
}

fn number(text: &str, bounds: &Bounds) -> Option<u32> {
    let lower = text.to_ascii_lowercase();
    if let Some(at) = bounds.names.iter().position(|name| *name == lower) {
        return u32::try_from(at).ok().map(|at| at + bounds.min);
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// 0 = Sunday; 1970-01-01 was a Thursday.
pub(super) fn weekday(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsapi::time::Timestamp;

    fn at(text: &str) -> i64 {
        Timestamp::parse(text).unwrap().unix_nanos().unwrap()
    }

    fn next(pattern: &str, after: &str) -> Option<i64> {
        Cron::parse(pattern).unwrap().next_after(at(after))
    }

    #[test]
    fn civil_dates_and_weekdays() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(weekday(0), 4);
        let days = at("2024-02-29T00:00:00Z") / NANOS_PER_SEC / SECS_PER_DAY;
        assert_eq!(civil_from_days(days), (2024, 2, 29));
        assert_eq!(weekday(days), 4, "2024-02-29 was a Thursday");
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn next_times_as_nats_server_computes_them() {
        let t = "2026-12-03T10:15:30Z";
        assert_eq!(next("* * * * * *", t), Some(at("2026-12-03T10:15:31Z")));
        assert_eq!(next("0 * * * * *", t), Some(at("2026-12-03T10:16:00Z")));
        assert_eq!(next("@hourly", t), Some(at("2026-12-03T11:00:00Z")));
        assert_eq!(next("@daily", t), Some(at("2026-12-04T00:00:00Z")));
        // 2026-12-06 is a Sunday.
        assert_eq!(next("@weekly", t), Some(at("2026-12-06T00:00:00Z")));
        assert_eq!(next("@monthly", t), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("@yearly", t), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("*/15 * * * * *", t), Some(at("2026-12-03T10:15:45Z")));
        assert_eq!(next("10/20 * * * * *", t), Some(at("2026-12-03T10:15:50Z")));
        assert_eq!(
            next("0 0 9-17 * * mon-fri", t),
            Some(at("2026-12-03T11:00:00Z"))
        );
        assert_eq!(next("0 0 0 29 feb *", t), Some(at("2028-02-29T00:00:00Z")));
        // Both day fields restricted: either matches (the 1st, or a Saturday).
        assert_eq!(next("0 0 0 1 * sat", t), Some(at("2026-12-05T00:00:00Z")));
        // A fraction rounds to the nearest second first.
        assert_eq!(
            next("* * * * * *", "2026-12-03T10:15:30.6Z"),
            Some(at("2026-12-03T10:15:32Z"))
        );
        assert_eq!(next("0 0 0 30 2 *", t), None, "never within five years");
    }

    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "",
            "* * * * *",
            "* * * * * * *",
            "60 * * * * *",
            "* * 24 * * *",
            "* * * 0 * *",
            "* * * * 13 *",
            "* * * * * 7",
            "5-1 * * * * *",
            "*/0 * * * * *",
            "1-2-3 * * * * *",
            "1/2/3 * * * * *",
            "-1 * * * * *",
            "x * * * * *",
            "@every 1s",
            "@sometimes",
        ] {
            assert_eq!(Cron::parse(bad), None, "{bad:?}");
        }
        assert!(Cron::parse("0 30 8 * JAN,Jul SUN").is_some());
    }
}
