//! Schedules (`schedule.rs`, `schedule_index.rs`, `fire.rs`): the index by due time, firing
//! inside `expire` (exactly once, not before the due time, the produced message's body),
//! the index forgetting removed schedules, surviving an export and restore, and a cancel.

use bytes::Bytes;

use super::tests_append::config;
use super::*;
use crate::jsapi::stream_config::StreamConfig;

const SEC: i64 = 1_000_000_000;

fn schedule_config() -> StreamConfig {
    let mut config = config(&["s.>", "t.>"]);
    config.allow_msg_schedules = true;
    config.allow_rollup_hdrs = true;
    config
}

/// The header block of an `@at` schedule due `due_secs` after the epoch, as stored (with
/// the rollup the ingest adds).
fn schedule_headers(due_secs: i64, target: &str) -> String {
    let at = crate::jsapi::time::Timestamp::from_unix_nanos(due_secs * SEC);
    format!(
        "NATS/1.0\r\nNats-Schedule: @at {at}\r\nNats-Schedule-Target: {target}\r\nNats-Rollup: sub\r\n\r\n"
    )
}

fn publish(stream: &mut StreamState, subject: &str, headers: Option<String>, now: i64) -> u64 {
    let request = AppendRequest {
        subject: subject.into(),
        headers: headers.map(Bytes::from),
        payload: Bytes::from_static(b"body"),
        now_nanos: now,
    };
    stream.append(request, &|_| true).unwrap().seq()
}

/// What the state machine does for an `Expire { now }`: reads the due schedules' bodies
/// (here from `bodies`) and fires them.
fn expire(stream: &mut StreamState, bodies: &[(u64, String)], now: i64) -> Fired {
    stream.expire(now);
    let due = stream
        .due_schedules(now)
        .into_iter()
        .map(|seq| {
            let (_, headers) = bodies.iter().find(|(s, _)| *s == seq).unwrap();
            ScheduleBody {
                seq,
                headers: Bytes::from(headers.clone()),
                payload: Bytes::from_static(b"body"),
                source: None,
            }
        })
        .collect();
    stream.fire_schedules(now, due, &|_| true)
}

#[test]
fn a_schedule_fires_once_at_its_due_time_and_is_removed() {
    let mut stream = StreamState::new(schedule_config());
    let headers = schedule_headers(10, "t.a");
    let seq = publish(&mut stream, "s.a", Some(headers.clone()), SEC);
    let bodies = [(seq, headers)];
    assert_eq!(stream.next_expiry_at(), Some(10 * SEC));
    assert!(stream.due_schedules(10 * SEC - 1).is_empty());
    assert_eq!(expire(&mut stream, &bodies, 10 * SEC - 1), Fired::default());

    let fired = expire(&mut stream, &bodies, 10 * SEC);
    assert_eq!(fired.removed, vec![1]);
    assert_eq!(fired.produced.len(), 1);
    let produced = &fired.produced[0];
    assert_eq!(produced.seq, 2);
    assert_eq!(produced.payload, b"body");
    assert_eq!(
        produced.headers,
        b"NATS/1.0\r\nNats-Scheduler: s.a\r\nNats-Schedule-Next: purge\r\n\r\n"
    );
    let msg = stream.get(2).unwrap();
    assert_eq!((msg.subject, msg.ts_nanos), ("t.a", 10 * SEC));
    assert!(!stream.contains(1));
    assert_eq!(stream.next_expiry_at(), None);
    // Exactly once.
    assert_eq!(expire(&mut stream, &bodies, 20 * SEC), Fired::default());
    assert_eq!(stream.last_seq(), 2);
}

