//! Segment summaries: the metadata of a segment's blocks (sequence, subject, time, sizes,
//! headers; no payload) in a file of their own beside it, `<segment>.sum`, so a restart
//! reads a few bytes a message instead of every block (issue 16, ADR 0028).
//!
//! A summary is derived data. It is written without a sync (by [`queue`]'s worker when a
//! segment fills up, each `segments::PARTIAL_SUMMARY_BYTES` the active segment grows
//! before, and when a group that took no block for a second compacts (it settles 5–10 s
//! after its last apply), keeping the records of the summary it replaces; by `load` for a
//! segment whose summary lacked blocks it read whole), replaced whole, and checked as a
//! whole against its crc32c. A summary that is missing, torn or damaged is ignored: `load` reads that
//! segment's blocks instead and writes a new one. A summary is only ever asked about a
//! block sled locates (offset, length, first sequence), and answers only for a block of that
//! offset and length: segments are append-only and their ids never reused, and a block
//! extended by a frame (ADR 0031) has another length, so the bytes it describes are the
//! bytes sled points at.
//!
//! File: [`SUMMARY_V1`] ++ crc32c of the rest (u32 LE) ++ per block, in offset order:
//! offset (u64 LE) ++ length (u32 LE) ++ summary length (u32 LE) ++ the block's summary
//! (postcard: its subjects, then per message the sequence and time as steps from the
//! previous one, the subject's index, the payload's length and the header block).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use serde::Serialize;

use super::keys::{parse_block, BlockMsg};
use super::segments::Locator;
use super::summary_decode::Record;

/// The version byte of a summary file.
pub const SUMMARY_V1: u8 = 1;
const HEADER: usize = 5;
const RECORD_HEADER: usize = 16;

#[derive(Serialize)]
struct BlockSummaryOut<'a> {
    subjects: Vec<&'a str>,
    msgs: Vec<MsgSummaryOut<'a>>,
}

#[derive(Serialize)]
struct MsgSummaryOut<'a> {
    seq_step: u64,
    ts_step: i64,
    subject: u32,
    payload_len: u32,
    headers: Option<RawBytes<'a>>,
}

/// A byte string for serde (postcard: length ++ bytes, what `&[u8]` reads back).
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// What `load` needs of a message: everything but its payload, whose length stands in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsgMetaRef<'a> {
    pub seq: u64,
    pub subject: &'a str,
    pub headers: Option<&'a [u8]>,
    pub payload_len: usize,
    pub ts_nanos: i64,
}

impl<'a> From<&BlockMsg<'a>> for MsgMetaRef<'a> {
    fn from(msg: &BlockMsg<'a>) -> Self {
        MsgMetaRef {
            seq: msg.seq,
            subject: msg.subject,
            headers: msg.headers,
            payload_len: msg.payload.len(),
            ts_nanos: msg.ts_nanos,
        }
    }
}

/// One block's record in a summary file: the block of `len` bytes at `offset` of its
/// segment, its messages as parsed.
pub fn encode_record(offset: u64, len: u32, msgs: &[BlockMsg<'_>]) -> Vec<u8> {
    let mut subjects: Vec<&str> = Vec::new();
    let mut index: BTreeMap<&str, u32> = BTreeMap::new();
    let (mut seq, mut ts) = (0u64, 0i64);
    let msgs = msgs
        .iter()
        .map(|msg| {
            let subject = *index.entry(msg.subject).or_insert_with(|| {
                subjects.push(msg.subject);
                (subjects.len() - 1) as u32
            });
            let out = MsgSummaryOut {
                seq_step: msg.seq.wrapping_sub(seq),
                ts_step: msg.ts_nanos.wrapping_sub(ts),
                subject,
                payload_len: msg.payload.len() as u32,
                headers: msg.headers.map(RawBytes),
            };
            (seq, ts) = (msg.seq, msg.ts_nanos);
            out
        })
        .collect();
    let summary =
        postcard::to_stdvec(&BlockSummaryOut { subjects, msgs }).expect("in-memory encoding");
    let mut record = Vec::with_capacity(RECORD_HEADER + summary.len());
    record.extend_from_slice(&offset.to_le_bytes());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&(summary.len() as u32).to_le_bytes());
    record.extend_from_slice(&summary);
    record
}

/// Writes the summary of `segment` (its records in offset order) under `path`, through a
/// temporary name so a reader sees all of it or nothing. No sync: it is derived data.
pub fn write(path: &Path, records: &[Vec<u8>]) -> io::Result<()> {
    let tmp = write_aside(path, records)?;
    std::fs::rename(&tmp, path)
}

