//! WAL recovery (`crate::store::log::LogEngine::open`) over arbitrary segment files: never
//! a panic; whatever opened reopens to the same groups, corruption marks and entries (the
//! sealed, checkpointed result of a recovery is itself a clean log); and a bit flipped in
//! fsynced data (data followed by the start of a later batch, one that is not bytes inside
//! another record's payload) is always reported (a corruption, or a damaged segment header
//! rebuilt), never silently taken or dropped.
//!
//! Input: frames (`crate::fuzzing::seeds::frames`): the first is the control bytes, the
//! others the segment files `0000000000000001.wal`, `...2.wal`, ... (at most 4). Control byte
//! 0: bit 0 set = recompute every CRC the fuzzer's mutations broke, so it can reach what lies
//! behind them; bit 1 set (with bit 0) = then flip the bit of control bytes 1-2 (u16 LE bit
//! offset, modulo the segment's size) in the segment of control byte 3.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::fuzzing::seeds::frames;
use crate::store::log::{LogEngine, LogOptions, MetaKey, RecoveryReport};
use bytes::Bytes;

const SEGMENT_HEADER_LEN: usize = 24;
const RECORD_HEADER_LEN: usize = 32;
const START_OF_BATCH: u8 = 0x02;
const KNOWN_FLAGS: u8 = 0x03;
/// The highest record tag the format defines (tags run from 1).
const MAX_TAG: u8 = 8;
const MAX_PAYLOAD: usize = 256 << 20;
const MAX_SEGMENTS: usize = 4;

fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = crate::fuzzing::scratch_dir("wal");
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir
    })
}

fn options() -> LogOptions {
    LogOptions {
        segment_size: 4096,
        preallocate: 0,
        fsync: false,
        ..LogOptions::default()
    }
}