#[test]
fn removed_schedules_leave_the_index_and_never_fire() {
    let mut stream = StreamState::new(schedule_config());
    let first = schedule_headers(10, "t.a");
    publish(&mut stream, "s.a", Some(first), 0);
    // A newer schedule on the subject rolls the first one up.
    let second = schedule_headers(20, "t.b");
    let seq = publish(&mut stream, "s.a", Some(second.clone()), 0);
    assert!(!stream.contains(1));
    assert_eq!(stream.next_expiry_at(), Some(20 * SEC));
    stream.delete_msg(seq).unwrap();
    assert_eq!(stream.next_expiry_at(), None);
    assert_eq!(
        expire(&mut stream, &[(seq, second)], 30 * SEC),
        Fired::default()
    );
    // A purge clears it too.
    let third = schedule_headers(40, "t.c");
    publish(&mut stream, "s.c", Some(third), 0);
    stream.purge(&PurgeRequest::default()).unwrap();
    assert_eq!(stream.next_expiry_at(), None);
}

#[test]
fn a_cancel_removes_the_schedule_and_needs_one_there() {
    let mut stream = StreamState::new(schedule_config());
    publish(&mut stream, "s.a", Some(schedule_headers(10, "t.a")), 0);
    let cancel = "NATS/1.0\r\nNats-Schedule-Next: purge\r\nNats-Scheduler: s.a\r\n\r\n";
    assert_eq!(publish(&mut stream, "t.x", Some(cancel.into()), 0), 2);
    assert!(!stream.contains(1));
    assert_eq!(stream.next_expiry_at(), None);
    // A subject whose last message is no schedule cannot be cancelled.
    publish(&mut stream, "s.p", None, 0);
    let request = AppendRequest {
        subject: "t.x".into(),
        headers: Some(Bytes::from(cancel.replace("s.a", "s.p"))),
        payload: Bytes::new(),
        now_nanos: 0,
    };
    assert_eq!(
        stream.append(request, &|_| true),
        Err(AppendError::SchedulerInvalid)
    );
}

#[test]
fn schedules_are_copies_elsewhere_and_a_sealed_stream_fires_none() {
    // Without allow_msg_schedules a copied schedule is an ordinary message.
    let mut plain_config = config(&["s.>", "t.>"]);
    plain_config.allow_rollup_hdrs = true;
    let mut plain = StreamState::new(plain_config);
    publish(&mut plain, "s.a", Some(schedule_headers(1, "t.a")), 0);
    assert!(plain.due_schedules(10 * SEC).is_empty());
    assert_eq!(plain.next_expiry_at(), None);
    let mut sealed = schedule_config();
    sealed.sealed = true;
    let mut restoring = StreamState::restoring();
    let headers = schedule_headers(1, "t.a");
    let info = MsgInfo {
        subject: "s.a",
        ts_nanos: 0,
        stored_size: 10,
    };
    restoring.push(1, info, Some(headers.as_bytes()));
    let scalars = plain.scalars();
    let sealed = StreamState::restore_from(sealed, scalars, restoring, []);
    assert!(sealed.due_schedules(10 * SEC).is_empty());
}

#[test]
fn restore_rebuilds_the_schedule_index_from_the_headers() {
    let mut stream = StreamState::new(schedule_config());
    let mut stored = Vec::new();
    for (index, due) in [30, 10, 20].into_iter().enumerate() {
        let headers = schedule_headers(due, "t.a");
        let subject = format!("s.{index}");
        let seq = publish(&mut stream, &subject, Some(headers.clone()), 0);
        stored.push((seq, headers));
    }
    let mut restoring = StreamState::restoring();
    for (seq, headers) in &stored {
        restoring.push(*seq, stream.get(*seq).unwrap(), Some(headers.as_bytes()));
    }
    let mut restored =
        StreamState::restore_from(stream.config().clone(), stream.scalars(), restoring, []);
    assert_eq!(restored, stream);
    assert_eq!(restored.next_expiry_at(), Some(10 * SEC));
    // Both fire the same, in sequence order, with the same produced sequences.
    let a = expire(&mut stream, &stored, 25 * SEC);
    let b = expire(&mut restored, &stored, 25 * SEC);
    assert_eq!(a, b);
    let seqs: Vec<u64> = a.produced.iter().map(|p| p.seq).collect();
    assert_eq!(seqs, vec![4, 5]);
    assert_eq!(a.removed, vec![2, 3]);
    assert_eq!(restored, stream);
}

