//! The next time of a cron pattern in a time zone other than UTC, walked as nats-server
//! walks it (its `parseCron`, after robfig/cron): field by field, month, day, hour, minute,
//! second, each stepped until it matches, in the zone's local time, a wrap-around starting
//! over from the month. Hours, minutes and seconds are stepped in real time, so on the day
//! clocks jump forward a local time that does not exist never fires, and on the day they go
//! back a repeated local time fires twice, as on nats-server. Searched at most five years
//! ahead.
//!
//! UTC patterns take `cron.rs`'s day-by-day search, which names the same times.

use crate::jsapi::time::{civil_from_days, days_from_civil, NANOS_PER_SEC};

use super::cron::{bit, weekday, Cron, SECS_PER_DAY};
use super::zone::Zone;

/// Local calendar fields of an instant.
struct Fields {
    year: i64,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    weekday: u32,
}

fn fields(zone: &Zone, unix: i64) -> Fields {
    let local = zone.local_of_unix(unix);
    let days = local.div_euclid(SECS_PER_DAY);
    let of_day = local.rem_euclid(SECS_PER_DAY) as u32;
    let (year, month, day) = civil_from_days(days);
    Fields {
        year,
        month,
        day,
        hour: of_day / 3600,
        minute: of_day / 60 % 60,
        second: of_day % 60,
        weekday: weekday(days),
    }
}

/// Go's `time.Date(year, month, day, hour, minute, second, 0, zone)`: out-of-range months
/// and days carry over, the local time resolved as `Zone::unix_of_local` says.
fn date(zone: &Zone, year: i64, month: i64, day: i64, hour: u32, minute: u32, second: u32) -> i64 {
    let year = year + (month - 1).div_euclid(12);
    let month = (month - 1).rem_euclid(12) as u32 + 1;
    let days = days_from_civil(year, month, 1) + day - 1;
    let local = days * SECS_PER_DAY + i64::from(hour * 3600 + minute * 60 + second);
    zone.unix_of_local(local)
}

/// Go's `t.AddDate(0, months, days)` of a time whose local fields are `at`.
fn add_date(zone: &Zone, at: &Fields, months: i64, days: i64) -> i64 {
    let (month, day) = (i64::from(at.month) + months, i64::from(at.day) + days);
    date(zone, at.year, month, day, at.hour, at.minute, at.second)
}

