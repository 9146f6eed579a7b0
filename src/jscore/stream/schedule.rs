//! Message schedules (ADR-51) as nats-server 2.15.1 reads them: a message on a stream with
//! `allow_msg_schedules` carrying `Nats-Schedule: <pattern>` and
//! `Nats-Schedule-Target: <subject>` is a schedule; when its time comes the stream stores a
//! copy of it on the target (`fire.rs`). A one-shot schedule (`@at <RFC 3339 time>`, 2.12)
//! is then removed; a repeating one (`@every <Go duration>` of at least a second, a
//! six-field cron pattern or `@hourly`…, 2.14) stays and is due again at its next time.
//!
//! This file is the pure part: the publish checks (in nats-server's order, with its error
//! codes), the pattern a stored schedule's header block names, and the header block of the
//! message a schedule produces. Cron patterns run in UTC, or in the IANA zone
//! `Nats-Schedule-Time-Zone` names (`zone.rs`: the database bundled with jetraft); a name it
//! does not hold is refused with nats-server's "time zone is invalid" (10223), as is
//! `Local` (ADR 0023, ADR 0025, ADR 0026). A `Nats-Schedule-Source` subject's last message,
//! when it has one, is what fires.
//!
//! Pure and replicated: a schedule's due time is a function of its stored header block, its
//! stored time and the stream's schedule clock (the time of the last firing), so every
//! replica, and a replica reloading its state, reads the same one.

use crate::jsapi::time::{Timestamp, NANOS_PER_SEC};
use crate::subject::pattern::pattern_matches;
use crate::subject::validate::is_valid_literal_subject;
use crate::wire::headers::lookup;

use super::cron::Cron;
use super::error::AppendError;
use super::publish_headers::ROLLUP;
use super::ttl::{parse_ttl, MSG_TTL};
use super::zone::ZoneName;

pub const SCHEDULE: &str = "Nats-Schedule";
pub const SCHEDULE_TARGET: &str = "Nats-Schedule-Target";
pub const SCHEDULE_TTL: &str = "Nats-Schedule-TTL";
pub const SCHEDULE_SOURCE: &str = "Nats-Schedule-Source";
pub const SCHEDULE_TIME_ZONE: &str = "Nats-Schedule-Time-Zone";
pub const SCHEDULE_ROLLUP: &str = "Nats-Schedule-Rollup";
/// On a produced message: the subject of the schedule that produced it.
pub const SCHEDULER: &str = "Nats-Scheduler";
/// On a produced message: `purge` (the schedule is done) or the next firing time; from a
/// client, only `purge`, with `Nats-Scheduler`, to cancel that schedule.
pub const SCHEDULE_NEXT: &str = "Nats-Schedule-Next";
pub const NEXT_PURGE: &str = "purge";

/// What a stream's config lets a publish schedule.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleRules<'a> {
    /// `allow_msg_schedules`.
    pub allowed: bool,
    /// `allow_msg_ttl` (a `Nats-Schedule-TTL` becomes the produced message's `Nats-TTL`).
    pub ttls: bool,
    /// The stream's subjects: a target must be one of them.
    pub subjects: &'a [String],
}

/// A header's value, when present and not empty (nats-server's `sliceHeader` check).
fn value<'a>(block: &'a [u8], name: &str) -> Option<&'a [u8]> {
    lookup(block, name).filter(|value| !value.is_empty())
}

impl ScheduleRules<'static> {
    /// A stream that takes no schedules (and no TTLs).
    pub const NONE: ScheduleRules<'static> = ScheduleRules {
        allowed: false,
        ttls: false,
        subjects: &[],
    };
}

/// Checks a publish of `block` to `subject` as nats-server does before storing it.
pub fn check_publish(
    block: &[u8],
    subject: &str,
    rules: ScheduleRules<'_>,
) -> Result<(), AppendError> {
    check_cancel(block, subject, rules.allowed)?;
    if value(block, SCHEDULE).is_none() {
        return Ok(());
    }
    if !rules.allowed {
        return Err(AppendError::SchedulesDisabled);
    }
    // nats-server loads the zone first (an empty one fails too).
    if lookup(block, SCHEDULE_TIME_ZONE).is_some_and(|zone| ZoneName::parse(zone).is_none()) {
        return Err(AppendError::ScheduleTimeZoneInvalid);
    }
    if schedule_pattern(block).is_none() {
        return Err(AppendError::SchedulePatternInvalid);
    }
    if let Some(ttl) = value(block, SCHEDULE_TTL) {
        if parse_ttl(ttl).is_err() {
            return Err(AppendError::ScheduleTtlInvalid);
        }
        if !rules.ttls {
            return Err(AppendError::TtlDisabled);
        }
    }
    let target = value(block, SCHEDULE_TARGET).unwrap_or_default();
    let in_stream = rules
        .subjects
        .iter()
        .any(|pattern| pattern_matches(pattern.as_bytes(), target));
    if !is_valid_literal_subject(target) || target == subject.as_bytes() || !in_stream {
        return Err(AppendError::ScheduleTargetInvalid);
    }
    // A source is a literal subject of the stream, neither the schedule's nor its target.
    if let Some(source) = value(block, SCHEDULE_SOURCE) {
        let in_stream = rules
            .subjects
            .iter()
            .any(|pattern| pattern_matches(pattern.as_bytes(), source));
        if !is_valid_literal_subject(source)
            || source == subject.as_bytes()
            || source == target
            || !in_stream
        {
            return Err(AppendError::ScheduleSourceInvalid);
        }
    }
    if value(block, SCHEDULE_ROLLUP).is_some_and(|rollup| rollup != b"sub") {
        return Err(AppendError::ScheduleRollupInvalid);
    }
    match value(block, ROLLUP) {
        None | Some(b"sub") => Ok(()),
        Some(_) => Err(AppendError::ScheduleRollupInvalid),
    }
}

