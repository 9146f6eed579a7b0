//! Helpers shared by the log engine tests.

use std::fs;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::store::log::{LogEngine, LogOp, LogOptions, RecoveryReport};

/// The default options without preallocation, so a segment file ends where its last write
/// ends: the format tests cut and damage files at byte offsets they derive from file
/// lengths. `tests/preallocate.rs` covers preallocation.
pub fn options() -> LogOptions {
    LogOptions {
        preallocate: 0,
        ..LogOptions::default()
    }
}

/// Small segments so rotation (and compaction, beyond 4 segments) happens within a test.
pub fn small_segments() -> LogOptions {
    LogOptions {
        segment_size: 4096,
        compact_after_segments: 4,
        reclaim_min_bytes: 4096,
        ..options()
    }
}

pub fn open(dir: &Path) -> (LogEngine, RecoveryReport) {
    open_with(dir, options())
}

pub fn open_with(dir: &Path, options: LogOptions) -> (LogEngine, RecoveryReport) {
    LogEngine::open(dir, options).expect("open log")
}

/// The payload tests store at (group, index): recognisable and of varying length.
pub fn payload(group: u64, index: u64) -> Bytes {
    let mut text = format!("g{group}-i{index}-");
    text.push_str(&"x".repeat((index % 7) as usize * 5));
    Bytes::from(text)
}

pub fn append(group: u64, index: u64) -> LogOp {
    LogOp::Append {
        group,
        index,
        payload: payload(group, index),
    }
}

pub fn appends(group: u64, indices: impl IntoIterator<Item = u64>) -> Vec<LogOp> {
    indices
        .into_iter()
        .map(|index| append(group, index))
        .collect()
}

/// Indices present in `group`, checking every payload is the one written.
pub fn indices(engine: &LogEngine, group: u64) -> Vec<u64> {
    engine
        .entries(group, ..)
        .expect("readable group")
        .into_iter()
        .map(|(index, bytes)| {
            assert_eq!(bytes, payload(group, index), "payload of {group}/{index}");
            index
        })
        .collect()
}

/// Segment files of a log directory, oldest first.
pub fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("read log dir")
        .map(|entry| entry.expect("dir entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "wal"))
        .collect();
    files.sort();
    files
}

pub fn newest_segment(dir: &Path) -> PathBuf {
    segment_files(dir).pop().expect("a segment file")
}

pub fn file_len(path: &Path) -> u64 {
    fs::metadata(path).expect("metadata").len()
}

/// Copy a log directory (to replay one damaged variant of it per test case).
pub fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for file in segment_files(from) {
        fs::copy(&file, to.join(file.file_name().unwrap())).unwrap();
    }
}

pub fn flip_byte(path: &Path, offset: u64) {
    let mut bytes = fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

pub fn cut_file(path: &Path, len: u64) {
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .unwrap()
        .set_len(len)
        .unwrap();
}