/// Writes the summary under its temporary name (`*.sum.tmp`); returns that name.
fn write_aside(path: &Path, records: &[Vec<u8>]) -> io::Result<PathBuf> {
    let mut body = Vec::with_capacity(HEADER + records.iter().map(Vec::len).sum::<usize>());
    body.push(SUMMARY_V1);
    body.extend_from_slice(&[0; 4]);
    for record in records {
        body.extend_from_slice(record);
    }
    let crc = crc32c::crc32c(&body[HEADER..]);
    body[1..HEADER].copy_from_slice(&crc.to_le_bytes());
    let tmp = path.with_extension("sum.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&body)?;
    drop(file);
    Ok(tmp)
}

/// Whether a segment queued for its summary was retired meanwhile (`Segments::retire`).
/// The worker puts a summary in place only under this lock and while it is not set, so a
/// retired segment's summary is either never put in place or put there before the
/// retirement, which then removes it with the segment: none outlives its segment.
#[derive(Debug, Default)]
pub struct Retired(Mutex<bool>);

impl Retired {
    pub fn set(&self) {
        *self.0.lock() = true;
    }

    fn is_set(&self) -> bool {
        *self.0.lock()
    }
}

/// A segment's summary as read: the file and where each block's record is.
pub struct SegmentSummary {
    bytes: Vec<u8>,
    /// By offset: the block's length and its summary's range in `bytes`.
    blocks: BTreeMap<u64, (u32, std::ops::Range<usize>)>,
}

impl SegmentSummary {
    /// The summary at `path`; `None` when there is none or it does not check out (torn,
    /// damaged, another version): the caller reads the blocks instead.
    pub fn read(path: &Path) -> Option<SegmentSummary> {
        let bytes = std::fs::read(path).ok()?;
        if bytes.len() < HEADER || bytes[0] != SUMMARY_V1 {
            return None;
        }
        let stored = u32::from_le_bytes(bytes[1..HEADER].try_into().expect("4 bytes"));
        if crc32c::crc32c(&bytes[HEADER..]) != stored {
            return None;
        }
        let mut blocks = BTreeMap::new();
        let mut at = HEADER;
        while at < bytes.len() {
            let header = bytes.get(at..at + RECORD_HEADER)?;
            let offset = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(header[8..12].try_into().expect("4 bytes"));
            let summary_len = u32::from_le_bytes(header[12..].try_into().expect("4 bytes"));
            let start = at + RECORD_HEADER;
            let end = start.checked_add(summary_len as usize)?;
            if end > bytes.len() {
                return None;
            }
            blocks.insert(offset, (len, start..end));
            at = end;
        }
        Some(SegmentSummary { bytes, blocks })
    }

    /// The record of the block at `offset` as written (its header and summary), if this
    /// summary has one for a block of `len` bytes there.
    pub fn raw_record(&self, offset: u64, len: u32) -> Option<Vec<u8>> {
        let (stored, range) = self.blocks.get(&offset)?;
        (*stored == len).then(|| self.record_bytes(range))
    }

    /// Every block's record as written, by offset (for a summary written anew with more).
    pub fn raw_records(&self) -> BTreeMap<u64, Vec<u8>> {
        self.blocks
            .iter()
            .map(|(&offset, (_, range))| (offset, self.record_bytes(range)))
            .collect()
    }

    /// A record as written: its header sits right before its summary's `range` in the file.
    fn record_bytes(&self, range: &std::ops::Range<usize>) -> Vec<u8> {
        self.bytes[range.start - RECORD_HEADER..range.end].to_vec()
    }

    /// Calls `each` with the messages of the block at `locator`, in sequence order, each with
    /// its subject's index among the block's subjects, and returns true; false (calling
    /// nothing) when the summary does not describe that block as sled locates it.
    pub fn for_each(&self, locator: Locator, mut each: impl FnMut(MsgMetaRef<'_>, usize)) -> bool {
        let Some((len, range)) = self.blocks.get(&locator.offset) else {
            return false;
        };
        if *len != locator.len {
            return false;
        }
        let Some(mut record) = Record::parse(&self.bytes[range.clone()]) else {
            return false;
        };
        let subjects = std::mem::take(&mut record.subjects);
        let (mut seq, mut ts) = (0u64, 0i64);
        for msg in record {
            seq = seq.wrapping_add(msg.seq_step);
            ts = ts.wrapping_add(msg.ts_step);
            let meta = MsgMetaRef {
                seq,
                subject: subjects[msg.subject],
                headers: msg.headers,
                payload_len: msg.payload_len as usize,
                ts_nanos: ts,
            };
            each(meta, msg.subject);
        }
        true
    }
}

enum Job {
    /// Summarize the segment at `segment` (its blocks at these offsets and lengths) into
    /// `summary`.
    Summarize {
        segment: PathBuf,
        summary: PathBuf,
        blocks: Vec<(u64, u32)>,
        retired: Arc<Retired>,
    },
    /// Answer once every job queued before has run.
    #[cfg(test)]
    Settle(mpsc::Sender<()>),
}

fn worker() -> &'static mpsc::Sender<Job> {
    static QUEUE: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (sender, receiver) = mpsc::channel();
        std::thread::Builder::new()
            .name("segment-summaries".into())
            .spawn(move || {
                for job in receiver {
                    match job {
                        Job::Summarize {
                            segment,
                            summary,
                            blocks,
                            retired,
                        } => {
                            if let Err(error) = summarize(&segment, &summary, &blocks, &retired) {
                                tracing::debug!(
                                    segment = %segment.display(),
                                    %error,
                                    "no summary for a segment (the next load reads its blocks)"
                                );
                            }
                        }
                        #[cfg(test)]
                        Job::Settle(done) => {
                            let _ = done.send(());
                        }
                    }
                }
            })
            .expect("spawning the segment summary thread");
        sender
    })
}