/// The header block a checked schedule is stored with when it differs from the published
/// one: without `Nats-Rollup`, nats-server adds `Nats-Rollup: sub`, so that a new schedule
/// on a subject replaces the previous one. `None`: stored as published.
pub fn stored_schedule_headers(block: &[u8]) -> Option<Vec<u8>> {
    (value(block, SCHEDULE).is_some() && value(block, ROLLUP).is_none())
        .then(|| add_headers(block, &[(ROLLUP, "sub")]))
}

/// A client may send `Nats-Schedule-Next` only as `purge`, with `Nats-Scheduler` naming
/// another (literal) subject: the schedule there is cancelled. `Nats-Scheduler` alone is
/// refused. Whether that subject holds a schedule is the apply's check (`append.rs`).
fn check_cancel(block: &[u8], subject: &str, allowed: bool) -> Result<(), AppendError> {
    match value(block, SCHEDULE_NEXT) {
        Some(next) => {
            let scheduler = value(block, SCHEDULER).unwrap_or_default();
            if next != NEXT_PURGE.as_bytes()
                || !is_valid_literal_subject(scheduler)
                || scheduler == subject.as_bytes()
            {
                return Err(AppendError::SchedulerInvalid);
            }
            if !allowed {
                return Err(AppendError::SchedulesDisabled);
            }
            Ok(())
        }
        None if value(block, SCHEDULER).is_some() => Err(AppendError::SchedulerInvalid),
        None => Ok(()),
    }
}

/// The subject whose schedule a stored message cancels (`Nats-Schedule-Next: purge` with
/// `Nats-Scheduler`), as a produced message of a one-shot schedule also does.
pub fn cancelled_schedule(block: &[u8]) -> Option<&str> {
    if value(block, SCHEDULE_NEXT)? != NEXT_PURGE.as_bytes() {
        return None;
    }
    std::str::from_utf8(value(block, SCHEDULER)?).ok()
}

/// What a schedule's pattern says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// `@at`: once, at this time (Unix nanoseconds).
    At(i64),
    /// `@every`: every this many nanoseconds (at least a second).
    Every(i64),
    /// A cron pattern, in UTC or its time zone.
    Cron(Cron),
}

/// When a stored schedule fires again after it fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Repeat {
    /// `@every`: the times `anchor + k * interval` (k >= 1), the anchor being the schedule's
    /// stored time rounded to the second, as nats-server's first firing is.
    Every {
        anchor: i64,
        interval: i64,
    },
    Cron(Cron),
}

impl Repeat {
    /// The first firing time strictly after `after_nanos`; `None` for a cron pattern with
    /// none within five years (nats-server then stops scheduling it).
    pub fn next_after(&self, after_nanos: i64) -> Option<i64> {
        match self {
            &Repeat::Every { anchor, interval } => {
                let periods = if after_nanos < anchor {
                    1
                } else {
                    (after_nanos - anchor) / interval + 1
                };
                anchor.checked_add(periods.checked_mul(interval)?)
            }
            Repeat::Cron(cron) => cron.next_after(after_nanos),
        }
    }
}

impl Repeat {
    /// How a produced message's `Nats-Schedule-Next` writes time `next`.
    pub fn format_next(&self, next: i64) -> String {
        match self {
            Repeat::Cron(cron) => cron.format_time(next),
            Repeat::Every { .. } => Timestamp::from_unix_nanos(next).to_string(),
        }
    }
}

impl Pattern {
    /// The first due time of a schedule stored at `stored_nanos`, and how it repeats.
    pub fn first(&self, stored_nanos: i64) -> Option<(i64, Option<Repeat>)> {
        let repeat = match self {
            &Pattern::At(at) => return Some((at, None)),
            &Pattern::Every(interval) => Repeat::Every {
                anchor: round_to_second(stored_nanos),
                interval,
            },
            Pattern::Cron(cron) => Repeat::Cron(cron.clone()),
        };
        Some((repeat.next_after(stored_nanos)?, Some(repeat)))
    }
}

/// Go's `Time.Round(time.Second)`: halves away from zero (times here are after 1970).
fn round_to_second(nanos: i64) -> i64 {
    (nanos + NANOS_PER_SEC / 2).div_euclid(NANOS_PER_SEC) * NANOS_PER_SEC
}

