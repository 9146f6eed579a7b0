//! `schedule.rs`: publish checks in nats-server's order, patterns and their times, the stored
//! and produced header blocks, byte for byte as nats-server 2.15.1's.

use super::cron::Cron;
use super::error::AppendError;
use super::publish_headers::ROLLUP;
use super::schedule::*;
use crate::jsapi::time::NANOS_PER_SEC;

use crate::jscore::stream::publish_headers::header_block as block;

fn check(subject: &str, headers: &[(&str, &str)], ttls: bool) -> Result<(), AppendError> {
    let subjects = ["s.>".to_string(), "t.>".to_string()];
    let rules = ScheduleRules {
        allowed: true,
        ttls,
        subjects: &subjects,
    };
    check_publish(&block(headers), subject, rules)
}

#[test]
fn at_is_gos_rfc3339() {
    assert_eq!(parse_at("1970-01-01T00:00:01Z"), Some(1_000_000_000));
    assert_eq!(parse_at("1970-01-01T02:00:00+02:00"), Some(0));
    assert_eq!(parse_at("1970-01-01T00:00:00.5Z"), Some(500_000_000));
    assert!(parse_at("2024-02-29T00:00:00Z").is_some());
    for invalid in [
        "1970-01-01t00:00:00Z",
        "1970-01-01T00:00:00z",
        "1970-01-01 00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2023-04-31T00:00:00Z",
        "2023-01-01T00:00:60Z",
        "2023-01-01T24:00:00Z",
        "2023-01-01T00:00:00+0200",
        "2023-01-01T00:00:00",
        "tomorrow",
    ] {
        assert_eq!(parse_at(invalid), None, "{invalid}");
    }
}

fn pattern(headers: &[(&str, &str)]) -> Option<Pattern> {
    schedule_pattern(&block(headers))
}

#[test]
fn patterns_as_nats_server_reads_them() {
    let at = ("Nats-Schedule", "@at 1970-01-01T00:00:01Z");
    assert_eq!(pattern(&[at]), Some(Pattern::At(1_000_000_000)));
    assert_eq!(pattern(&[("Nats-Schedule", "")]), None);
    assert_eq!(pattern(&[at, (SCHEDULE_TIME_ZONE, "UTC")]), None);
    assert_eq!(
        pattern(&[("Nats-Schedule", "@every 1m30s")]),
        Some(Pattern::Every(90 * NANOS_PER_SEC))
    );
    let hourly = Some(Pattern::Cron(Cron::parse("0 0 * * * *").unwrap()));
    assert_eq!(pattern(&[("Nats-Schedule", "@hourly")]), hourly);
    assert_eq!(
        pattern(&[
            ("Nats-Schedule", "0 0 * * * *"),
            (SCHEDULE_TIME_ZONE, "UTC")
        ]),
        hourly
    );
    // A cron pattern in a zone of the bundled database.
    let paris = pattern(&[
        ("Nats-Schedule", "@hourly"),
        (SCHEDULE_TIME_ZONE, "Europe/Paris"),
    ]);
    assert!(matches!(paris, Some(Pattern::Cron(_))), "{paris:?}");
    assert_ne!(paris, hourly, "a zoned pattern is not the UTC one");
    for other in [
        &[("Nats-Schedule", "@every 999ms")][..],
        &[("Nats-Schedule", "@every 1s"), (SCHEDULE_TIME_ZONE, "UTC")],
        &[("Nats-Schedule", "@every soon")],
        &[
            ("Nats-Schedule", "@hourly"),
            (SCHEDULE_TIME_ZONE, "Mars/Olympus"),
        ],
        &[("Nats-Schedule", "@hourly"), (SCHEDULE_TIME_ZONE, "Local")],
        &[
            ("Nats-Schedule", "@every 1m"),
            (SCHEDULE_TIME_ZONE, "Europe/Paris"),
        ],
        &[("Nats-Schedule", "0 0 0 30 2 *")],
        &[("Nats-Schedule", "0 0 * * *")],
        &[("Nats-Schedule", "@at tomorrow")],
    ] {
        assert_eq!(pattern(other), None, "{other:?}");
    }
}