/// A stored repeating schedule's header block.
fn repeating_headers(pattern: &str, target: &str) -> String {
    format!(
        "NATS/1.0\r\nNats-Schedule: {pattern}\r\nNats-Schedule-Target: {target}\r\nNats-Rollup: sub\r\n\r\n"
    )
}

/// A replica rebuilt from what is stored: the messages with their headers and the clock.
fn reloaded(stream: &StreamState, bodies: &[(u64, String)]) -> StreamState {
    let mut restoring = StreamState::restoring();
    for seq in stream.seqs() {
        let headers = bodies
            .iter()
            .find(|(s, _)| *s == seq)
            .map(|(_, h)| h.as_bytes());
        restoring.push(seq, stream.get(seq).unwrap(), headers);
    }
    restoring.set_schedule_clock(stream.schedule_clock());
    StreamState::restore_from(stream.config().clone(), stream.scalars(), restoring, [])
}

#[test]
fn a_repeating_schedule_stays_and_fires_at_each_of_its_times() {
    let mut stream = StreamState::new(schedule_config());
    let headers = repeating_headers("@every 10s", "t.a");
    let seq = publish(&mut stream, "s.a", Some(headers.clone()), SEC);
    let bodies = [(seq, headers)];
    assert_eq!(stream.next_expiry_at(), Some(11 * SEC));
    assert_eq!(expire(&mut stream, &bodies, 11 * SEC - 1), Fired::default());

    let fired = expire(&mut stream, &bodies, 11 * SEC + 40_000_000);
    assert!(fired.removed.is_empty(), "the schedule stays");
    assert_eq!(
        fired.produced[0].headers,
        b"NATS/1.0\r\nNats-Scheduler: s.a\r\nNats-Schedule-Next: 1970-01-01T00:00:21Z\r\n\r\n"
    );
    assert!(stream.contains(seq));
    assert_eq!(stream.next_expiry_at(), Some(21 * SEC));
    assert_eq!(expire(&mut stream, &bodies, 20 * SEC), Fired::default());
    assert_eq!(expire(&mut stream, &bodies, 21 * SEC).produced.len(), 1);
    // An hour late (a stopped cluster): it fires once, then keeps to its grid.
    let late = expire(&mut stream, &bodies, 3_600 * SEC + SEC / 2);
    assert_eq!(late.produced.len(), 1);
    assert_eq!(stream.next_expiry_at(), Some(3_601 * SEC));
    assert_eq!(stream.schedule_clock(), 3_600 * SEC + SEC / 2);
    // Removing the schedule's message ends it.
    stream.delete_msg(seq).unwrap();
    assert_eq!(stream.next_expiry_at(), None);
}

#[test]
fn a_reloaded_replica_finds_the_same_next_times() {
    let mut stream = StreamState::new(schedule_config());
    let mut bodies = Vec::new();
    for (subject, pattern) in [
        ("s.a", "@every 10s"),
        ("s.b", "*/7 * * * * *"),
        ("s.c", "@every 1m"),
    ] {
        let headers = repeating_headers(pattern, "t.a");
        let seq = publish(&mut stream, subject, Some(headers.clone()), 0);
        bodies.push((seq, headers));
    }
    for now in [10, 14, 25, 61, 62, 300] {
        let now = now * SEC + 123;
        // A replica reloaded before this firing fires the same, at the same sequences.
        let mut other = reloaded(&stream, &bodies);
        assert_eq!(other, stream, "reloaded before the firing at {now}");
        assert_eq!(other.next_expiry_at(), stream.next_expiry_at());
        let a = expire(&mut stream, &bodies, now);
        let b = expire(&mut other, &bodies, now);
        assert_eq!(a, b, "at {now}");
        assert_eq!(other, stream);
    }
    // A new leader whose clock is behind the last firing never moves a schedule back.
    let clock = stream.schedule_clock();
    let next = stream.next_expiry_at();
    expire(&mut stream, &bodies, clock - 30 * SEC);
    assert_eq!(stream.schedule_clock(), clock);
    assert_eq!(stream.next_expiry_at(), next);
    assert_eq!(reloaded(&stream, &bodies), stream);
}
