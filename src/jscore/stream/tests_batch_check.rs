//! The all-or-nothing check of an atomic batch: each member as if those before it were
//! stored, with nats-server's answers for duplicates and unsupported headers, and the
//! promise the apply relies on: after a passed check every member is stored.

use crate::jsapi::stream_config::{DiscardPolicy, RetentionPolicy};
use crate::jscore::atomic_batch::BatchError;

use super::tests_append::{config, publish, request};
use super::*;

const SEC: i64 = 1_000_000_000;

fn check(stream: &StreamState, members: &[AppendRequest]) -> Result<(), BatchError> {
    stream.check_batch(members, &|_| true)
}

/// Checks, then appends every member; the appends must all store.
fn store_batch(stream: &mut StreamState, members: Vec<AppendRequest>) -> Vec<u64> {
    check(stream, &members).expect("batch accepted");
    members
        .into_iter()
        .map(|member| match stream.append(member, &|_| true) {
            Ok(AppendOutcome::Stored { seq, .. }) => seq,
            other => panic!("a checked member must store, got {other:?}"),
        })
        .collect()
}

#[test]
fn a_checked_batch_stores_with_consecutive_sequences() {
    let mut stream = StreamState::new(config(&["s.>"]));
    publish(&mut stream, "s.x", 1);
    let members = vec![
        request("s.a", &[], "1", 2),
        request("s.b", &[("Nats-Expected-Last-Sequence", "2")], "2", 2),
        request(
            "s.a",
            &[("Nats-Expected-Last-Subject-Sequence", "2")],
            "3",
            2,
        ),
    ];
    assert_eq!(store_batch(&mut stream, members), vec![2, 3, 4]);
}

#[test]
fn expected_sequences_count_the_members_before() {
    let mut stream = StreamState::new(config(&["s.>"]));
    publish(&mut stream, "s.a", 1);
    // The second member expects the stream's last sequence, but the first comes before it.
    let members = [
        request("s.a", &[], "1", 2),
        request("s.b", &[("Nats-Expected-Last-Sequence", "1")], "2", 2),
    ];
    assert_eq!(
        check(&stream, &members),
        Err(AppendError::WrongLastSequence { actual: 2 }.into())
    );
    let members = [
        request("s.a", &[], "1", 2),
        request(
            "s.a",
            &[("Nats-Expected-Last-Subject-Sequence", "1")],
            "2",
            2,
        ),
    ];
    assert_eq!(
        check(&stream, &members),
        Err(AppendError::WrongLastSequence { actual: 2 }.into())
    );
    // A filter override sees the batch's members too.
    let members = [
        request("s.a", &[], "1", 2),
        request(
            "s.b",
            &[
                ("Nats-Expected-Last-Subject-Sequence", "2"),
                ("Nats-Expected-Last-Subject-Sequence-Subject", "s.*"),
            ],
            "2",
            2,
        ),
    ];
    assert_eq!(check(&stream, &members), Ok(()));
}

#[test]
fn duplicate_message_ids_refuse_the_whole_batch() {
    let mut stream = StreamState::new(config(&["s.>"]));
    stream
        .append(request("s.a", &[("Nats-Msg-Id", "old")], "x", SEC), &|_| {
            true
        })
        .unwrap();
    let in_window = [
        request("s.a", &[("Nats-Msg-Id", "new")], "1", 2 * SEC),
        request("s.a", &[("Nats-Msg-Id", "old")], "2", 2 * SEC),
    ];
    assert_eq!(check(&stream, &in_window), Err(BatchError::DuplicateMsgId));
    let twice = [
        request("s.a", &[("Nats-Msg-Id", "new")], "1", 2 * SEC),
        request("s.a", &[("Nats-Msg-Id", "new")], "2", 2 * SEC),
    ];
    assert_eq!(check(&stream, &twice), Err(BatchError::DuplicateMsgId));
    // Past the duplicate window (two minutes by default) the old id is free again.
    let later = [request("s.a", &[("Nats-Msg-Id", "old")], "1", 200 * SEC)];
    assert_eq!(check(&stream, &later), Ok(()));
    assert_eq!(BatchError::DuplicateMsgId.to_api_error().err_code, 10201);
}

#[test]
fn refusals_name_nats_servers_errors() {
    let mut stream = StreamState::new(config(&["s.>"]));
    let last_msg_id = [request(
        "s.a",
        &[("Nats-Expected-Last-Msg-Id", "x")],
        "1",
        1,
    )];
    let refused = check(&stream, &last_msg_id).unwrap_err().to_api_error();
    assert_eq!(refused.err_code, 10177);
    assert_eq!(
        refused.description,
        "atomic publish unsupported header used: Nats-Expected-Last-Msg-Id"
    );
    let other_stream = [request("s.a", &[("Nats-Expected-Stream", "T")], "1", 1)];
    assert_eq!(
        check(&stream, &other_stream),
        Err(AppendError::StreamMismatch.into())
    );
    let rollup = [request("s.a", &[("Nats-Rollup", "sub")], "1", 1)];
    assert_eq!(
        check(&stream, &rollup),
        Err(AppendError::RollupNotPermitted.into())
    );
    publish(&mut stream, "s.a", 1);
    let mut sealed = config(&["s.>"]);
    sealed.sealed = true;
    stream.update_config(sealed, 2);
    assert_eq!(
        check(&stream, &[request("s.a", &[], "1", 3)]),
        Err(AppendError::Sealed.into())
    );
}

