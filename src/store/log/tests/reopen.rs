//! Round trips and Raft log semantics, before and after reopening.

use bytes::Bytes;

use super::support::*;
use crate::store::log::{LogError, LogOp, MetaKey};

#[tokio::test]
async fn round_trip_and_reopen_after_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (engine, report) = open(dir.path());
        assert_eq!(report.groups, 0);
        assert!(report.torn_tail.is_none());
        engine.write(appends(1, 1..=5)).await.unwrap();
        engine.write(appends(2, 10..=12)).await.unwrap();
        engine
            .write(vec![LogOp::SetMeta {
                group: 1,
                key: MetaKey::VOTE,
                value: Bytes::from_static(b"term 3 node 1"),
            }])
            .await
            .unwrap();
        assert_eq!(indices(&engine, 1), vec![1, 2, 3, 4, 5]);
        assert_eq!(
            engine.entries(1, 2..4).unwrap(),
            vec![(2, payload(1, 2)), (3, payload(1, 3))]
        );
        let stats = engine.stats();
        assert_eq!((stats.writes, stats.appends, stats.ops), (3, 8, 9));
    }
    let (engine, report) = open(dir.path());
    assert!(report.torn_tail.is_none());
    assert!(report.corruptions.is_empty());
    assert_eq!(report.groups, 2);
    assert_eq!(engine.groups(), vec![1, 2]);
    assert_eq!(indices(&engine, 1), vec![1, 2, 3, 4, 5]);
    assert_eq!(indices(&engine, 2), vec![10, 11, 12]);
    assert_eq!(engine.first_index(2), Some(10));
    assert_eq!(engine.last_index(2), Some(12));
    assert_eq!(
        engine.meta(1, MetaKey::VOTE),
        Some(Bytes::from_static(b"term 3 node 1"))
    );
    assert_eq!(engine.meta(2, MetaKey::VOTE), None);
    // Appending continues where the log left off.
    engine.write(appends(1, 6..=6)).await.unwrap();
    assert_eq!(engine.last_index(1), Some(6));
}

#[test]
fn truncate_purge_meta_and_drop_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (engine, _) = open(dir.path());
        engine.write_blocking(appends(1, 1..=10)).unwrap();
        engine.write_blocking(appends(2, 1..=3)).unwrap();
        engine.write_blocking(appends(3, 1..=3)).unwrap();
        // Raft conflict resolution: truncate then rewrite from the conflict.
        let mut rewrite = vec![LogOp::TruncateFrom { group: 1, index: 8 }];
        rewrite.push(LogOp::Append {
            group: 1,
            index: 8,
            payload: Bytes::from_static(b"rewritten"),
        });
        engine.write_blocking(rewrite).unwrap();
        // Compaction: purge and record the purged log id in one write.
        engine
            .write_blocking(vec![
                LogOp::PurgeUpTo { group: 1, index: 4 },
                LogOp::SetMeta {
                    group: 1,
                    key: MetaKey::LAST_PURGED,
                    value: Bytes::from_static(b"term 1 index 4"),
                },
            ])
            .unwrap();
        // A snapshot installed beyond the end of group 2's log.
        engine
            .write_blocking(vec![LogOp::PurgeUpTo {
                group: 2,
                index: 100,
            }])
            .unwrap();
        engine
            .write_blocking(vec![LogOp::DropGroup { group: 3 }])
            .unwrap();
        engine
            .write_blocking(vec![LogOp::SetMeta {
                group: 1,
                key: MetaKey::COMMITTED,
                value: Bytes::from_static(b"7"),
            }])
            .unwrap();
    }
    let (engine, _) = open(dir.path());
    assert_eq!(engine.groups(), vec![1, 2]);
    let group1 = engine.entries(1, ..).unwrap();
    let found: Vec<u64> = group1.iter().map(|(index, _)| *index).collect();
    assert_eq!(found, vec![5, 6, 7, 8]);
    assert_eq!(group1[3].1, Bytes::from_static(b"rewritten"));
    assert_eq!(engine.last_purged(1), Some(4));
    assert_eq!(
        engine.meta(1, MetaKey::LAST_PURGED),
        Some(Bytes::from_static(b"term 1 index 4"))
    );
    assert_eq!(
        engine.meta(1, MetaKey::COMMITTED),
        Some(Bytes::from_static(b"7"))
    );
    assert_eq!(engine.first_index(2), None);
    assert_eq!(engine.last_index(2), None);
    assert_eq!(engine.last_purged(2), Some(100));
    assert!(indices(&engine, 3).is_empty());
    // The purge mark still constrains the next append after reopen.
    assert!(matches!(
        engine.write_blocking(appends(2, 100..=100)),
        Err(LogError::NonContiguous { expected: 101, .. })
    ));
    engine.write_blocking(appends(2, 101..=101)).unwrap();
    engine.write_blocking(appends(3, 50..=50)).unwrap();
    assert_eq!(indices(&engine, 3), vec![50]);
}

#[tokio::test]
async fn invalid_writes_are_rejected_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    engine.write(appends(1, 1..=3)).await.unwrap();
    engine
        .write(vec![LogOp::PurgeUpTo { group: 1, index: 2 }])
        .await
        .unwrap();
    let gap = engine.write(vec![append(2, 1), append(1, 5)]).await;
    assert!(matches!(
        gap,
        Err(LogError::NonContiguous {
            group: 1,
            expected: 4,
            got: 5
        })
    ));
    assert!(
        indices(&engine, 2).is_empty(),
        "nothing of a rejected write"
    );
    let into_purged = engine
        .write(vec![LogOp::TruncateFrom { group: 1, index: 2 }])
        .await;
    assert!(matches!(into_purged, Err(LogError::TruncatePurged { .. })));
    assert_eq!(indices(&engine, 1), vec![3]);
    // Nothing reached the disk either.
    drop(engine);
    let (engine, _) = open(dir.path());
    assert_eq!(engine.groups(), vec![1]);
    assert_eq!(indices(&engine, 1), vec![3]);
}

#[test]
fn submit_is_readable_at_once_and_completes_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    let (done, completions) = std::sync::mpsc::channel();
    for index in 1..=50 {
        let done = done.clone();
        engine
            .submit(vec![append(9, index)], move |result| {
                done.send((index, result.is_ok())).unwrap();
            })
            .unwrap();
        // Readable as soon as submit returns, as openraft's append requires.
        assert_eq!(engine.last_index(9), Some(index));
    }
    let order: Vec<(u64, bool)> = (0..50).map(|_| completions.recv().unwrap()).collect();
    let expected: Vec<(u64, bool)> = (1..=50).map(|index| (index, true)).collect();
    assert_eq!(order, expected);
}

#[test]
fn a_log_directory_is_opened_by_one_engine_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    let second = crate::store::log::LogEngine::open(dir.path(), options());
    assert!(matches!(second, Err(LogError::Locked { .. })), "{second:?}");
    drop(engine);
    let (_engine, _) = open(dir.path());
}

/// `fsync: false` (the log of memory streams): the same format and reads, no fsync at all.
#[test]
fn a_log_without_fsync_never_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let options = crate::store::log::LogOptions {
        fsync: false,
        ..small_segments()
    };
    let (engine, _) = open_with(dir.path(), options);
    for index in 1..=200 {
        engine.write_blocking(appends(1, index..=index)).unwrap();
    }
    let stats = engine.stats();
    assert!(stats.segments_created > 1, "{stats:?}");
    assert_eq!(stats.fsyncs, 0);
    assert_eq!(indices(&engine, 1), (1..=200).collect::<Vec<_>>());
}
