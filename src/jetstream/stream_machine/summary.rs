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
//! File: [`SUMMARY_V2`] ++ crc32c of the rest (u32 LE) ++ per block, in offset order:
//! offset (u64 LE) ++ length (u32 LE) ++ record length (u32 LE) ++ the block's record
//! (`summary_shaped.rs`: its subjects, what all its messages share, then per message what
//! differs; ADR 0037). A [`SUMMARY_V1`] file (records in postcard: per message the
//! sequence and time as steps, the subject's index, the payload's length and the header
//! block; `summary_decode.rs`) still reads, and a summary written anew from one re-encodes
//! its records.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::keys::{parse_block, BlockMsg};
use super::segments::Locator;
use super::summary_decode::Record;
use super::summary_shaped;

/// The version byte of a summary file whose records are postcard's (read, no longer written).
pub const SUMMARY_V1: u8 = 1;
/// The version byte of a summary file whose records are shaped (`summary_shaped.rs`).
pub const SUMMARY_V2: u8 = 2;
const HEADER: usize = 5;
const RECORD_HEADER: usize = 16;

#[cfg(test)]
#[derive(serde::Serialize)]
struct BlockSummaryOut<'a> {
    subjects: Vec<&'a str>,
    msgs: Vec<MsgSummaryOut<'a>>,
}

#[cfg(test)]
#[derive(serde::Serialize)]
struct MsgSummaryOut<'a> {
    seq_step: u64,
    ts_step: i64,
    subject: u32,
    payload_len: u32,
    headers: Option<RawBytes<'a>>,
}

/// A byte string for serde (postcard: length ++ bytes, what `&[u8]` reads back).
#[cfg(test)]
struct RawBytes<'a>(&'a [u8]);

#[cfg(test)]
impl serde::Serialize for RawBytes<'_> {
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
    let metas: Vec<MsgMetaRef<'_>> = msgs.iter().map(MsgMetaRef::from).collect();
    record_of(offset, len, &metas)
}

