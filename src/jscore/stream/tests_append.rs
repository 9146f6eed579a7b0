//! Append (publish) behaviour: sequences, limits, dedup window, expected-* refusals with
//! nats-server's err_codes, rollup.

use bytes::Bytes;

use crate::jsapi::stream_config::{DiscardPolicy, RetentionPolicy, StorageType, StreamConfig};

use super::*;

const SEC: i64 = 1_000_000_000;

pub(super) fn config(subjects: &[&str]) -> StreamConfig {
    let mut config = StreamConfig::new("S", subjects);
    config.storage = StorageType::Memory;
    config
}

pub(super) fn request(
    subject: &str,
    headers: &[(&str, &str)],
    payload: &str,
    now: i64,
) -> AppendRequest {
    let headers = (!headers.is_empty()).then(|| {
        let mut block = String::from("NATS/1.0\r\n");
        for (name, value) in headers {
            block.push_str(&format!("{name}: {value}\r\n"));
        }
        block.push_str("\r\n");
        Bytes::from(block)
    });
    AppendRequest {
        subject: subject.to_string(),
        headers,
        payload: Bytes::from(payload.to_string()),
        now_nanos: now,
    }
}

pub(super) fn publish(stream: &mut StreamState, subject: &str, now: i64) -> AppendOutcome {
    stream
        .append(request(subject, &[], "x", now), &|_| true)
        .expect("append accepted")
}

fn refused(stream: &mut StreamState, request: AppendRequest) -> u16 {
    stream
        .append(request, &|_| true)
        .expect_err("append refused")
        .to_api_error()
        .err_code
}

#[test]
fn sequences_times_and_bytes() {
    let mut stream = StreamState::new(config(&["s.>"]));
    assert_eq!(stream.summary().first_seq, 0);
    assert_eq!(publish(&mut stream, "s.a", 10).seq(), 1);
    assert_eq!(publish(&mut stream, "s.b", 20).seq(), 2);
    let summary = stream.summary();
    assert_eq!(
        (summary.first_seq, summary.last_seq, summary.messages),
        (1, 2, 2)
    );
    assert_eq!((summary.first_ts_nanos, summary.last_ts_nanos), (10, 20));
    // memory storage: 3 (subject) + 1 (payload) + 16 each.
    assert_eq!(summary.bytes, 40);
    assert_eq!(summary.num_subjects, 2);
    assert_eq!(stream.get(2).unwrap().subject, "s.b");
}

#[test]
fn a_sealed_tail_answers_the_same_and_takes_the_next_append() {
    let mut stream = StreamState::new(config(&["s.>"]));
    for i in 0..100 {
        let subject = if i % 3 == 0 { "s.a" } else { "s.b" };
        publish(&mut stream, subject, 10 + i * SEC);
    }
    let answers = |stream: &StreamState| {
        let gets: Vec<_> = [1, 50, 99, 100]
            .map(|seq| format!("{:?}", stream.get(seq)))
            .into();
        (stream.summary(), gets)
    };
    let before = answers(&stream);
    stream.seal_metadata();
    assert_eq!(answers(&stream), before);
    assert_eq!(publish(&mut stream, "s.a", 200 * SEC).seq(), 101);
    assert_eq!(stream.get(101).unwrap().subject, "s.a");
    assert_eq!(stream.get(100).unwrap().subject, "s.a");
    assert_eq!(stream.summary().messages, 101);
}

#[test]
fn file_storage_counts_record_size() {
    let mut file_config = config(&["s.>"]);
    file_config.storage = StorageType::File;
    let mut stream = StreamState::new(file_config);
    stream
        .append(request("s.a", &[("A", "b")], "xy", 1), &|_| true)
        .unwrap();
    let headers_len = "NATS/1.0\r\nA: b\r\n\r\n".len() as u64;
    assert_eq!(stream.bytes(), 30 + 3 + 4 + headers_len + 2);
}

#[test]
fn configured_first_seq_starts_there() {
    let mut first_config = config(&["s.>"]);
    first_config.first_seq = 100;
    let mut stream = StreamState::new(first_config);
    assert_eq!(stream.summary().first_seq, 100);
    assert_eq!(publish(&mut stream, "s.a", 1).seq(), 100);
}

