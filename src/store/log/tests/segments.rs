//! Segment rotation and deletion keep the directory bounded while groups purge, without
//! losing meta values or purge marks that were written in deleted segments.

use bytes::Bytes;

use super::support::*;
use crate::store::log::{LogEngine, LogOp, LogOptions, MetaKey};

fn big_append(group: u64, index: u64) -> LogOp {
    LogOp::Append {
        group,
        index,
        payload: Bytes::from(vec![index as u8; 300]),
    }
}

#[test]
fn rotation_and_deletion_keep_the_directory_bounded() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (engine, _) = open_with(dir.path(), small_segments());
        // Group 3 only ever has a vote, written in the first segment.
        engine
            .write_blocking(vec![LogOp::SetMeta {
                group: 3,
                key: MetaKey::VOTE,
                value: Bytes::from_static(b"vote of 3"),
            }])
            .unwrap();
        let mut max_files = 0;
        for index in 1..=400u64 {
            engine
                .write_blocking(vec![big_append(1, index), big_append(2, index)])
                .unwrap();
            if index % 10 == 0 {
                // Keep the last 5 entries of each group, as a snapshot policy would.
                let purge_to = index - 5;
                engine
                    .write_blocking(vec![
                        LogOp::PurgeUpTo {
                            group: 1,
                            index: purge_to,
                        },
                        LogOp::SetMeta {
                            group: 1,
                            key: MetaKey::LAST_PURGED,
                            value: Bytes::from(purge_to.to_string()),
                        },
                        LogOp::PurgeUpTo {
                            group: 2,
                            index: purge_to,
                        },
                    ])
                    .unwrap();
            }
            max_files = max_files.max(segment_files(dir.path()).len());
        }
        let stats = engine.stats();
        assert!(stats.segments_created > 40, "{stats:?}");
        assert!(max_files <= 4, "directory grew to {max_files} segments");
        assert_eq!(
            stats.segments_deleted + segment_files(dir.path()).len() as u64,
            stats.segments_created
        );
    }
    let (engine, report) = open_with(dir.path(), small_segments());
    assert!(report.corruptions.is_empty() && report.torn_tail.is_none());
    assert_eq!(
        engine.meta(3, MetaKey::VOTE),
        Some(Bytes::from_static(b"vote of 3"))
    );
    assert_eq!(
        engine.meta(1, MetaKey::LAST_PURGED),
        Some(Bytes::from_static(b"395"))
    );
    assert_eq!(engine.last_purged(2), Some(395));
    let first_kept: Vec<u64> = engine.entries(1, ..).unwrap().iter().map(|e| e.0).collect();
    assert_eq!(first_kept, (396..=400).collect::<Vec<_>>());
    assert_eq!(engine.entries(2, ..).unwrap().len(), 5);
    assert_eq!(engine.groups(), vec![1, 2, 3]);
}

#[test]
fn an_unpurged_entry_pins_its_segment_until_purged() {
    let dir = tempfile::tempdir().unwrap();
    let no_compaction = LogOptions {
        compact_after_segments: usize::MAX,
        reclaim_max_bytes: 0,
        ..small_segments()
    };
    let (engine, _) = open_with(dir.path(), no_compaction.clone());
    engine.write_blocking(vec![big_append(7, 1)]).unwrap();
    for index in 1..=60u64 {
        engine.write_blocking(vec![big_append(8, index)]).unwrap();
        engine
            .write_blocking(vec![LogOp::PurgeUpTo { group: 8, index }])
            .unwrap();
    }
    let pinned = segment_files(dir.path()).len();
    assert!(
        pinned >= 4,
        "group 7's entry should pin old segments ({pinned})"
    );
    engine
        .write_blocking(vec![LogOp::PurgeUpTo { group: 7, index: 1 }])
        .unwrap();
    let after = segment_files(dir.path()).len();
    assert_eq!(after, 1, "only the active segment is left");
    drop(engine);
    let (engine, _) = open_with(dir.path(), no_compaction);
    assert_eq!(engine.last_purged(7), Some(1));
    assert_eq!(engine.last_purged(8), Some(60));
    assert_eq!(engine.last_index(8), None);
}

#[test]
fn compaction_moves_idle_groups_forward_so_old_segments_go() {
    let dir = tempfile::tempdir().unwrap();
    let options = small_segments();
    let limit = options.compact_after_segments;
    {
        let (engine, _) = open_with(dir.path(), options.clone());
        // Idle groups: a few entries and a vote each, never purged.
        for group in 10..13 {
            engine.write_blocking(appends(group, 1..=3)).unwrap();
            engine
                .write_blocking(vec![LogOp::SetMeta {
                    group,
                    key: MetaKey::VOTE,
                    value: Bytes::from(format!("vote {group}")),
                }])
                .unwrap();
        }
        // A busy group that purges behind itself.
        let mut max_files = 0;
        for index in 1..=300u64 {
            engine.write_blocking(vec![big_append(1, index)]).unwrap();
            if index % 10 == 0 {
                engine
                    .write_blocking(vec![LogOp::PurgeUpTo {
                        group: 1,
                        index: index - 2,
                    }])
                    .unwrap();
            }
            max_files = max_files.max(segment_files(dir.path()).len());
        }
        let stats = engine.stats();
        assert!(stats.segments_created > 20, "{stats:?}");
        assert!(stats.rewritten_entries >= 9, "{stats:?}");
        assert!(
            max_files <= limit + 2,
            "{max_files} segment files with compaction after {limit}"
        );
        // Entries moved by compaction are still readable and still constrain appends.
        engine.write_blocking(appends(10, 4..=4)).unwrap();
    }
    let (engine, report) = open_with(dir.path(), options);
    assert!(report.corruptions.is_empty() && report.torn_tail.is_none());
    assert!(report.corrupt_groups.is_empty());
    assert_eq!(indices(&engine, 10), vec![1, 2, 3, 4]);
    for group in 11..13 {
        assert_eq!(indices(&engine, group), vec![1, 2, 3]);
        assert_eq!(
            engine.meta(group, MetaKey::VOTE),
            Some(Bytes::from(format!("vote {group}")))
        );
    }
    assert_eq!(engine.last_index(1), Some(300));
    assert_eq!(engine.first_index(1), Some(299));
}

