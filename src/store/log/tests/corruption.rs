//! Damage in the middle of the log is never skipped silently: the group is marked corrupt, or
//! the engine refuses to open when the damage cannot be pinned to a group.

use bytes::Bytes;

use super::support::*;
use crate::store::log::{LogError, LogOp, MetaKey};

/// Writes group 1 entries 1..=3 one per write (group 2 interleaved) and returns the file and
/// the offset of entry 2's record.
fn log_with_three_entries(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let (engine, _) = open(dir);
    engine.write_blocking(appends(1, 1..=1)).unwrap();
    engine.write_blocking(appends(2, 1..=1)).unwrap();
    let segment = newest_segment(dir);
    let offset = file_len(&segment);
    engine.write_blocking(appends(1, 2..=2)).unwrap();
    engine.write_blocking(appends(2, 2..=2)).unwrap();
    engine.write_blocking(appends(1, 3..=3)).unwrap();
    (segment, offset)
}

const RECORD_HEADER_LEN: u64 = 32;

#[test]
fn damaged_payload_in_the_middle_marks_the_group_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, entry2) = log_with_three_entries(dir.path());
    flip_byte(&segment, entry2 + RECORD_HEADER_LEN + 1);
    {
        let (engine, report) = open(dir.path());
        assert!(report.torn_tail.is_none());
        assert_eq!(report.corruptions.len(), 1);
        let corruption = &report.corruptions[0];
        assert_eq!(corruption.file, segment);
        assert_eq!(corruption.offset, entry2);
        assert_eq!((corruption.group, corruption.index), (1, 2));
        assert!(!corruption.superseded);
        assert_eq!(report.corrupt_groups, vec![1]);
        assert!(engine.is_corrupt(1));
        assert!(matches!(
            engine.entries(1, ..),
            Err(LogError::GroupCorrupt { group: 1 })
        ));
        assert!(matches!(
            engine.write_blocking(appends(1, 4..=4)),
            Err(LogError::GroupCorrupt { group: 1 })
        ));
        // Other groups are served.
        assert_eq!(indices(&engine, 2), vec![1, 2]);
        engine.write_blocking(appends(2, 3..=3)).unwrap();
    }
    // The mark is sticky: it is carried into every new segment's checkpoint.
    {
        let (engine, report) = open(dir.path());
        assert_eq!(report.corrupt_groups, vec![1]);
        assert!(engine.is_corrupt(1));
        // Dropping the group (to re-sync it from peers) clears it.
        engine
            .write_blocking(vec![LogOp::DropGroup { group: 1 }])
            .unwrap();
        engine.write_blocking(appends(1, 7..=7)).unwrap();
    }
    let (engine, report) = open(dir.path());
    assert_eq!(report.corrupt_groups, Vec::<u64>::new());
    assert_eq!(indices(&engine, 1), vec![7]);
    assert_eq!(indices(&engine, 2), vec![1, 2, 3]);
}

#[test]
fn damage_that_was_truncated_away_is_reported_but_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, entry2) = log_with_three_entries(dir.path());
    {
        let (engine, _) = open(dir.path());
        engine
            .write_blocking(vec![LogOp::TruncateFrom { group: 1, index: 2 }])
            .unwrap();
    }
    flip_byte(&segment, entry2 + RECORD_HEADER_LEN);
    let (engine, report) = open(dir.path());
    assert_eq!(report.corruptions.len(), 1);
    assert!(report.corruptions[0].superseded);
    assert!(report.corrupt_groups.is_empty());
    assert_eq!(indices(&engine, 1), vec![1]);
}

#[test]
fn damaged_meta_value_marks_the_group_corrupt_unless_overwritten() {
    for overwrite in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let segment;
        let offset;
        {
            let (engine, _) = open(dir.path());
            segment = newest_segment(dir.path());
            offset = file_len(&segment);
            let vote = |value: &'static [u8]| LogOp::SetMeta {
                group: 5,
                key: MetaKey::VOTE,
                value: Bytes::from_static(value),
            };
            engine.write_blocking(vec![vote(b"first")]).unwrap();
            engine.write_blocking(appends(6, 1..=1)).unwrap();
            if overwrite {
                engine.write_blocking(vec![vote(b"second")]).unwrap();
            }
        }
        flip_byte(&segment, offset + RECORD_HEADER_LEN);
        let (engine, report) = open(dir.path());
        assert_eq!(report.corruptions.len(), 1, "overwrite {overwrite}");
        assert_eq!(engine.is_corrupt(5), !overwrite);
        if overwrite {
            assert_eq!(
                engine.meta(5, MetaKey::VOTE),
                Some(Bytes::from_static(b"second"))
            );
        }
    }
}