#[test]
fn repeating_schedules_fire_on_their_grid_strictly_after_a_time() {
    let stored = 10 * NANOS_PER_SEC + 600_000_000; // rounds up to 11 s
    let (due, repeat) = Pattern::Every(5 * NANOS_PER_SEC).first(stored).unwrap();
    assert_eq!(due, 16 * NANOS_PER_SEC);
    let repeat = repeat.unwrap();
    assert_eq!(
        repeat.next_after(16 * NANOS_PER_SEC),
        Some(21 * NANOS_PER_SEC)
    );
    assert_eq!(
        repeat.next_after(16 * NANOS_PER_SEC + 1),
        Some(21 * NANOS_PER_SEC)
    );
    // Hours late (a stopped cluster): once, at the next point of the grid.
    assert_eq!(
        repeat.next_after(3_600 * NANOS_PER_SEC),
        Some(3_601 * NANOS_PER_SEC)
    );
    let (due, repeat) = Pattern::Cron(Cron::parse("@hourly").unwrap())
        .first(stored)
        .unwrap();
    assert_eq!(due, 3_600 * NANOS_PER_SEC);
    assert_eq!(repeat.unwrap().next_after(due), Some(7_200 * NANOS_PER_SEC));
    assert_eq!(
        Pattern::At(5).first(stored),
        Some((5, None)),
        "a one-shot schedule in the past is due at once"
    );
}

#[test]
fn publish_checks_are_nats_servers_in_its_order() {
    let at = ("Nats-Schedule", "@at 2030-01-01T00:00:00Z");
    let target = (SCHEDULE_TARGET, "t.a");
    assert_eq!(check("s.a", &[at, target], false), Ok(()));
    assert_eq!(check("s.a", &[("X", "y")], false), Ok(()));
    // An empty pattern is no schedule.
    assert_eq!(
        check("s.a", &[("Nats-Schedule", ""), target], false),
        Ok(())
    );
    let cases: [(&[(&str, &str)], AppendError); 18] = [
        (
            &[("Nats-Schedule", "@every 500ms"), target],
            AppendError::SchedulePatternInvalid,
        ),
        // A zone the bundled database holds is fine; the pattern is checked next.
        (
            &[
                ("Nats-Schedule", "garbage"),
                target,
                (SCHEDULE_TIME_ZONE, "Europe/Paris"),
            ],
            AppendError::SchedulePatternInvalid,
        ),
        (
            &[at, target, (SCHEDULE_TIME_ZONE, "Europe/Paris")],
            AppendError::SchedulePatternInvalid,
        ),
        (
            &[at, target, (SCHEDULE_TIME_ZONE, "UTC")],
            AppendError::SchedulePatternInvalid,
        ),
        (
            &[
                ("Nats-Schedule", "garbage"),
                target,
                (SCHEDULE_TIME_ZONE, "Mars/Olympus"),
            ],
            AppendError::ScheduleTimeZoneInvalid,
        ),
        (
            &[at, target, (SCHEDULE_TTL, "500ms")],
            AppendError::ScheduleTtlInvalid,
        ),
        (
            &[at, target, (SCHEDULE_TTL, "5m")],
            AppendError::TtlDisabled,
        ),
        (&[at], AppendError::ScheduleTargetInvalid),
        (
            &[at, (SCHEDULE_TARGET, "s.a")],
            AppendError::ScheduleTargetInvalid,
        ),
        (
            &[at, (SCHEDULE_TARGET, "x.a")],
            AppendError::ScheduleTargetInvalid,
        ),
        (
            &[at, target, (SCHEDULE_SOURCE, "t.*")],
            AppendError::ScheduleSourceInvalid,
        ),
        (
            &[at, target, (SCHEDULE_SOURCE, "t.a")],
            AppendError::ScheduleSourceInvalid,
        ),
        (
            &[at, target, (SCHEDULE_SOURCE, "s.a")],
            AppendError::ScheduleSourceInvalid,
        ),
        (
            &[at, target, (SCHEDULE_SOURCE, "x.a")],
            AppendError::ScheduleSourceInvalid,
        ),
        (
            &[at, target, (SCHEDULE_ROLLUP, "all")],
            AppendError::ScheduleRollupInvalid,
        ),
        (
            &[at, target, (ROLLUP, "all")],
            AppendError::ScheduleRollupInvalid,
        ),
        (&[(SCHEDULER, "s.b")], AppendError::SchedulerInvalid),
        (
            &[(SCHEDULE_NEXT, "purge"), (SCHEDULER, "s.a")],
            AppendError::SchedulerInvalid,
        ),
    ];
    for (headers, error) in cases {
        assert_eq!(
            check("s.a", headers, false),
            Err(error.clone()),
            "{headers:?}"
        );
    }
    assert_eq!(
        check("s.a", &[at, target, (SCHEDULE_TTL, "5m")], true),
        Ok(())
    );
    assert_eq!(
        check("s.a", &[at, target, (SCHEDULE_SOURCE, "t.src")], false),
        Ok(())
    );
    assert_eq!(
        check(
            "t.x",
            &[(SCHEDULE_NEXT, "purge"), (SCHEDULER, "s.a")],
            false
        ),
        Ok(())
    );
    let disabled = check_publish(
        &block(&[("Nats-Schedule", "x")]),
        "s.a",
        ScheduleRules::NONE,
    );
    assert_eq!(disabled, Err(AppendError::SchedulesDisabled));
}