#[test]
fn discard_new_limits_count_the_whole_batch() {
    let mut limited = config(&["s.>"]);
    limited.max_msgs = 3;
    limited.discard = DiscardPolicy::New;
    let mut stream = StreamState::new(limited);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    let two = [request("s.c", &[], "1", 3), request("s.d", &[], "2", 3)];
    assert_eq!(check(&stream, &two), Err(AppendError::MaxMessages.into()));
    assert_eq!(
        store_batch(&mut stream, vec![request("s.c", &[], "1", 3)]),
        vec![3]
    );

    let mut per_subject = config(&["s.>"]);
    per_subject.max_msgs_per_subject = 2;
    per_subject.discard = DiscardPolicy::New;
    per_subject.discard_new_per_subject = true;
    let mut stream = StreamState::new(per_subject);
    publish(&mut stream, "s.a", 1);
    let two_more = [request("s.a", &[], "1", 2), request("s.a", &[], "2", 2)];
    assert_eq!(
        check(&stream, &two_more),
        Err(AppendError::MaxMessagesPerSubject.into())
    );
}

#[test]
fn interest_streams_skip_members_nobody_wants() {
    let mut interest = config(&["s.>"]);
    interest.retention = RetentionPolicy::Interest;
    let stream = StreamState::new(interest);
    // s.a has no interest: its sequence is used but it is not stored, so the next member's
    // subject check does not see it.
    let members = [
        request("s.a", &[], "1", 1),
        request(
            "s.a",
            &[("Nats-Expected-Last-Subject-Sequence", "0")],
            "2",
            1,
        ),
    ];
    assert_eq!(stream.check_batch(&members, &|_| false), Ok(()));
}

#[test]
fn a_rollup_must_not_undo_the_batch() {
    let mut rollups = config(&["s.>"]);
    rollups.allow_rollup_hdrs = true;
    let stream = StreamState::new(rollups);
    let sub = |subject: &str| request(subject, &[("Nats-Rollup", "sub")], "r", 1);
    let all = || request("s.z", &[("Nats-Rollup", "all")], "r", 1);
    let plain = |subject: &str| request(subject, &[], "p", 1);
    // A subject's first member may roll it up; one after it on the subject may not.
    assert_eq!(check(&stream, &[sub("s.a"), sub("s.b")]), Ok(()));
    assert_eq!(check(&stream, &[sub("s.a"), plain("s.a")]), Ok(()));
    let refused = check(&stream, &[plain("s.a"), sub("s.a")]).unwrap_err();
    assert_eq!(refused, AppendError::BatchRollupSubInvalid.into());
    let api = refused.to_api_error();
    assert_eq!(
        (api.err_code, api.description.as_str()),
        (10111, "batch rollup sub invalid")
    );
    // The whole stream only from the first member.
    assert_eq!(check(&stream, &[all(), plain("s.a")]), Ok(()));
    let refused = check(&stream, &[plain("s.a"), all()]).unwrap_err();
    assert_eq!(refused, AppendError::BatchRollupAllInvalid.into());
    assert_eq!(
        refused.to_api_error().description,
        "batch rollup all invalid"
    );
}

#[test]
fn on_a_counter_stream_every_member_is_an_increment() {
    let mut counting = config(&["c.>"]);
    counting.allow_msg_counter = true;
    let stream = StreamState::new(counting);
    let incr = |value: &str| request("c.a", &[("Nats-Incr", value)], "", 1);
    assert_eq!(check(&stream, &[incr("1"), incr("-5")]), Ok(()));
    let err_code =
        |members: &[AppendRequest]| check(&stream, members).unwrap_err().to_api_error().err_code;
    assert_eq!(err_code(&[incr("1"), request("c.a", &[], "", 1)]), 10169);
    assert_eq!(
        err_code(&[incr("1"), request("c.a", &[("Nats-Incr", "2")], "x", 1)]),
        10170
    );
    assert_eq!(err_code(&[incr("1"), incr("two")]), 10171);
    let with_expectation = request(
        "c.a",
        &[("Nats-Incr", "1"), ("Nats-Expected-Last-Sequence", "1")],
        "",
        1,
    );
    assert_eq!(err_code(&[with_expectation]), 10171);
}