/// A deleted stream's log leaves the disk when the drop completes, although an idle group
/// (the meta group) has an entry in the first segment and the segment count is far below
/// `compact_after_segments`.
#[test]
fn a_dropped_group_frees_its_segments_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        compact_after_segments: usize::MAX,
        ..small_segments()
    };
    let (engine, _) = open_with(dir.path(), options.clone());
    engine.write_blocking(appends(0, 1..=2)).unwrap();
    for index in 1..=100u64 {
        engine.write_blocking(vec![big_append(5, index)]).unwrap();
    }
    engine.write_blocking(appends(0, 3..=3)).unwrap();
    let before = segment_files(dir.path()).len();
    assert!(before > 4, "the stream's log spans {before} segments");
    engine
        .write_blocking(vec![LogOp::DropGroup { group: 5 }])
        .unwrap();
    assert_eq!(
        segment_files(dir.path()).len(),
        1,
        "only a new segment is left"
    );
    assert!(engine.stats().rewritten_entries >= 3);
    engine.write_blocking(appends(0, 4..=4)).unwrap();
    drop(engine);
    let (engine, report) = open_with(dir.path(), options);
    assert!(report.corruptions.is_empty() && report.corrupt_groups.is_empty());
    assert_eq!(indices(&engine, 0), vec![1, 2, 3, 4]);
    assert_eq!(engine.groups(), vec![0]);
}

/// A purge frees the segments of the purged entries, and nothing is copied while a group
/// too big to copy still holds the oldest segment.
#[test]
fn a_purge_frees_segments_unless_a_big_group_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        compact_after_segments: usize::MAX,
        reclaim_max_bytes: 2048,
        ..small_segments()
    };
    let (engine, _) = open_with(dir.path(), options.clone());
    engine.write_blocking(appends(0, 1..=2)).unwrap();
    for index in 1..=60u64 {
        engine
            .write_blocking(vec![big_append(5, index), big_append(6, index)])
            .unwrap();
    }
    let before = segment_files(dir.path()).len();
    // Group 6 (18 KB live) is too big to copy within 2 KB: its purge frees nothing old.
    engine
        .write_blocking(vec![LogOp::PurgeUpTo {
            group: 5,
            index: 60,
        }])
        .unwrap();
    assert_eq!(engine.stats().rewritten_entries, 0);
    assert!(segment_files(dir.path()).len() >= before);
    engine
        .write_blocking(vec![LogOp::PurgeUpTo {
            group: 6,
            index: 60,
        }])
        .unwrap();
    assert_eq!(segment_files(dir.path()).len(), 1);
    drop(engine);
    let (engine, _) = open_with(dir.path(), options);
    assert_eq!(indices(&engine, 0), vec![1, 2]);
    assert_eq!(engine.last_purged(5), Some(60));
    assert_eq!(engine.last_purged(6), Some(60));
}

/// A reclaim that copies several write pieces (1 MiB) of live entries writes them in
/// pieces under one sync: every entry reads back whole, in place and after a reopen.
#[test]
fn a_rewrite_of_many_entries_is_written_in_pieces_and_reads_back() {
    const KEPT: u64 = 3_500;
    let kept = |index: u64| Bytes::from(format!("{index:08}-").repeat(100)); // 900 bytes
    let dir = tempfile::tempdir().unwrap();
    let options = LogOptions {
        segment_size: 4 << 20,
        compact_after_segments: usize::MAX,
        reclaim_max_bytes: u64::MAX,
        ..options()
    };
    let check = |engine: &LogEngine| {
        let entries = engine.entries(0, ..).expect("readable group");
        assert_eq!(entries.len() as u64, KEPT);
        for (index, bytes) in entries {
            assert_eq!(bytes, kept(index), "payload of 0/{index}");
        }
    };
    {
        let (engine, _) = open_with(dir.path(), options.clone());
        let ops = (1..=KEPT).map(|index| LogOp::Append {
            group: 0,
            index,
            payload: kept(index),
        });
        engine.write_blocking(ops.collect()).unwrap();
        for index in 1..=40u64 {
            let payload = Bytes::from(vec![index as u8; 400 << 10]);
            let append = LogOp::Append {
                group: 5,
                index,
                payload,
            };
            engine.write_blocking(vec![append]).unwrap();
        }
        engine
            .write_blocking(vec![LogOp::DropGroup { group: 5 }])
            .unwrap();
        let stats = engine.stats();
        assert!(stats.rewritten_entries >= KEPT, "{stats:?}");
        check(&engine);
    }
    let (engine, report) = open_with(dir.path(), options);
    assert!(report.corruptions.is_empty() && report.torn_tail.is_none());
    check(&engine);
}
