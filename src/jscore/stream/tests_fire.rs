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