#[test]
fn a_schedule_is_stored_with_a_subject_rollup() {
    let at = ("Nats-Schedule", "@at 2030-01-01T00:00:00Z");
    let stored = stored_schedule_headers(&block(&[at, (SCHEDULE_TARGET, "t.a")])).unwrap();
    assert_eq!(
        stored,
        b"NATS/1.0\r\nNats-Schedule: @at 2030-01-01T00:00:00Z\r\nNats-Schedule-Target: t.a\r\nNats-Rollup: sub\r\n\r\n"
    );
    assert_eq!(
        stored_schedule_headers(&block(&[at, (ROLLUP, "sub")])),
        None
    );
    assert_eq!(stored_schedule_headers(&block(&[("X", "y")])), None);
}

#[test]
fn the_produced_message_has_nats_servers_headers_byte_for_byte() {
    // As nats-server 2.15.1 stored them (probed): kept headers first, in order.
    let schedule = block(&[
        ("Nats-Schedule", "@at 2030-01-01T00:00:00Z"),
        ("Nats-Schedule-Target", "t.a"),
        ("Nats-Schedule-TTL", "5m"),
        ("Nats-Msg-Id", "m1"),
        ("Nats-TTL", "1h"),
        ("X-Custom", "kept"),
        ("Nats-Expected-Stream", "S"),
        ("Nats-Rollup", "sub"),
    ]);
    let (target, headers) = produced_message(&schedule, "s.a", None, None).unwrap();
    assert_eq!(target, "t.a");
    assert_eq!(
        String::from_utf8(headers).unwrap(),
        "NATS/1.0\r\nX-Custom: kept\r\nNats-Scheduler: s.a\r\nNats-Schedule-Next: purge\r\nNats-TTL: 5m\r\n\r\n"
    );
    let rolled = block(&[
        ("Nats-Schedule", "@at 2030-01-01T00:00:00Z"),
        ("Nats-Schedule-Target", "t.f"),
        ("Nats-Schedule-Rollup", "sub"),
        ("Nats-Rollup", "sub"),
    ]);
    let (_, headers) = produced_message(&rolled, "s.f", None, None).unwrap();
    assert_eq!(
        String::from_utf8(headers).unwrap(),
        "NATS/1.0\r\nNats-Scheduler: s.f\r\nNats-Schedule-Next: purge\r\nNats-Rollup: sub\r\n\r\n"
    );
    let every = block(&[
        ("Nats-Schedule", "@every 1m"),
        ("Nats-Schedule-Target", "t.e"),
        ("Nats-Rollup", "sub"),
    ]);
    let next = match schedule_pattern(&every).and_then(|p| p.first(0)) {
        Some((_, Some(repeat))) => repeat.format_next(1_800_000_000 * NANOS_PER_SEC),
        other => panic!("a repeating schedule: {other:?}"),
    };
    let (_, headers) = produced_message(&every, "s.e", Some(&next), None).unwrap();
    assert_eq!(
        String::from_utf8(headers.clone()).unwrap(),
        "NATS/1.0\r\nNats-Scheduler: s.e\r\nNats-Schedule-Next: 2027-01-15T08:00:00Z\r\n\r\n"
    );
    assert_eq!(
        cancelled_schedule(&headers),
        None,
        "a repeat cancels nothing"
    );
    let source = block(&[
        ("X-Src", "1"),
        ("Nats-Msg-Id", "m1"),
        ("Nats-Rollup", "sub"),
    ]);
    let (target, headers) = produced_message(&schedule, "s.a", None, Some(&source)).unwrap();
    assert_eq!(target, "t.a");
    assert_eq!(
        String::from_utf8(headers).unwrap(),
        "NATS/1.0\r\nX-Src: 1\r\nNats-Scheduler: s.a\r\nNats-Schedule-Next: purge\r\nNats-TTL: 5m\r\n\r\n",
        "the source's headers, the schedule's target, TTL and rollup (nats-server 2.15.1)"
    );
    assert_eq!(
        cancelled_schedule(&block(&[(SCHEDULE_NEXT, "purge"), (SCHEDULER, "s.a")])),
        Some("s.a")
    );
    assert_eq!(cancelled_schedule(&block(&[(SCHEDULER, "s.a")])), None);
}
