//! A crash mid-write leaves a torn tail in the newest segment: recovery cuts it, reports it,
//! loses nothing acknowledged and keeps the log writable.

use std::fs::OpenOptions;
use std::io::Write;

use bytes::Bytes;

use super::support::*;
use crate::store::log::record;
use crate::store::log::{LogOp, MetaKey};

#[test]
fn torn_tail_at_every_byte_of_the_last_write_is_cut() {
    let base = tempfile::tempdir().unwrap();
    let (engine, _) = open(base.path());
    engine.write_blocking(appends(1, 1..=20)).unwrap();
    for index in 21..=24 {
        engine.write_blocking(appends(1, index..=index)).unwrap();
    }
    let segment = newest_segment(base.path());
    let before = file_len(&segment);
    // The last write has two records, so cuts fall inside each and between them.
    engine
        .write_blocking(vec![
            append(1, 25),
            LogOp::SetMeta {
                group: 2,
                key: MetaKey::VOTE,
                value: Bytes::from_static(b"vote"),
            },
        ])
        .unwrap();
    let after = file_len(&segment);
    drop(engine);
    assert!(after > before + 64);

    for cut in before..after {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        let damaged = dir.path().join(segment.file_name().unwrap());
        cut_file(&damaged, cut);
        {
            let (engine, report) = open(dir.path());
            match &report.torn_tail {
                None => assert_eq!(cut, before, "no torn tail reported for cut at {cut}"),
                Some(torn) => {
                    assert_eq!(torn.file, damaged);
                    assert_eq!(torn.offset, before, "cut at {cut}");
                    assert_eq!(torn.bytes_cut, cut - before, "cut at {cut}");
                }
            }
            assert!(report.corruptions.is_empty(), "cut at {cut}");
            // All or nothing: neither op of the torn write survives.
            assert_eq!(indices(&engine, 1), (1..=24).collect::<Vec<_>>());
            assert_eq!(engine.meta(2, MetaKey::VOTE), None, "cut at {cut}");
            assert_eq!(engine.groups(), vec![1]);
            engine.write_blocking(appends(1, 25..=26)).unwrap();
        }
        let (engine, report) = open(dir.path());
        assert!(report.torn_tail.is_none(), "second open after cut at {cut}");
        assert!(report.corruptions.is_empty());
        assert_eq!(indices(&engine, 1), (1..=26).collect::<Vec<_>>());
    }
}

#[test]
fn damaged_last_record_and_zero_fill_are_torn_tails() {
    let dir = tempfile::tempdir().unwrap();
    let segment;
    let last_write_at;
    {
        let (engine, _) = open(dir.path());
        engine.write_blocking(appends(1, 1..=3)).unwrap();
        segment = newest_segment(dir.path());
        last_write_at = file_len(&segment);
        engine.write_blocking(appends(1, 4..=4)).unwrap();
    }
    // A flipped payload byte in the very last record: indistinguishable from a torn write.
    flip_byte(&segment, file_len(&segment) - 2);
    // And a zero-filled block after it, as a filesystem may leave after a crash.
    let mut file = OpenOptions::new().append(true).open(&segment).unwrap();
    file.write_all(&[0u8; 4096]).unwrap();
    drop(file);
    let (engine, report) = open(dir.path());
    let torn = report.torn_tail.expect("torn tail");
    assert_eq!(torn.offset, last_write_at);
    assert!(torn.bytes_cut > 4096);
    assert!(report.corruptions.is_empty());
    assert_eq!(indices(&engine, 1), vec![1, 2, 3]);
}

#[test]
fn torn_header_of_a_new_segment_is_removed() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (engine, _) = open(dir.path());
        engine.write_blocking(appends(1, 1..=3)).unwrap();
    }
    // Fake a crash in the middle of a rotation: the active segment was sealed, and the next
    // segment file got only half of its header.
    let active = newest_segment(dir.path());
    let name = active.file_name().unwrap().to_str().unwrap();
    let id = u64::from_str_radix(name.trim_end_matches(".wal"), 16).unwrap();
    let mut seal = Vec::new();
    record::encode_seal(&mut seal, id);
    let mut file = OpenOptions::new().append(true).open(&active).unwrap();
    file.write_all(&seal).unwrap();
    drop(file);
    let torn = dir.path().join(format!("{:016x}.wal", id + 1));
    std::fs::write(&torn, b"JRWL\x01\x00").unwrap();

    let (engine, report) = open(dir.path());
    let cut = report.torn_tail.expect("torn header reported");
    assert_eq!(cut.file, torn);
    assert_eq!(cut.bytes_cut, 6);
    assert!(report.corruptions.is_empty());
    assert_eq!(indices(&engine, 1), vec![1, 2, 3]);
    engine.write_blocking(appends(1, 4..=4)).unwrap();
    drop(engine);
    let (engine, _) = open(dir.path());
    assert_eq!(indices(&engine, 1), vec![1, 2, 3, 4]);
}

#[test]
fn damage_inside_the_unsynced_final_batch_is_a_torn_tail() {
    // A crash may persist the pages of the last (never fsynced) batch out of order: its later
    // records intact, an earlier one not. That is a torn tail, not corruption.
    let dir = tempfile::tempdir().unwrap();
    let segment;
    let batch_start;
    {
        let (engine, _) = open(dir.path());
        engine.write_blocking(appends(1, 1..=2)).unwrap();
        segment = newest_segment(dir.path());
        batch_start = file_len(&segment);
        engine.write_blocking(appends(1, 3..=5)).unwrap();
    }
    let second_record = batch_start + 32 + payload(1, 3).len() as u64;
    flip_byte(&segment, second_record + 13); // the header of entry 4
    let (engine, report) = open(dir.path());
    let torn = report.torn_tail.expect("torn tail");
    assert_eq!(torn.offset, batch_start);
    assert!(report.corruptions.is_empty());
    assert_eq!(indices(&engine, 1), vec![1, 2]);
}