#[test]
fn discard_old_drops_oldest_for_max_msgs_and_max_bytes() {
    let mut limited = config(&["s.>"]);
    limited.max_msgs = 3;
    let mut stream = StreamState::new(limited);
    for now in 1..=3 {
        publish(&mut stream, "s.a", now);
    }
    assert_eq!(
        publish(&mut stream, "s.a", 4),
        AppendOutcome::Stored {
            seq: 4,
            removed: vec![1]
        }
    );
    assert_eq!(stream.summary().first_seq, 2);

    let mut by_bytes = config(&["s.>"]);
    by_bytes.max_bytes = 40; // two messages of 20 bytes
    let mut stream = StreamState::new(by_bytes);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    assert_eq!(
        publish(&mut stream, "s.c", 3),
        AppendOutcome::Stored {
            seq: 3,
            removed: vec![1]
        }
    );
    assert_eq!(stream.bytes(), 40);
}

#[test]
fn discard_new_refuses_with_10077() {
    let mut limited = config(&["s.>"]);
    limited.max_msgs = 2;
    limited.discard = DiscardPolicy::New;
    let mut stream = StreamState::new(limited);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    let error = stream
        .append(request("s.c", &[], "x", 3), &|_| true)
        .unwrap_err();
    assert_eq!(error, AppendError::MaxMessages);
    let api = error.to_api_error();
    assert_eq!((api.code, api.err_code), (503, 10077));
    assert_eq!(api.description, "maximum messages exceeded");
    assert_eq!(stream.last_seq(), 2);

    let mut by_bytes = config(&["s.>"]);
    by_bytes.max_bytes = 45;
    by_bytes.discard = DiscardPolicy::New;
    let mut stream = StreamState::new(by_bytes);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    assert_eq!(
        stream.append(request("s.c", &[], "x", 3), &|_| true),
        Err(AppendError::MaxBytes)
    );
}

#[test]
fn per_subject_limit_drops_oldest_on_that_subject_or_refuses() {
    let mut per_subject = config(&["s.>"]);
    per_subject.max_msgs_per_subject = 2;
    let mut stream = StreamState::new(per_subject.clone());
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    publish(&mut stream, "s.a", 3);
    assert_eq!(
        publish(&mut stream, "s.a", 4),
        AppendOutcome::Stored {
            seq: 4,
            removed: vec![1]
        }
    );
    assert_eq!(stream.summary().num_deleted, 0);
    publish(&mut stream, "s.a", 5);
    assert_eq!(stream.summary().num_deleted, 1); // seq 3 gone, interior
    assert_eq!(stream.deleted_seqs(), vec![3]);

    per_subject.discard = DiscardPolicy::New;
    per_subject.discard_new_per_subject = true;
    let mut stream = StreamState::new(per_subject);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.a", 2);
    assert_eq!(refused(&mut stream, request("s.a", &[], "x", 3)), 10077);
    assert_eq!(publish(&mut stream, "s.b", 4).seq(), 3);
}

#[test]
fn discard_new_at_subject_limit_replaces_instead_of_refusing() {
    let mut limited = config(&["s.>"]);
    limited.max_msgs = 2;
    limited.max_msgs_per_subject = 1;
    limited.discard = DiscardPolicy::New;
    let mut stream = StreamState::new(limited);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    // The stream is full, but s.a is at its own limit: its old message is replaced.
    assert_eq!(
        publish(&mut stream, "s.a", 3),
        AppendOutcome::Stored {
            seq: 3,
            removed: vec![1]
        }
    );
    assert_eq!(refused(&mut stream, request("s.c", &[], "x", 4)), 10077);
}

#[test]
fn max_msg_size_and_header_size() {
    let mut limited = config(&["s.>"]);
    limited.max_msg_size = 4;
    let mut stream = StreamState::new(limited);
    assert_eq!(refused(&mut stream, request("s.a", &[], "12345", 1)), 10054);
    assert!(stream
        .append(request("s.a", &[], "1234", 1), &|_| true)
        .is_ok());

    let mut stream = StreamState::new(config(&["s.>"]));
    let huge = "v".repeat(70_000);
    assert_eq!(
        refused(&mut stream, request("s.a", &[("Big", &huge)], "", 1)),
        10097
    );
}

