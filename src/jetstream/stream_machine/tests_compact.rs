//! Segment compaction (`compact.rs`, ADR 0029): a segment that interior removals left mostly
//! empty has its live messages moved to the active segment and goes. Over the `tests_load`
//! harness.

use bytes::Bytes;

use super::keys;
use super::segments::Locator;
use super::tests_load::{encode, Harness};
use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::group::StreamCommand;
use crate::jscore::stream::{AppendRequest, PurgeRequest};

fn append(subject: &str, n: usize) -> crate::consensus::Command {
    encode(StreamCommand::Append(AppendRequest {
        subject: subject.into(),
        headers: n
            .is_multiple_of(3)
            .then(|| Bytes::from(format!("NATS/1.0\r\nNats-Msg-Id: m{n}\r\n\r\n"))),
        payload: Bytes::from(vec![n as u8; 1000]),
        now_nanos: n as i64 + 1,
    }))
}

fn segment_of(harness: &Harness, first: u64) -> u32 {
    let value = harness.view.get(&keys::block(first)).unwrap().unwrap();
    Locator::decode(&value).unwrap().unwrap().segment
}

fn segment_files(harness: &Harness) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(harness.view.files_dir())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.ends_with(".seg"))
        .collect();
    names.sort();
    names
}

/// 150 apply calls of 64 messages of 1 KB (one block each, two segments and a bit), on
/// `s.big` but for a few `s.keep` messages in the first blocks.
fn filled() -> Harness {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    let mut n = 0;
    for call in 0..150 {
        let commands: Vec<_> = (0..64)
            .map(|i| {
                n += 1;
                let subject = if call < 3 && i == 10 {
                    "s.keep"
                } else {
                    "s.big"
                };
                append(subject, n)
            })
            .collect();
        harness.apply(&commands);
    }
    harness
}

fn purge(harness: &mut Harness, subject: &str) {
    harness.apply(&[encode(StreamCommand::Purge(PurgeRequest {
        filter: Some(subject.into()),
        seq: 0,
        keep: 0,
    }))]);
}

#[test]
fn a_segment_left_mostly_empty_by_interior_removals_goes() {
    let mut harness = filled();
    let first_segment = segment_of(&harness, 1);
    assert!(segment_files(&harness).len() >= 2);
    let kept: Vec<u64> = harness
        .state()
        .stream()
        .seqs()
        .filter(|seq| [11, 75, 139].contains(seq))
        .collect();
    assert_eq!(kept.len(), 3);

    purge(&mut harness, "s.big");
    assert_eq!(harness.state().stream().seqs().collect::<Vec<_>>(), kept);
    // The three `s.keep` messages were rewritten outside the first segment.
    let blocks: Vec<u64> = harness
        .keys_under(keys::BLOCK_PREFIX)
        .iter()
        .map(|key| keys::parse_u64_key(keys::BLOCK_PREFIX, key).unwrap())
        .collect();
    assert_eq!(
        blocks, kept,
        "one block per compacted block, keyed by its live message"
    );
    assert!(blocks
        .iter()
        .all(|&first| segment_of(&harness, first) != first_segment));
    assert!(
        harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty(),
        "tombstones went with their blocks"
    );
    harness.check_reload("after compaction, before the old segment goes");
    harness.db.sync().unwrap();
    let files = segment_files(&harness);
    assert!(
        !files.contains(&format!("{first_segment:08x}.seg")),
        "the compacted segment is removed: {files:?}"
    );
    harness.check_reload("after the old segment went");
    let message = harness.reloaded_view().message(75).unwrap();
    assert_eq!(message.subject, "s.keep");
    assert_eq!(message.payload.as_ref(), &[75u8; 1000][..]);
    assert_eq!(
        message.headers.as_deref(),
        Some(&b"NATS/1.0\r\nNats-Msg-Id: m75\r\n\r\n"[..])
    );
}

#[test]
fn a_segment_with_most_of_its_messages_left_stays() {
    let mut harness = filled();
    let first_segment = segment_of(&harness, 1);
    // A third of the first blocks' messages gone: not worth a rewrite.
    let doomed: Vec<u64> = (1..=2000)
        .filter(|seq: &u64| seq.is_multiple_of(3))
        .collect();
    for seq in doomed {
        harness.apply(&[encode(StreamCommand::DeleteMsg { seq })]);
    }
    assert_eq!(segment_of(&harness, 1), first_segment);
    assert!(!harness.keys_under(keys::TOMBSTONE_PREFIX).is_empty());
    harness.check_reload("interior deletes, not compacted");
}

#[test]
fn the_active_segment_is_not_compacted() {
    let mut harness = Harness::new(StreamConfig::new("S", &["s.>"]));
    let commands: Vec<_> = (1..=64)
        .map(|n| append(if n == 5 { "s.keep" } else { "s.big" }, n))
        .collect();
    harness.apply(&commands);
    let segment = segment_of(&harness, 1);
    purge(&mut harness, "s.big");
    assert_eq!(
        segment_of(&harness, 1),
        segment,
        "the block stays where it is"
    );
    // Tombstones for 6..=64: 1..=4 are below the first sequence now.
    assert_eq!(harness.keys_under(keys::TOMBSTONE_PREFIX).len(), 59);
    harness.check_reload("the active segment left as it is");
}

/// A KV-like stream (one message per subject kept) written in calls of one to three 16 KiB
/// messages, while the write-behind queue is held for three calls at a time. A call of few
/// messages extends the stream's last block by a frame, which stays pinned until its batch
/// is written; a later call's removals may make that block's segment worth compacting, once
/// a newer segment took over, while the frame is still pinned. Every message must stay
/// readable throughout, and after a reload.
#[test]
fn compaction_keeps_the_messages_of_a_frame_not_written_yet() {
    let mut config = StreamConfig::new("S", &["s.>"]);
    config.max_msgs_per_subject = 1;
    let mut harness = Harness::new(config);
    let mut n = 0u64;
    let mut rng = crate::jscore::xorshift::XorShift(7);
    let mut segments_seen = std::collections::BTreeSet::new();
    let mut calls = 0;
    let mut stall = Some(harness.stall_writer());
    while n < 1600 {
        let count = 1 + rng.below(3);
        let commands: Vec<_> = (0..count)
            .map(|_| {
                n += 1;
                // Every 25th message a key written once; the rest revise 40 hot keys.
                let subject = if n.is_multiple_of(25) {
                    format!("s.cold.{n}")
                } else {
                    format!("s.hot.{}", n % 40)
                };
                encode(StreamCommand::Append(AppendRequest {
                    subject,
                    headers: None,
                    payload: Bytes::from(vec![(n % 251) as u8; 16 << 10]),
                    now_nanos: n as i64,
                }))
            })
            .collect();
        harness.apply(&commands);
        calls += 1;
        if calls % 3 == 0 {
            drop(stall.take());
            harness.db.writer().flush_all().unwrap();
            stall = Some(harness.stall_writer());
        }
        let seqs: Vec<u64> = harness.state().stream().seqs().collect();
        let served = harness.stream.messages(&seqs);
        let lost: Vec<u64> = seqs
            .iter()
            .zip(&served)
            .filter(|(_, body)| body.is_none())
            .map(|(seq, _)| *seq)
            .collect();
        assert!(lost.is_empty(), "after message {n}: no body for {lost:?}");
        segments_seen.extend(segment_files(&harness));
    }
    drop(stall);
    assert!(
        segments_seen.len() >= 3,
        "the run spans segments: {segments_seen:?}"
    );
    harness.check_reload("after the held batches were written");
}