fn u32_at(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

/// Recomputes the segment header's CRC and each record's header and payload CRCs, following
/// the records' length fields as far as they stay inside the segment.
fn fix_crcs(segment: &mut [u8]) {
    if segment.len() < SEGMENT_HEADER_LEN {
        return;
    }
    let crc = crc32c::crc32c(&segment[..16]);
    segment[16..20].copy_from_slice(&crc.to_le_bytes());
    let mut pos = SEGMENT_HEADER_LEN;
    while pos + RECORD_HEADER_LEN <= segment.len() {
        let len = u32_at(segment, pos + 4) as usize;
        let Some(end) = (pos + RECORD_HEADER_LEN).checked_add(len) else {
            return;
        };
        if end > segment.len() {
            return;
        }
        let payload_crc = crc32c::crc32c(&segment[pos + RECORD_HEADER_LEN..end]);
        segment[pos + 28..pos + 32].copy_from_slice(&payload_crc.to_le_bytes());
        let header_crc = crc32c::crc32c(&segment[pos + 4..pos + RECORD_HEADER_LEN]);
        segment[pos..pos + 4].copy_from_slice(&header_crc.to_le_bytes());
        pos = end;
    }
}

/// Where the record at `pos` ends, if an intact record starts there: its header is valid by
/// the format's rules (CRC, a known tag, known flags, zero reserved bytes, a payload length in
/// bounds) and its payload's CRC matches.
fn intact_record_end(segment: &[u8], pos: usize) -> Option<usize> {
    let header = segment.get(pos..pos + RECORD_HEADER_LEN)?;
    let len = u32_at(header, 4) as usize;
    let end = pos + RECORD_HEADER_LEN + len;
    let valid = crc32c::crc32c(&header[4..]) == u32_at(header, 0)
        && (1..=MAX_TAG).contains(&header[8])
        && header[9] & !KNOWN_FLAGS == 0
        && header[10..12] == [0, 0]
        && len <= MAX_PAYLOAD
        && end <= segment.len()
        && crc32c::crc32c(&segment[pos + RECORD_HEADER_LEN..end]) == u32_at(header, 28);
    valid.then_some(end)
}

/// Does an intact record that starts a batch begin after `offset`, and is it unmistakably a
/// record, not bytes inside another record's payload? Recovery walks over the intact records
/// it meets (a message payload may itself hold WAL bytes), so a batch start counts only when
/// no intact record starting after `offset` and before it reaches past its first byte.
fn batch_starts_after(segment: &[u8], offset: usize) -> bool {
    let mut covered_to = 0;
    for pos in offset + 1..segment.len() {
        let Some(end) = intact_record_end(segment, pos) else {
            continue;
        };
        if pos >= covered_to && segment[pos + 9] & START_OF_BATCH != 0 {
            return true;
        }
        covered_to = covered_to.max(end);
    }
    false
}

/// What a recovered log holds, to compare two recoveries.
#[derive(Debug, PartialEq, Eq)]
struct Contents {
    corrupt: Vec<u64>,
    groups: BTreeMap<u64, GroupContents>,
}

#[derive(Debug, PartialEq, Eq)]
struct GroupContents {
    entries: Option<Vec<(u64, Bytes)>>,
    purged: Option<u64>,
    meta: [Option<Bytes>; 3],
}

fn open(dir: &Path) -> Result<(Contents, RecoveryReport), crate::store::log::LogError> {
    let (engine, report) = LogEngine::open(dir, options())?;
    let groups = engine
        .groups()
        .into_iter()
        .map(|group| {
            let contents = GroupContents {
                entries: engine.entries(group, ..).ok(),
                purged: engine.last_purged(group),
                meta: [MetaKey::VOTE, MetaKey::COMMITTED, MetaKey::LAST_PURGED]
                    .map(|key| engine.meta(group, key)),
            };
            (group, contents)
        })
        .collect();
    let contents = Contents {
        corrupt: engine.corrupt_groups(),
        groups,
    };
    Ok((contents, report))
}

fn write_segments(dir: &Path, segments: &[Vec<u8>]) -> Vec<PathBuf> {
    for entry in std::fs::read_dir(dir).expect("scratch directory") {
        let path = entry.expect("directory entry").path();
        std::fs::remove_file(&path).expect("clear scratch directory");
    }
    (1u64..)
        .zip(segments)
        .map(|(id, bytes)| {
            let path = dir.join(format!("{id:016x}.wal"));
            std::fs::write(&path, bytes).expect("write segment");
            path
        })
        .collect()
}

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let parts = frames(data);
    let Some((control, files)) = parts.split_first() else {
        return;
    };
    let control = [0, 1, 2, 3].map(|i| control.get(i).copied().unwrap_or(0));
    let mut segments: Vec<Vec<u8>> = files
        .iter()
        .take(MAX_SEGMENTS)
        .map(|f| f.to_vec())
        .collect();
    if control[0] & 1 != 0 {
        segments.iter_mut().for_each(|segment| fix_crcs(segment));
    }
    // The segment (its id) and offset of a bit flipped in synced data.
    let mut flipped_synced_data = None;
    if control[0] & 3 == 3 && !segments.is_empty() {
        let which = usize::from(control[3]) % segments.len();
        let segment = &mut segments[which];
        if !segment.is_empty() {
            let bit =
                usize::from(u16::from_le_bytes([control[1], control[2]])) % (segment.len() * 8);
            segment[bit / 8] ^= 1 << (bit % 8);
            if batch_starts_after(segment, bit / 8) {
                flipped_synced_data = Some((which as u64 + 1, bit / 8));
            }
        }
    }

    let dir = scratch_dir();
    write_segments(dir, &segments);
    let first = open(dir);
    if let (Some((segment, offset)), Ok((_, report))) = (flipped_synced_data, &first) {
        // A segment header's damage is reported as the header rebuilt from the file name.
        let header_rebuilt =
            offset < SEGMENT_HEADER_LEN && report.rebuilt_segment_headers.contains(&segment);
        assert!(
            !report.corruptions.is_empty() || header_rebuilt,
            "a flipped bit before a later batch went unreported: {report:?}"
        );
    }
    let Ok((contents, _)) = first else {
        return;
    };
    let (again, report) = open(dir).expect("a recovered log reopens");
    assert_eq!(contents, again, "a second recovery changed the log");
    assert!(
        report.torn_tail.is_none(),
        "a recovered log has no torn tail: {report:?}"
    );
}