#[test]
fn duplicate_within_window_returns_original_sequence() {
    let mut windowed = config(&["s.>"]);
    windowed.duplicate_window = 10 * SEC;
    let mut stream = StreamState::new(windowed);
    let with_id = |now| request("s.a", &[("Nats-Msg-Id", "m1")], "x", now);
    assert_eq!(stream.append(with_id(0), &|_| true).unwrap().seq(), 1);
    publish(&mut stream, "s.b", SEC);
    assert_eq!(
        stream.append(with_id(5 * SEC), &|_| true).unwrap(),
        AppendOutcome::Duplicate { seq: 1 }
    );
    assert_eq!(stream.message_count(), 2);
    // Exactly one window later the id is forgotten and the message is stored again.
    assert_eq!(
        stream.append(with_id(10 * SEC), &|_| true).unwrap(),
        AppendOutcome::Stored {
            seq: 3,
            removed: vec![]
        }
    );
}

#[test]
fn duplicate_check_comes_before_expectations() {
    let mut stream = StreamState::new(config(&["s.>"]));
    let first = request(
        "s.a",
        &[("Nats-Msg-Id", "m1"), ("Nats-Expected-Last-Sequence", "0")],
        "x",
        1,
    );
    stream.append(first.clone(), &|_| true).unwrap();
    // A retry of the same publish must be a duplicate, not "wrong last sequence".
    assert_eq!(
        stream.append(first, &|_| true).unwrap(),
        AppendOutcome::Duplicate { seq: 1 }
    );
}

#[test]
fn expected_stream_and_last_sequence() {
    let mut stream = StreamState::new(config(&["s.>"]));
    assert_eq!(
        refused(
            &mut stream,
            request("s.a", &[("Nats-Expected-Stream", "T")], "x", 1)
        ),
        10060
    );
    assert!(stream
        .append(
            request(
                "s.a",
                &[
                    ("Nats-Expected-Stream", "S"),
                    ("Nats-Expected-Last-Sequence", "0")
                ],
                "x",
                1
            ),
            &|_| true
        )
        .is_ok());
    let error = stream
        .append(
            request("s.a", &[("Nats-Expected-Last-Sequence", "5")], "x", 2),
            &|_| true,
        )
        .unwrap_err();
    let api = error.to_api_error();
    assert_eq!((api.code, api.err_code), (400, 10071));
    assert_eq!(api.description, "wrong last sequence: 1");
}

#[test]
fn expected_last_subject_sequence() {
    let mut stream = StreamState::new(config(&["s.>"]));
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    let expect = |seq: &str| {
        request(
            "s.a",
            &[("Nats-Expected-Last-Subject-Sequence", seq)],
            "x",
            3,
        )
    };
    assert_eq!(
        stream.append(expect("2"), &|_| true).unwrap_err(),
        AppendError::WrongLastSequence { actual: 1 }
    );
    assert_eq!(stream.append(expect("1"), &|_| true).unwrap().seq(), 3);
    // 0 means "nothing on this subject yet".
    let fresh = request(
        "s.c",
        &[("Nats-Expected-Last-Subject-Sequence", "0")],
        "x",
        4,
    );
    assert_eq!(stream.append(fresh, &|_| true).unwrap().seq(), 4);
    // The subject override may be a wildcard.
    let overridden = request(
        "s.d",
        &[
            ("Nats-Expected-Last-Subject-Sequence", "4"),
            ("Nats-Expected-Last-Subject-Sequence-Subject", "s.*"),
        ],
        "x",
        5,
    );
    assert_eq!(stream.append(overridden, &|_| true).unwrap().seq(), 5);
    let missing = request(
        "s.d",
        &[("Nats-Expected-Last-Subject-Sequence-Subject", "s.*")],
        "x",
        6,
    );
    assert_eq!(refused(&mut stream, missing), 10193);
}