#[test]
fn damaged_header_in_the_middle_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, entry2) = log_with_three_entries(dir.path());
    flip_byte(&segment, entry2 + 13); // inside the group id
    match crate::store::log::LogEngine::open(dir.path(), options()) {
        Err(LogError::Corrupt { file, offset, .. }) => {
            assert_eq!(file, segment);
            assert_eq!(offset, entry2);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn a_damaged_header_of_an_older_segment_is_rebuilt_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, _) = log_with_three_entries(dir.path());
    drop(open(dir.path())); // sealed: no longer the newest segment
    for byte in [1, 9, 17] {
        // the magic, the id, the CRC
        flip_byte(&segment, byte);
        let (engine, report) = open(dir.path());
        assert_eq!(report.rebuilt_segment_headers.len(), 1, "byte {byte}");
        assert!(report.corruptions.is_empty() && report.corrupt_groups.is_empty());
        assert_eq!(indices(&engine, 1), vec![1, 2, 3]);
        assert_eq!(indices(&engine, 2), vec![1, 2]);
        drop(engine);
        flip_byte(&segment, byte);
    }
}

#[test]
fn damage_in_an_older_segment_is_never_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, _) = log_with_three_entries(dir.path());
    // Reopen: the segment is sealed and a new one started; now damage the last record of the
    // sealed segment before its seal (entry 3 of group 1).
    drop(open(dir.path()));
    let sealed_len = file_len(&segment);
    let seal_len = RECORD_HEADER_LEN;
    flip_byte(&segment, sealed_len - seal_len - 3);
    let (engine, report) = open(dir.path());
    assert!(report.torn_tail.is_none());
    assert_eq!(report.corruptions.len(), 1);
    assert_eq!(report.corruptions[0].index, 3);
    assert!(engine.is_corrupt(1));
}

#[test]
fn truncated_older_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, entry2) = log_with_three_entries(dir.path());
    drop(open(dir.path()));
    // Cut exactly at a record boundary: only the missing seal tells.
    cut_file(&segment, entry2);
    match crate::store::log::LogEngine::open(dir.path(), options()) {
        Err(LogError::Corrupt { file, offset, .. }) => {
            assert_eq!(file, segment);
            assert_eq!(offset, entry2);
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn missing_segment_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    for index in 1..=3 {
        let (engine, _) = open(dir.path());
        engine.write_blocking(appends(1, index..=index)).unwrap();
    }
    let files = segment_files(dir.path());
    assert!(files.len() >= 3);
    std::fs::remove_file(&files[1]).unwrap();
    match crate::store::log::LogEngine::open(dir.path(), options()) {
        Err(LogError::Corrupt { file, .. }) => assert_eq!(file, files[1]),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn an_entry_index_no_writer_writes_marks_the_group_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, _) = open(dir.path());
    engine.write_blocking(appends(1, 1..=2)).unwrap();
    let segment = newest_segment(dir.path());
    let first_of_2 = file_len(&segment) as usize;
    engine.write_blocking(appends(2, 1..=1)).unwrap();
    engine.write_blocking(appends(1, 3..=3)).unwrap();
    drop(engine);
    // Group 2's only entry renumbered u64::MAX with its header CRC made right again: a record
    // with intact CRCs that no validated write produces (the index after it would overflow).
    let mut bytes = std::fs::read(&segment).unwrap();
    let header = &mut bytes[first_of_2..first_of_2 + RECORD_HEADER_LEN as usize];
    header[20..28].copy_from_slice(&u64::MAX.to_le_bytes());
    let crc = crc32c::crc32c(&header[4..]);
    header[..4].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&segment, bytes).unwrap();

    let (engine, report) = open(dir.path());
    assert_eq!(report.corrupt_groups, vec![2]);
    assert!(matches!(
        engine.entries(2, ..),
        Err(LogError::GroupCorrupt { group: 2 })
    ));
    assert_eq!(indices(&engine, 1), vec![1, 2, 3]);
    drop(engine);
    let (_, report) = open(dir.path());
    assert_eq!(report.corrupt_groups, vec![2]);
}