/// Has a complete segment (`segment`, holding blocks at these offsets and lengths) summarized
/// in the background into `summary`. A segment gone by then, or a block that does not
/// parse, leaves it without one, and so does its retirement ([`Retired`]).
pub fn queue(segment: PathBuf, summary: PathBuf, blocks: Vec<(u64, u32)>, retired: Arc<Retired>) {
    let _ = worker().send(Job::Summarize {
        segment,
        summary,
        blocks,
        retired,
    });
}

/// Waits until every summary queued before is written.
#[cfg(test)]
pub fn settle() {
    let (done, wait) = mpsc::channel();
    if worker().send(Job::Settle(done)).is_ok() {
        let _ = wait.recv();
    }
}

fn summarize(
    segment: &Path,
    summary: &Path,
    blocks: &[(u64, u32)],
    retired: &Retired,
) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    if retired.is_set() {
        return Ok(());
    }
    let file = std::fs::File::open(segment)?;
    // The summary written before for part of the segment (while it was active): its blocks'
    // records are kept, so each block is read and parsed once, not at every partial summary.
    let previous = SegmentSummary::read(summary);
    let mut records = Vec::with_capacity(blocks.len());
    let mut value = Vec::new();
    for &(offset, len) in blocks {
        if let Some(record) = previous.as_ref().and_then(|p| p.raw_record(offset, len)) {
            records.push(record);
            continue;
        }
        value.resize(len as usize, 0);
        file.read_exact_at(&mut value, offset)?;
        let msgs = parse_block(&value).map_err(io::Error::other)?;
        records.push(encode_record(offset, len, &msgs));
    }
    let tmp = write_aside(summary, &records)?;
    let retired = retired.0.lock();
    match *retired {
        true => std::fs::remove_file(&tmp),
        false => std::fs::rename(&tmp, summary),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::stream_machine::keys::{encode_block, BlockMsg};

    /// A segment file of one block of one message; its path and the block's extent.
    fn one_block_segment(dir: &Path) -> (PathBuf, (u64, u32)) {
        let block = encode_block([BlockMsg {
            seq: 1,
            subject: "s.a",
            headers: None,
            payload: b"body",
            ts_nanos: 7,
        }]);
        let path = dir.join("00000001.seg");
        std::fs::write(&path, &block).unwrap();
        (path, (0, block.len() as u32))
    }

    #[test]
    fn a_record_read_back_is_the_record_written() {
        let msg = |seq, payload: &'static [u8]| BlockMsg {
            seq,
            subject: "s.a",
            headers: None,
            payload,
            ts_nanos: 7 + seq as i64,
        };
        let first = encode_record(0, 100, &[msg(1, b"one"), msg(2, b"two")]);
        let second = encode_record(100, 60, &[msg(3, b"three")]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000001.sum");
        write(&path, &[first.clone(), second.clone()]).unwrap();
        let read = SegmentSummary::read(&path).expect("a summary just written");
        assert_eq!(read.raw_record(0, 100), Some(first.clone()));
        assert_eq!(read.raw_record(100, 60), Some(second.clone()));
        assert_eq!(read.raw_record(100, 61), None, "another block's length");
        assert_eq!(
            read.raw_records(),
            BTreeMap::from([(0, first), (100, second)])
        );
    }

    #[test]
    fn a_summary_is_put_in_place_only_while_its_segment_is_not_retired() {
        let dir = tempfile::tempdir().unwrap();
        let (segment, extent) = one_block_segment(dir.path());
        let summary = dir.path().join("00000001.sum");
        let retired = Retired::default();
        summarize(&segment, &summary, &[extent], &retired).unwrap();
        let read = SegmentSummary::read(&summary).expect("written while not retired");
        let locator = Locator {
            segment: 1,
            offset: extent.0,
            len: extent.1,
        };
        let mut seqs = Vec::new();
        assert!(read.for_each(locator, |msg, _| seqs.push(msg.seq)));
        assert_eq!(seqs, [1]);

        // Retired before the worker gets to it, or while it reads the blocks: nothing stays,
        // not even the temporary file.
        std::fs::remove_file(&summary).unwrap();
        retired.set();
        summarize(&segment, &summary, &[extent], &retired).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["00000001.seg"]);
    }
}