#[test]
fn expected_last_msg_id() {
    let mut stream = StreamState::new(config(&["s.>"]));
    stream
        .append(request("s.a", &[("Nats-Msg-Id", "one")], "x", 1), &|_| true)
        .unwrap();
    let wrong = request("s.a", &[("Nats-Expected-Last-Msg-Id", "zero")], "x", 2);
    let api = stream.append(wrong, &|_| true).unwrap_err().to_api_error();
    assert_eq!(
        (api.err_code, api.description.as_str()),
        (10070, "wrong last msg ID: one")
    );
    let right = request("s.a", &[("Nats-Expected-Last-Msg-Id", "one")], "x", 3);
    assert!(stream.append(right, &|_| true).is_ok());
    // The last message had no id now, so any expectation fails with an empty id.
    let after = request("s.a", &[("Nats-Expected-Last-Msg-Id", "one")], "x", 4);
    assert_eq!(
        stream.append(after, &|_| true).unwrap_err(),
        AppendError::WrongLastMsgId {
            actual: String::new()
        }
    );
}

#[test]
fn rollup_requires_permission_and_valid_value() {
    let mut stream = StreamState::new(config(&["s.>"]));
    let api = stream
        .append(request("s.a", &[("Nats-Rollup", "sub")], "x", 1), &|_| true)
        .unwrap_err()
        .to_api_error();
    assert_eq!(
        (api.code, api.err_code, api.description.as_str()),
        (500, 10111, "rollup not permitted")
    );

    let mut allowed = config(&["s.>"]);
    allowed.allow_rollup_hdrs = true;
    let mut stream = StreamState::new(allowed);
    let api = stream
        .append(request("s.a", &[("Nats-Rollup", "some")], "x", 1), &|_| {
            true
        })
        .unwrap_err()
        .to_api_error();
    assert_eq!(api.description, "rollup value invalid: \"some\"");
}

#[test]
fn rollup_subject_and_all() {
    let mut allowed = config(&["s.>"]);
    allowed.allow_rollup_hdrs = true;
    let mut stream = StreamState::new(allowed);
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    publish(&mut stream, "s.a", 3);
    let outcome = stream
        .append(request("s.a", &[("Nats-Rollup", "sub")], "x", 4), &|_| true)
        .unwrap();
    assert_eq!(
        outcome,
        AppendOutcome::Stored {
            seq: 4,
            removed: vec![1, 3]
        }
    );
    assert_eq!(stream.message_count(), 2);
    let outcome = stream
        .append(request("s.c", &[("Nats-Rollup", "ALL")], "x", 5), &|_| true)
        .unwrap();
    assert_eq!(
        outcome,
        AppendOutcome::Stored {
            seq: 5,
            removed: vec![2, 4]
        }
    );
    let summary = stream.summary();
    assert_eq!(
        (summary.first_seq, summary.last_seq, summary.messages),
        (5, 5, 1)
    );
}

/// A publish subject with wildcard tokens is stored as published, and its rollup purges
/// every subject it matches, as nats-server purges by it as a filter (nats-py's `kv.purge`
/// of `hello.*`).
#[test]
fn a_wildcard_rollup_purges_what_it_matches() {
    let mut allowed = config(&["kv.>"]);
    allowed.allow_rollup_hdrs = true;
    let mut stream = StreamState::new(allowed);
    publish(&mut stream, "kv.hello.1", 1);
    publish(&mut stream, "kv.hello.2", 2);
    publish(&mut stream, "kv.other", 3);
    publish(&mut stream, "kv.hello.3.deep", 4);
    let outcome = stream
        .append(
            request("kv.hello.*", &[("Nats-Rollup", "sub")], "", 5),
            &|_| true,
        )
        .unwrap();
    assert_eq!(
        outcome,
        AppendOutcome::Stored {
            seq: 5,
            removed: vec![1, 2]
        }
    );
    let outcome = stream
        .append(request("kv.>", &[("Nats-Rollup", "sub")], "", 6), &|_| true)
        .unwrap();
    assert_eq!(
        outcome,
        AppendOutcome::Stored {
            seq: 6,
            removed: vec![3, 4, 5]
        }
    );
}

