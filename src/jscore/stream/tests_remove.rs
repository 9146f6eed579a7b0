//! Purge variants, delete, max_age expiry and config updates.

use super::tests_append::{config, publish};
use super::*;

const SEC: i64 = 1_000_000_000;

fn stream_with(subjects: &[&str]) -> StreamState {
    let mut stream = StreamState::new(config(&["s.>"]));
    for (index, subject) in subjects.iter().enumerate() {
        publish(&mut stream, subject, index as i64 + 1);
    }
    stream
}

fn seqs(stream: &StreamState) -> Vec<u64> {
    (stream.first_seq()..=stream.last_seq())
        .filter(|seq| stream.contains(*seq))
        .collect()
}

#[test]
fn full_purge_keeps_the_sequence_going() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a"]);
    let purged = stream.purge(&PurgeRequest::default()).unwrap();
    assert_eq!(purged.count, 3);
    let summary = stream.summary();
    assert_eq!(
        (
            summary.messages,
            summary.bytes,
            summary.first_seq,
            summary.last_seq
        ),
        (0, 0, 4, 3)
    );
    assert_eq!(summary.num_subjects, 0);
    assert_eq!(publish(&mut stream, "s.a", 9).seq(), 4);
}

#[test]
fn purge_by_subject_filter() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a", "s.c"]);
    let request = PurgeRequest {
        filter: Some("s.a".into()),
        ..Default::default()
    };
    assert_eq!(stream.purge(&request).unwrap().count, 2);
    assert_eq!(seqs(&stream), vec![2, 4]);
    assert_eq!(stream.summary().first_seq, 2);
}

#[test]
fn purge_up_to_sequence_with_and_without_filter() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a", "s.b", "s.a"]);
    let request = PurgeRequest {
        filter: Some("s.a".into()),
        seq: 5,
        keep: 0,
    };
    assert_eq!(stream.purge(&request).unwrap().count, 2);
    assert_eq!(seqs(&stream), vec![2, 4, 5]);
    let request = PurgeRequest {
        seq: 4,
        ..Default::default()
    };
    assert_eq!(stream.purge(&request).unwrap().count, 1);
    assert_eq!(seqs(&stream), vec![4, 5]);
}

#[test]
fn purge_keep_newest() {
    let mut stream = stream_with(&["s.a", "s.b", "s.a", "s.b", "s.a"]);
    let request = PurgeRequest {
        filter: Some("s.a".into()),
        keep: 1,
        seq: 0,
    };
    assert_eq!(stream.purge(&request).unwrap().count, 2);
    assert_eq!(seqs(&stream), vec![2, 4, 5]);
    let request = PurgeRequest {
        keep: 2,
        ..Default::default()
    };
    assert_eq!(stream.purge(&request).unwrap().count, 1);
    assert_eq!(seqs(&stream), vec![4, 5]);
    // Keeping more than there is purges nothing.
    let request = PurgeRequest {
        keep: 10,
        ..Default::default()
    };
    assert_eq!(stream.purge(&request).unwrap().count, 0);
}

#[test]
fn purge_refusals() {
    let mut stream = stream_with(&["s.a"]);
    let both = PurgeRequest {
        seq: 2,
        keep: 1,
        ..Default::default()
    };
    assert_eq!(
        stream.purge(&both).unwrap_err().to_api_error().err_code,
        10003
    );

    let mut denied = config(&["s.>"]);
    denied.deny_purge = true;
    let mut stream = StreamState::new(denied);
    let api = stream
        .purge(&PurgeRequest::default())
        .unwrap_err()
        .to_api_error();
    assert_eq!(
        (api.err_code, api.description.as_str()),
        (10110, "stream purge not permitted")
    );
}

#[test]
fn compact_past_the_end_moves_the_sequence() {
    let mut stream = stream_with(&["s.a", "s.b"]);
    let request = PurgeRequest {
        seq: 10,
        ..Default::default()
    };
    assert_eq!(stream.purge(&request).unwrap().count, 2);
    assert_eq!(publish(&mut stream, "s.a", 5).seq(), 10);
}

#[test]
fn delete_message_and_interior_deletes() {
    let mut stream = stream_with(&["s.a", "s.b", "s.c"]);
    stream.delete_msg(2).unwrap();
    assert_eq!(stream.summary().num_deleted, 1);
    assert_eq!(
        stream.delete_msg(2).unwrap_err().to_api_error().description,
        "sequence 2 not found"
    );
    stream.delete_msg(1).unwrap();
    let summary = stream.summary();
    assert_eq!(
        (
            summary.first_seq,
            summary.num_deleted,
            summary.first_ts_nanos
        ),
        (3, 0, 3)
    );
    stream.delete_msg(3).unwrap();
    let summary = stream.summary();
    assert_eq!(
        (summary.first_seq, summary.last_seq, summary.messages),
        (4, 3, 0)
    );

    let mut denied = config(&["s.>"]);
    denied.deny_delete = true;
    let mut stream = StreamState::new(denied);
    publish(&mut stream, "s.a", 1);
    assert_eq!(
        stream.delete_msg(1).unwrap_err().to_api_error().err_code,
        10057
    );
}

#[test]
fn max_age_expiry_uses_the_command_time() {
    let mut aged = config(&["s.>"]);
    aged.max_age = 10 * SEC;
    let mut stream = StreamState::new(aged);
    publish(&mut stream, "s.a", 0);
    publish(&mut stream, "s.a", 5 * SEC);
    assert_eq!(stream.next_expiry_at(), Some(10 * SEC));
    assert_eq!(stream.expire(10 * SEC - 1).removed, Vec::<u64>::new());
    assert_eq!(stream.expire(10 * SEC).removed, vec![1]);
    assert_eq!(stream.expire(100 * SEC).removed, vec![2]);
    assert_eq!(stream.next_expiry_at(), None);
    assert_eq!(stream.summary().first_seq, 3);
}

#[test]
fn update_config_enforces_tightened_limits() {
    let mut stream = stream_with(&["s.a", "s.a", "s.b", "s.a", "s.b"]);
    let mut tighter = stream.config().clone();
    tighter.max_msgs_per_subject = 1;
    assert_eq!(stream.update_config(tighter.clone(), 10), vec![1, 2, 3]);
    tighter.max_msgs = 1;
    assert_eq!(stream.update_config(tighter, 10), vec![4]);
    assert_eq!(seqs(&stream), vec![5]);
}

#[test]
fn remove_acked_ignores_missing() {
    let mut stream = stream_with(&["s.a", "s.b"]);
    assert_eq!(stream.remove_acked([2, 7, 2]), vec![2]);
    assert_eq!(stream.message_count(), 1);
}