/// A record: its header, then the shaped encoding of `msgs`.
fn record_of(offset: u64, len: u32, msgs: &[MsgMetaRef<'_>]) -> Vec<u8> {
    framed(offset, len, &summary_shaped::encode(msgs))
}

/// A record's header (the block's offset and length, the summary's length), then `summary`.
fn framed(offset: u64, len: u32, summary: &[u8]) -> Vec<u8> {
    let mut record = Vec::with_capacity(RECORD_HEADER + summary.len());
    record.extend_from_slice(&offset.to_le_bytes());
    record.extend_from_slice(&len.to_le_bytes());
    record.extend_from_slice(&(summary.len() as u32).to_le_bytes());
    record.extend_from_slice(summary);
    record
}

/// A version-1 record (postcard), as summaries were written before version 2: for tests of
/// the files written then.
#[cfg(test)]
pub fn encode_record_v1(offset: u64, len: u32, msgs: &[BlockMsg<'_>]) -> Vec<u8> {
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
    framed(offset, len, &summary)
}

/// Writes the summary of `segment` (its records in offset order) under `path`, through a
/// temporary name so a reader sees all of it or nothing. No sync: it is derived data.
pub fn write(path: &Path, records: &[Vec<u8>]) -> io::Result<()> {
    let tmp = write_aside(path, records)?;
    std::fs::rename(&tmp, path)
}

/// Writes the summary under its temporary name (`*.sum.tmp`); returns that name.
fn write_aside(path: &Path, records: &[Vec<u8>]) -> io::Result<PathBuf> {
    write_version_aside(path, SUMMARY_V2, records)
}

/// [`write_aside`] with the version byte given (a test writes version-1 files with it).
pub(super) fn write_version_aside(
    path: &Path,
    version: u8,
    records: &[Vec<u8>],
) -> io::Result<PathBuf> {
    let mut body = Vec::with_capacity(HEADER + records.iter().map(Vec::len).sum::<usize>());
    body.push(version);
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
    /// [`SUMMARY_V1`] or [`SUMMARY_V2`]: how its records are encoded.
    version: u8,
    bytes: Vec<u8>,
    /// By offset: the block's length and its summary's range in `bytes`.
    pub(super) blocks: BTreeMap<u64, (u32, std::ops::Range<usize>)>,
}

impl SegmentSummary {
    /// The summary at `path`; `None` when there is none or it does not check out (torn,
    /// damaged, an unknown version): the caller reads the blocks instead.
    pub fn read(path: &Path) -> Option<SegmentSummary> {
        Self::from_bytes(std::fs::read(path).ok()?)
    }

    /// [`read`](Self::read) of a file's bytes.
    pub(super) fn from_bytes(bytes: Vec<u8>) -> Option<SegmentSummary> {
        let version = *bytes.first()?;
        if bytes.len() < HEADER || !matches!(version, SUMMARY_V1 | SUMMARY_V2) {
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
        Some(SegmentSummary {
            version,
            bytes,
            blocks,
        })
    }

    /// The record of the block at `offset` (its header and summary) in the version written
    /// now, if this summary has one for a block of `len` bytes there.
    pub fn record(&self, offset: u64, len: u32) -> Option<Vec<u8>> {
        let (stored, range) = self.blocks.get(&offset)?;
        (*stored == len).then(|| self.current_record(offset, *stored, range))?
    }

    /// Every block's record in the version written now, by offset (for a summary written
    /// anew with more); a version-1 record that does not parse is left out (its block is
    /// then read whole at the next load).
    pub fn records(&self) -> BTreeMap<u64, Vec<u8>> {
        self.blocks
            .iter()
            .filter_map(|(&offset, (len, range))| {
                Some((offset, self.current_record(offset, *len, range)?))
            })
            .collect()
    }

    /// A record as written (its header sits right before its summary's `range` in the
    /// file), or re-encoded from version 1.
    fn current_record(&self, offset: u64, len: u32, range: &Range<usize>) -> Option<Vec<u8>> {
        if self.version == SUMMARY_V2 {
            return Some(self.bytes[range.start - RECORD_HEADER..range.end].to_vec());
        }
        let mut msgs = Vec::new();
        self.each_of(range, |msg, _| msgs.push(msg))
            .then(|| record_of(offset, len, &msgs))
    }

    /// Calls `each` with the messages of the block at `locator`, in sequence order, each with
    /// its subject's index among the block's subjects, and returns true; false (calling
    /// nothing) when the summary does not describe that block as sled locates it.
    pub fn for_each<'s>(
        &'s self,
        locator: Locator,
        each: impl FnMut(MsgMetaRef<'s>, usize),
    ) -> bool {
        let Some((len, range)) = self.blocks.get(&locator.offset) else {
            return false;
        };
        if *len != locator.len {
            return false;
        }
        self.each_of(range, each)
    }

    /// [`for_each`](Self::for_each) over the record at `range`: false (calling nothing) when
    /// it does not parse whole.
    pub(super) fn each_of<'s>(
        &'s self,
        range: &Range<usize>,
        mut each: impl FnMut(MsgMetaRef<'s>, usize),
    ) -> bool {
        let bytes = &self.bytes[range.clone()];
        let msgs = match self.version {
            SUMMARY_V2 => summary_shaped::decode(bytes),
            _ => decode_v1(bytes),
        };
        let Some(msgs) = msgs else {
            return false;
        };
        for (msg, slot) in msgs {
            each(msg, slot);
        }
        true
    }
}

/// A version-1 record's messages, as [`summary_shaped::decode`] gives a version-2 one's.
fn decode_v1(bytes: &[u8]) -> Option<Vec<(MsgMetaRef<'_>, usize)>> {
    let mut record = Record::parse(bytes)?;
    let subjects = std::mem::take(&mut record.subjects);
    let (mut seq, mut ts) = (0u64, 0i64);
    let msgs = record
        .map(|msg| {
            seq = seq.wrapping_add(msg.seq_step);
            ts = ts.wrapping_add(msg.ts_step);
            let meta = MsgMetaRef {
                seq,
                subject: subjects[msg.subject],
                headers: msg.headers,
                payload_len: msg.payload_len as usize,
                ts_nanos: ts,
            };
            (meta, msg.subject)
        })
        .collect();
    Some(msgs)
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
        if let Some(record) = previous.as_ref().and_then(|p| p.record(offset, len)) {
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
#[path = "tests_summary.rs"]
mod tests;