#[test]
fn sealed_stream_refuses_publish() {
    let mut sealed = config(&["s.>"]);
    sealed.sealed = true;
    let mut stream = StreamState::new(sealed);
    assert_eq!(refused(&mut stream, request("s.a", &[], "x", 1)), 10109);
}

#[test]
fn interest_stream_without_interest_skips_the_sequence() {
    let mut interest = config(&["s.>"]);
    interest.retention = RetentionPolicy::Interest;
    let mut stream = StreamState::new(interest);
    let outcome = stream
        .append(request("s.a", &[("Nats-Msg-Id", "m")], "x", 1), &|_| false)
        .unwrap();
    assert_eq!(outcome, AppendOutcome::SkippedNoInterest { seq: 1 });
    let summary = stream.summary();
    assert_eq!(
        (summary.messages, summary.first_seq, summary.last_seq),
        (0, 2, 1)
    );
    // The id is remembered, so a retry is still a duplicate.
    let retry = stream
        .append(request("s.a", &[("Nats-Msg-Id", "m")], "x", 2), &|_| true)
        .unwrap();
    assert_eq!(retry, AppendOutcome::Duplicate { seq: 1 });
    assert_eq!(
        stream
            .append(request("s.a", &[], "x", 3), &|_| true)
            .unwrap()
            .seq(),
        2
    );
}

#[test]
fn last_by_subject_and_next_matching() {
    let mut stream = StreamState::new(config(&["s.>"]));
    publish(&mut stream, "s.a", 1);
    publish(&mut stream, "s.b", 2);
    publish(&mut stream, "s.a", 3);
    assert_eq!(stream.last_by_subject("s.a").map(|(seq, _)| seq), Some(3));
    assert_eq!(stream.last_by_subject("s.*").map(|(seq, _)| seq), Some(3));
    assert_eq!(stream.last_by_subject("s.z"), None);
    let only_b = crate::jscore::subject_filter::SubjectFilter::new(["s.b"]);
    assert_eq!(
        stream.next_matching(&only_b, 1).map(|(seq, _)| seq),
        Some(2)
    );
    assert_eq!(stream.next_matching(&only_b, 3), None);
    assert_eq!(stream.count_matching_after(&only_b, 0), 1);
    assert_eq!(stream.first_seq_at_or_after(2), 2);
    assert_eq!(stream.first_seq_at_or_after(99), 4);
}

#[test]
fn matching_from_is_next_matching_repeated() {
    use crate::jscore::subject_filter::SubjectFilter;
    let mut stream = StreamState::new(config(&["s.>"]));
    for (index, subject) in ["s.a", "s.b", "s.a", "s.c", "s.a", "s.b"]
        .iter()
        .enumerate()
    {
        publish(&mut stream, subject, index as i64 + 1);
    }
    let filters = [
        SubjectFilter::all(),
        SubjectFilter::new(["s.a"]),
        SubjectFilter::new(["s.b", "s.c"]),
    ];
    let repeated = |stream: &StreamState, filter: &SubjectFilter, from: u64| {
        let mut seqs = Vec::new();
        let mut next = from;
        while let Some((seq, _)) = stream.next_matching(filter, next) {
            seqs.push(seq);
            next = seq + 1;
        }
        seqs
    };
    // Dense, then with the front gone (first seq 3), then with a gap (no 4).
    for step in 0..3 {
        match step {
            1 => {
                stream.delete_msg(1).unwrap();
                stream.delete_msg(2).unwrap();
            }
            2 => {
                stream.delete_msg(4).unwrap();
            }
            _ => {}
        }
        for filter in &filters {
            for from in 0..9 {
                let walked: Vec<u64> = stream.matching_from(filter, from).collect();
                assert_eq!(
                    walked,
                    repeated(&stream, filter, from),
                    "step {step} from {from}"
                );
            }
        }
    }
    assert_eq!(
        stream
            .matching_from(&SubjectFilter::all(), 0)
            .collect::<Vec<_>>(),
        vec![3, 5, 6]
    );
}
