//! Preallocation (`LogOptions::preallocate`): the active segment is zero-filled ahead of the
//! writes. The bytes written are the same as without it — only the file is longer, and the
//! zero-filled rest is the clean end of a segment on recovery, also after a seal — while a
//! final batch that reached the disk only in part is still a torn tail.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use super::support::*;
use crate::store::log::record::{self, Parsed};
use crate::store::log::{FaultInjector, LogOptions};

const AHEAD: u64 = 64 << 10;

fn preallocating() -> LogOptions {
    LogOptions {
        preallocate: AHEAD,
        ..options()
    }
}

/// The same five writes in `dir`; returns the data length before the last one and after it
/// (meaningful only without preallocation, where the file ends with the data).
fn five_writes(dir: &Path, options: LogOptions) -> (u64, u64) {
    let (engine, _) = open_with(dir, options);
    for first in [1, 5, 9, 13] {
        engine
            .write_blocking(appends(1, first..=first + 3))
            .unwrap();
    }
    let before = file_len(&newest_segment(dir));
    engine.write_blocking(appends(1, 17..=20)).unwrap();
    (before, file_len(&newest_segment(dir)))
}

fn zero_from(path: &Path, offset: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset as usize..].fill(0);
    fs::write(path, bytes).unwrap();
}

#[test]
fn a_zero_header_is_not_a_record() {
    let zeros = [0u8; 256];
    assert!(!matches!(
        record::parse(&zeros, 0),
        Parsed::Record { .. } | Parsed::BadPayload { .. }
    ));
}

#[test]
fn same_bytes_as_without_preallocation_then_zeros() {
    let plain = tempfile::tempdir().unwrap();
    let (_, end) = five_writes(plain.path(), options());
    let filled = tempfile::tempdir().unwrap();
    five_writes(filled.path(), preallocating());

    let plain_bytes = fs::read(newest_segment(plain.path())).unwrap();
    let filled_bytes = fs::read(newest_segment(filled.path())).unwrap();
    assert!(
        filled_bytes.len() as u64 >= end + AHEAD / 2,
        "zero-filled ahead"
    );
    assert_eq!(&filled_bytes[..end as usize], &plain_bytes[..]);
    assert!(filled_bytes[end as usize..].iter().all(|byte| *byte == 0));
}

#[test]
fn the_zero_filled_rest_is_the_clean_end_also_after_a_seal() {
    let dir = tempfile::tempdir().unwrap();
    five_writes(dir.path(), preallocating());
    for round in 0..3u64 {
        // Each open seals the previous segment where its data ends, in front of its zeros.
        let (engine, report) = open_with(dir.path(), preallocating());
        assert!(
            report.torn_tail.is_none(),
            "round {round}: {:?}",
            report.torn_tail
        );
        assert!(report.corruptions.is_empty(), "round {round}");
        let last = 20 + round * 4;
        assert_eq!(indices(&engine, 1), (1..=last).collect::<Vec<_>>());
        engine
            .write_blocking(appends(1, last + 1..=last + 4))
            .unwrap();
    }
    let (engine, _) = open_with(dir.path(), preallocating());
    assert_eq!(indices(&engine, 1), (1..=32).collect::<Vec<_>>());
}

#[test]
fn a_final_batch_that_never_reached_the_disk_leaves_no_trace() {
    let plain = tempfile::tempdir().unwrap();
    let (before, after) = five_writes(plain.path(), options());
    let base = tempfile::tempdir().unwrap();
    five_writes(base.path(), preallocating());

    // Nothing of the last batch on disk: a clean end, nothing to report.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(base.path(), dir.path());
    zero_from(&newest_segment(dir.path()), before);
    let (engine, report) = open_with(dir.path(), preallocating());
    assert!(report.torn_tail.is_none());
    assert_eq!(indices(&engine, 1), (1..=16).collect::<Vec<_>>());
    drop(engine);

    // Part of it on disk: a torn tail, cut back to the end of the previous batch.
    for keep in [8, (after - before) / 2, after - before - 1] {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        zero_from(&newest_segment(dir.path()), before + keep);
        let (engine, report) = open_with(dir.path(), preallocating());
        let torn = report.torn_tail.expect("a torn tail");
        assert_eq!(torn.offset, before, "kept {keep}");
        assert!(report.corruptions.is_empty(), "kept {keep}");
        assert_eq!(indices(&engine, 1), (1..=16).collect::<Vec<_>>());
        engine.write_blocking(appends(1, 17..=18)).unwrap();
    }
}

#[tokio::test]
async fn a_failed_write_is_cut_back_and_the_next_one_fills_again() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let options = LogOptions {
        fault: Some(Arc::clone(&fault)),
        ..preallocating()
    };
    {
        let (engine, _) = open_with(dir.path(), options.clone());
        engine.write(appends(1, 1..=4)).await.unwrap();
        fault.fail_next_write_after(20);
        engine.write(appends(1, 5..=8)).await.unwrap_err();
        let segment = newest_segment(dir.path());
        let cut = file_len(&segment);
        engine.write(appends(1, 5..=8)).await.unwrap();
        assert!(file_len(&segment) > cut, "zero-filled again after the cut");
    }
    let (engine, report) = open_with(dir.path(), options);
    assert!(report.torn_tail.is_none() && report.corruptions.is_empty());
    assert_eq!(indices(&engine, 1), (1..=8).collect::<Vec<_>>());
}