/// The pattern of the schedule `block` describes: `None` for a message that is no schedule,
/// or one jetraft cannot fire (an invalid pattern, a time zone other than UTC, or a form
/// refused at publish in a message copied from another stream).
pub fn schedule_pattern(block: &[u8]) -> Option<Pattern> {
    let pattern = std::str::from_utf8(value(block, SCHEDULE)?).ok()?;
    let zone = value(block, SCHEDULE_TIME_ZONE);
    if let Some(at) = pattern.strip_prefix("@at ") {
        // A time zone goes with cron patterns only, as in nats-server.
        return parse_at(at).filter(|_| zone.is_none()).map(Pattern::At);
    }
    if let Some(interval) = pattern.strip_prefix("@every ") {
        let interval = crate::jsapi::time::parse_go_duration(interval)?;
        return (zone.is_none() && interval >= NANOS_PER_SEC).then_some(Pattern::Every(interval));
    }
    let zone = match zone.map(ZoneName::parse) {
        None | Some(Some(ZoneName::Utc)) => None,
        Some(Some(ZoneName::Zone(zone))) => Some(zone),
        Some(None) => return None,
    };
    let cron = Cron::parse(pattern)?.in_zone(zone);
    // A pattern no date satisfies (30 February) never fires: nats-server refuses it.
    cron.next_after(0)?;
    Some(Pattern::Cron(cron))
}

/// The subject whose last message a schedule fires instead of its own body
/// (`Nats-Schedule-Source`), if it names one.
pub fn schedule_source(block: &[u8]) -> Option<&str> {
    std::str::from_utf8(value(block, SCHEDULE_SOURCE)?).ok()
}

/// Go's `time.Parse(time.RFC3339, text)`: `2006-01-02T15:04:05Z07:00` with an optional
/// fraction after the seconds, `T` and `Z` in upper case, a real calendar date.
pub fn parse_at(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() < 20 || b[10] != b'T' || b.last() == Some(&b'z') {
        return None;
    }
    let number = |from: usize| {
        std::str::from_utf8(&b[from..from + 2])
            .ok()?
            .parse::<u32>()
            .ok()
    };
    let (year, month, day) = (
        std::str::from_utf8(&b[0..4]).ok()?.parse::<u32>().ok()?,
        number(5)?,
        number(8)?,
    );
    if number(17)? > 59 || !(1..=12).contains(&month) || day == 0 || day > days_in(year, month) {
        return None;
    }
    Timestamp::parse(text).ok()?.unix_nanos()
}

fn days_in(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The message a schedule stored on `schedule_subject` with header block `block` produces:
/// its target subject and header block (its payload is the schedule's, or its source's).
/// As nats-server's `getScheduledMessages`: the headers of the schedule, or of the last
/// message of its `Nats-Schedule-Source` when there is one (`source`), are copied except `Nats-Schedule*`,
/// `Nats-Expected-*`, `Nats-Msg-Id`, `Nats-TTL` and `Nats-Rollup`; then `Nats-Scheduler`
/// (the schedule's subject), `Nats-Schedule-Next` (`purge` for a one-shot schedule, the
/// next time for a repeating one: `next`, `Repeat::format_next`), and `Nats-TTL` /
/// `Nats-Rollup` from `Nats-Schedule-TTL` / `Nats-Schedule-Rollup` are added, in that order.
pub fn produced_message(
    block: &[u8],
    schedule_subject: &str,
    next: Option<&str>,
    source: Option<&[u8]>,
) -> Option<(String, Vec<u8>)> {
    let target = std::str::from_utf8(value(block, SCHEDULE_TARGET)?).ok()?;
    let text = std::str::from_utf8(source.unwrap_or(block)).ok()?;
    let mut kept: Vec<&str> = vec!["NATS/1.0"];
    kept.extend(
        text.split("\r\n")
            .skip(1)
            .filter(|line| !line.is_empty() && !stripped(line)),
    );
    let utf8 = |name| value(block, name).and_then(|v| std::str::from_utf8(v).ok());
    let mut added = vec![
        (SCHEDULER, schedule_subject),
        (SCHEDULE_NEXT, next.unwrap_or(NEXT_PURGE)),
    ];
    added.extend(utf8(SCHEDULE_TTL).map(|ttl| (MSG_TTL, ttl)));
    added.extend(utf8(SCHEDULE_ROLLUP).map(|rollup| (ROLLUP, rollup)));
    let mut out = kept.join("\r\n");
    out.push_str("\r\n");
    for (name, value) in added {
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    Some((target.to_string(), out.into_bytes()))
}

/// Whether header line `line` is one a produced message does not copy.
fn stripped(line: &str) -> bool {
    let name = line.split(':').next().unwrap_or_default();
    name == SCHEDULE
        || name.starts_with("Nats-Schedule-")
        || name.starts_with("Nats-Expected-")
        || name == "Nats-Msg-Id"
        || name == MSG_TTL
        || name == ROLLUP
}

/// `block` with `headers` added last (nats-server's `genHeader`).
fn add_headers(block: &[u8], headers: &[(&str, &str)]) -> Vec<u8> {
    let body = block.strip_suffix(b"\r\n\r\n").unwrap_or(block);
    let mut out = body.to_vec();
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out
}