impl Cron {
    /// The first time the pattern names in `zone` after `after_nanos`: see the module doc.
    pub(super) fn next_in_zone(&self, zone: &Zone, after_nanos: i64) -> Option<i64> {
        let rounded = after_nanos.div_euclid(NANOS_PER_SEC)
            + i64::from(after_nanos.rem_euclid(NANOS_PER_SEC) >= NANOS_PER_SEC / 2);
        let mut next = rounded + 1;
        let mut truncated = false;
        let year_limit = fields(zone, next).year + 5;
        'wrap: loop {
            let mut at = fields(zone, next);
            if at.year > year_limit {
                return None;
            }
            while !bit(self.month, at.month) {
                if !truncated {
                    truncated = true;
                    next = date(zone, at.year, i64::from(at.month), 1, 0, 0, 0);
                    at = fields(zone, next);
                }
                next = add_date(zone, &at, 1, 0);
                at = fields(zone, next);
                if at.month == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(at.day, at.weekday) {
                if !truncated {
                    truncated = true;
                    next = date(
                        zone,
                        at.year,
                        i64::from(at.month),
                        i64::from(at.day),
                        0,
                        0,
                        0,
                    );
                    at = fields(zone, next);
                }
                next = add_date(zone, &at, 0, 1);
                at = fields(zone, next);
                if at.day == 1 {
                    continue 'wrap;
                }
            }
            while !bit(self.hour, at.hour) {
                if !truncated {
                    truncated = true;
                    let (month, day) = (i64::from(at.month), i64::from(at.day));
                    next = date(zone, at.year, month, day, at.hour, 0, 0);
                }
                next += 3600;
                at = fields(zone, next);
                if at.hour == 0 {
                    continue 'wrap;
                }
            }
            while !bit(self.minute, at.minute) {
                if !truncated {
                    truncated = true;
                    next -= next.rem_euclid(60);
                }
                next += 60;
                at = fields(zone, next);
                if at.minute == 0 {
                    continue 'wrap;
                }
            }
            while !bit(self.second, at.second) {
                truncated = true;
                next += 1;
                at = fields(zone, next);
                if at.second == 0 {
                    continue 'wrap;
                }
            }
            return next.checked_mul(NANOS_PER_SEC);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::zone::ZoneName;
    use super::*;
    use crate::jsapi::time::Timestamp;

    fn at(text: &str) -> i64 {
        Timestamp::parse(text).unwrap().unix_nanos().unwrap()
    }

    fn zoned(pattern: &str, zone: &str) -> Cron {
        let Some(ZoneName::Zone(zone)) = ZoneName::parse(zone.as_bytes()) else {
            panic!("{zone}");
        };
        Cron::parse(pattern).unwrap().in_zone(Some(zone))
    }

    fn text(nanos: Option<i64>) -> Option<String> {
        nanos.map(|nanos| Timestamp::from_unix_nanos(nanos).to_string())
    }

    /// In a zone whose offset is always zero, the walk names the times the UTC search does.
    #[test]
    fn the_walk_agrees_with_the_utc_search() {
        let patterns = [
            "* * * * * *",
            "0 * * * * *",
            "@hourly",
            "@daily",
            "@weekly",
            "@monthly",
            "@yearly",
            "*/15 * * * * *",
            "10/20 * * * * *",
            "0 0 9-17 * * mon-fri",
            "0 0 0 29 feb *",
            "0 0 0 1 * sat",
            "30 45 23 31 * *",
            "0 0 0 30 2 *",
        ];
        let times = [
            "2026-12-03T10:15:30Z",
            "2026-12-31T23:59:59.6Z",
            "2027-02-28T12:00:00Z",
            "2028-02-29T00:00:00Z",
        ];
        for pattern in patterns {
            let utc = Cron::parse(pattern).unwrap();
            let walked = zoned(pattern, "Etc/UTC");
            for time in times {
                assert_eq!(
                    text(walked.next_after(at(time))),
                    text(utc.next_after(at(time))),
                    "{pattern} after {time}"
                );
            }
        }
    }

    #[test]
    fn local_times_follow_the_zones_offset() {
        let nine = zoned("0 0 9 * * *", "Europe/Amsterdam");
        let next = nine.next_after(at("2027-01-15T12:00:00Z"));
        assert_eq!(text(next).unwrap(), "2027-01-16T08:00:00Z", "CET");
        assert_eq!(nine.format_time(next.unwrap()), "2027-01-16T09:00:00+01:00");
        let next = nine.next_after(at("2027-07-15T12:00:00Z"));
        assert_eq!(text(next).unwrap(), "2027-07-16T07:00:00Z", "CEST");
        let daily = zoned("@daily", "Asia/Kolkata");
        let next = daily.next_after(at("2027-01-15T12:00:00Z"));
        assert_eq!(text(next).unwrap(), "2027-01-15T18:30:00Z");
        // Weekdays are the zone's: Monday 00:30 in Auckland is Sunday 11:30Z.
        let monday = zoned("0 30 0 * * mon", "Pacific/Auckland");
        let next = monday.next_after(at("2027-01-15T12:00:00Z"));
        assert_eq!(text(next).unwrap(), "2027-01-17T11:30:00Z");
    }

    #[test]
    fn clock_changes_skip_a_missing_time_and_repeat_a_doubled_one() {
        let half_past_two = zoned("0 30 2 * * *", "Europe/Amsterdam");
        // 2027-03-28: 02:00 to 03:00 local, 02:30 does not exist; the next is the 29th.
        let next = half_past_two.next_after(at("2027-03-27T23:00:00Z"));
        assert_eq!(text(next).unwrap(), "2027-03-29T00:30:00Z");
        // 2026-10-25: 03:00 back to 02:00 local, 02:30 happens twice, and fires twice.
        let first = half_past_two
            .next_after(at("2026-10-24T22:00:00Z"))
            .unwrap();
        assert_eq!(text(Some(first)).unwrap(), "2026-10-25T00:30:00Z");
        let second = half_past_two.next_after(first).unwrap();
        assert_eq!(text(Some(second)).unwrap(), "2026-10-25T01:30:00Z");
        assert_eq!(
            half_past_two.format_time(first),
            "2026-10-25T02:30:00+02:00"
        );
        assert_eq!(
            half_past_two.format_time(second),
            "2026-10-25T02:30:00+01:00"
        );
        let third = half_past_two.next_after(second).unwrap();
        assert_eq!(text(Some(third)).unwrap(), "2026-10-26T01:30:00Z");
    }
}
