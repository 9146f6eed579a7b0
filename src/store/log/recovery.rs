//! Recovery: replay every segment in order into the memtable and the durable index, cut a
//! torn tail, and find and classify damage. Runs once in [`LogEngine::open`], before the
//! writer thread starts. The policy is described in the module docs of [`super`].

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::durable::DurableIndex;
use super::error::LogError;
use super::memtable::{Tables, MAX_INDEX};
use super::record::{
    self, batch_starts_after, BadSegmentHeader, Decoded, Parsed, RecordHeader, Tag,
    RECORD_HEADER_LEN, SEGMENT_HEADER_LEN,
};
use super::segment::{list_segments, segment_path, sync_dir};
use super::types::{Corruption, LogOp, MetaKey, RecoveryReport, TornTail};

/// The state recovered from a log directory, handed to the writer.
pub(crate) struct Recovered {
    pub tables: Tables,
    pub durable: DurableIndex,
    /// Segment files left after recovery, ascending.
    pub segments: Vec<u64>,
    /// The newest segment and its length, if it still needs a seal (it was being written when
    /// the node stopped).
    pub unsealed_last: Option<(u64, u64)>,
    pub report: RecoveryReport,
}

pub(crate) fn recover(dir: &Path) -> Result<Recovered, LogError> {
    fs::create_dir_all(dir).map_err(|error| LogError::io("create directory", dir, error))?;
    let ids = list_segments(dir).map_err(|error| LogError::io("list directory", dir, error))?;
    for pair in ids.windows(2) {
        if pair[1] != pair[0] + 1 {
            return Err(LogError::Corrupt {
                file: segment_path(dir, pair[0] + 1),
                offset: 0,
                reason: format!(
                    "segment file missing between {:016x} and {:016x}",
                    pair[0], pair[1]
                ),
            });
        }
    }
    let mut replay = Replay::default();
    let mut segments = Vec::with_capacity(ids.len());
    let mut unsealed_last = None;
    for (position, &id) in ids.iter().enumerate() {
        let is_last = position + 1 == ids.len();
        let path = segment_path(dir, id);
        let buf = fs::read(&path).map_err(|error| LogError::io("read segment", &path, error))?;
        let segment = Segment {
            id,
            path: &path,
            buf: &buf,
            is_last,
        };
        match replay.segment(&segment)? {
            Outcome::Sealed => segments.push(id),
            Outcome::Open { len } => {
                segments.push(id);
                unsealed_last = Some((id, len));
            }
            Outcome::TornHeader => {
                // Created but never completed (the header or checkpoint of a new segment):
                // nothing in it was ever acknowledged.
                fs::remove_file(&path)
                    .map_err(|error| LogError::io("remove torn segment", &path, error))?;
                sync_dir(dir).map_err(|error| LogError::io("sync directory", dir, error))?;
                replay.report.torn_tail = Some(TornTail {
                    file: path.clone(),
                    offset: 0,
                    bytes_cut: buf.len() as u64,
                });
            }
        }
    }
    Ok(replay.finish(segments, unsealed_last))
}

/// The rest of a segment file is zero-filled space the writer prepared and never wrote
/// (`LogOptions::preallocate`): the clean end of the segment, not damage. No record starts
/// with zeros (a record header's CRC of zeros is not zero), so a torn write is never
/// mistaken for it — except a batch none of whose bytes reached the disk, which was never
/// acknowledged either.
fn is_unwritten(rest: &[u8]) -> bool {
    rest.iter().all(|byte| *byte == 0)
}

struct Segment<'a> {
    id: u64,
    path: &'a PathBuf,
    buf: &'a [u8],
    is_last: bool,
}

impl Segment<'_> {
    fn corrupt(&self, offset: usize, reason: impl Into<String>) -> LogError {
        LogError::Corrupt {
            file: self.path.clone(),
            offset: offset as u64,
            reason: reason.into(),
        }
    }

    /// Damage at `pos` is a torn tail if it is in the newest segment and lies in the final,
    /// unsynced batch: no batch starts after it.
    fn is_torn_tail_at(&self, pos: usize) -> bool {
        self.is_last && !batch_starts_after(self.buf, pos + 1)
    }
}

enum Outcome {
    Sealed,
    Open { len: u64 },
    TornHeader,
}

/// A record of a write whose end has not been seen yet.
enum Pending {
    Intact(Decoded),
    /// Header intact, payload damaged.
    Damaged(RecordHeader),
}

impl Pending {
    /// The group of an entry or purge record whose index is above [`MAX_INDEX`].
    fn index_out_of_range(&self) -> Option<u64> {
        let (group, index) = match self {
            Pending::Intact(Decoded::Op(
                LogOp::Append { group, index, .. } | LogOp::PurgeUpTo { group, index },
            ))
            | Pending::Intact(Decoded::Rewrite { group, index, .. }) => (*group, *index),
            Pending::Damaged(header) if matches!(header.tag, Tag::Append | Tag::Rewrite) => {
                (header.group, header.index)
            }
            _ => return None,
        };
        (index > MAX_INDEX).then_some(group)
    }
}

/// Damaged, still-live data of one group.
#[derive(Default)]
struct Lost {
    entries: BTreeSet<u64>,
    meta: BTreeSet<MetaKey>,
}

impl Lost {
    fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.meta.is_empty()
    }

    fn contains(&self, corruption: &Corruption) -> bool {
        if corruption.tag == Tag::SetMeta as u8 {
            self.meta.contains(&MetaKey(corruption.index as u16))
        } else {
            self.entries.contains(&corruption.index)
        }
    }
}

#[derive(Default)]
struct Replay {
    tables: Tables,
    durable: DurableIndex,
    lost: HashMap<u64, Lost>,
    report: RecoveryReport,
}

impl Replay {
    fn segment(&mut self, segment: &Segment<'_>) -> Result<Outcome, LogError> {
        let buf = segment.buf;
        match record::parse_segment_header(buf, segment.id) {
            Ok(()) => {}
            Err(BadSegmentHeader::Damaged) if segment.is_torn_tail_at(0) => {
                return Ok(Outcome::TornHeader)
            }
            Err(BadSegmentHeader::Damaged) => {
                // The header holds nothing but the magic, the format version and the id the
                // file name gives (`encode_segment_header`): it is taken as rebuilt from
                // those, and the records, each with its own CRCs, decide (ADR 0018).
                tracing::warn!(
                    file = %segment.path.display(),
                    "damaged segment header: rebuilt from the file name; its records are checked one by one"
                );
                self.report.rebuilt_segment_headers.push(segment.id);
            }
            Err(BadSegmentHeader::UnsupportedVersion(version)) => {
                return Err(segment.corrupt(4, format!("unsupported format version {version}")))
            }
            Err(BadSegmentHeader::WrongId(id)) => {
                return Err(segment.corrupt(8, format!("header names segment {id:016x}")))
            }
        }
        self.report.segments += 1;
        let mut pos = SEGMENT_HEADER_LEN;
        let mut write_start = pos;
        let mut pending: Vec<Pending> = Vec::new();
        let mut sealed = false;
        let mut torn = false;
        // Where the zero-filled, never written rest of the file starts (preallocation).
        let mut end = buf.len();
        while pos < buf.len() {
            let parsed = record::parse(buf, pos);
            if sealed || !matches!(parsed, Parsed::Record { .. } | Parsed::BadPayload { .. }) {
                if is_unwritten(&buf[pos..]) {
                    end = pos;
                    break;
                }
                if segment.is_torn_tail_at(pos) {
                    torn = true;
                    break;
                }
                let reason = if sealed {
                    "data after the segment seal"
                } else {
                    "damaged record header with intact records after it"
                };
                return Err(segment.corrupt(pos, reason));
            }
            let header = match parsed {
                Parsed::Record { header, next } => {
                    self.report.records += 1;
                    let payload = Bytes::copy_from_slice(&buf[pos + RECORD_HEADER_LEN..next]);
                    match header.decode(payload) {
                        Decoded::Seal { segment: sealed_id } => {
                            if sealed_id != segment.id || !pending.is_empty() {
                                return Err(segment.corrupt(pos, "misplaced segment seal"));
                            }
                            sealed = true;
                        }
                        decoded => pending.push(Pending::Intact(decoded)),
                    }
                    pos = next;
                    header
                }
                Parsed::BadPayload { header, next } => {
                    if segment.is_torn_tail_at(pos) {
                        torn = true;
                        break;
                    }
                    self.report.records += 1;
                    self.report.corruptions.push(Corruption {
                        file: segment.path.clone(),
                        offset: pos as u64,
                        group: header.group,
                        index: header.index,
                        tag: header.tag as u8,
                        superseded: false,
                    });
                    pending.push(Pending::Damaged(header));
                    pos = next;
                    header
                }
                Parsed::Truncated { .. } | Parsed::BadHeader => unreachable!("handled above"),
            };
            if header.ends_write() {
                self.apply(pending.drain(..), segment.id);
                write_start = pos;
            }
        }
        if !torn && !pending.is_empty() {
            // The segment ends inside a write.
            if !segment.is_last {
                return Err(segment.corrupt(write_start, "segment ends inside a write"));
            }
            torn = true;
        }
        if torn {
            self.cut_torn_tail(segment, write_start)?;
            return Ok(if sealed {
                Outcome::Sealed
            } else {
                Outcome::Open {
                    len: write_start as u64,
                }
            });
        }
        if sealed {
            Ok(Outcome::Sealed)
        } else if segment.is_last {
            Ok(Outcome::Open { len: end as u64 })
        } else {
            Err(segment.corrupt(end, "segment is not sealed (truncated?)"))
        }
    }

    /// Apply the records of one complete write.
    fn apply(&mut self, records: impl Iterator<Item = Pending>, segment: u64) {
        for record in records {
            if let Some(group) = record.index_out_of_range() {
                // No writer wrote it (every write is validated): the group cannot be trusted.
                self.tables.mark_corrupt(group);
                self.durable.mark_corrupt(group);
                continue;
            }
            match record {
                Pending::Intact(Decoded::Op(op)) => {
                    self.forget_lost(&op);
                    self.tables.apply_replayed(&op);
                    self.durable.apply(&op, segment);
                }
                Pending::Intact(Decoded::CorruptMark { group }) => {
                    self.tables.mark_corrupt(group);
                    self.durable.mark_corrupt(group);
                }
                Pending::Intact(Decoded::Rewrite {
                    group,
                    index,
                    payload,
                }) => {
                    self.tables.restore_replayed(group, index, payload);
                    self.durable.rewrite(group, index, segment);
                }
                Pending::Intact(Decoded::Seal { .. }) => unreachable!("seals are not pending"),
                Pending::Damaged(header) if header.tag == Tag::Rewrite => {
                    // A damaged compaction copy loses nothing while the original is present.
                    if !self.tables.has_entry(header.group, header.index) {
                        self.tables
                            .restore_replayed(header.group, header.index, Bytes::new());
                        let lost = self.lost.entry(header.group).or_default();
                        lost.entries.insert(header.index);
                    }
                    self.durable.rewrite(header.group, header.index, segment);
                }
                Pending::Damaged(header) if header.tag == Tag::SetMeta => {
                    // The value is unknown; keep the previous one, but remember the loss.
                    let key = MetaKey(header.index as u16);
                    self.lost.entry(header.group).or_default().meta.insert(key);
                }
                Pending::Damaged(header) => {
                    // Only appends and meta values have payloads that can be damaged. Keep a
                    // placeholder so indices stay dense and the segment stays pinned.
                    debug_assert_eq!(header.tag, Tag::Append);
                    let op = LogOp::Append {
                        group: header.group,
                        index: header.index,
                        payload: Bytes::new(),
                    };
                    self.tables.apply_replayed(&op);
                    self.durable.apply(&op, segment);
                    let lost = self.lost.entry(header.group).or_default();
                    lost.entries.insert(header.index);
                }
            }
        }
    }

    /// A later truncate, purge, meta write or drop makes damaged data dead.
    fn forget_lost(&mut self, op: &LogOp) {
        let group = op.group();
        let Some(lost) = self.lost.get_mut(&group) else {
            return;
        };
        match op {
            LogOp::Append { .. } => {}
            LogOp::TruncateFrom { index, .. } => {
                lost.entries.split_off(index);
            }
            LogOp::PurgeUpTo { index, .. } => {
                lost.entries = lost.entries.split_off(&index.saturating_add(1));
            }
            LogOp::SetMeta { key, .. } => {
                lost.meta.remove(key);
            }
            LogOp::DropGroup { .. } => {
                self.lost.remove(&group);
            }
        }
    }

    fn cut_torn_tail(&mut self, segment: &Segment<'_>, len: usize) -> Result<(), LogError> {
        let file = OpenOptions::new()
            .write(true)
            .open(segment.path)
            .map_err(|error| LogError::io("open segment", segment.path, error))?;
        file.set_len(len as u64)
            .and_then(|()| file.sync_all())
            .map_err(|error| LogError::io("cut torn tail of", segment.path, error))?;
        self.report.torn_tail = Some(TornTail {
            file: segment.path.clone(),
            offset: len as u64,
            bytes_cut: (segment.buf.len() - len) as u64,
        });
        Ok(())
    }

    fn finish(mut self, segments: Vec<u64>, unsealed_last: Option<(u64, u64)>) -> Recovered {
        self.tables.check_replayed();
        for (group, lost) in &self.lost {
            if !lost.is_empty() {
                self.tables.mark_corrupt(*group);
            }
        }
        for group in self.tables.corrupt_groups() {
            self.durable.mark_corrupt(group);
        }
        for corruption in &mut self.report.corruptions {
            corruption.superseded = !self
                .lost
                .get(&corruption.group)
                .is_some_and(|lost| lost.contains(corruption));
        }
        self.report.corrupt_groups = self.tables.corrupt_groups();
        self.report.groups = self.tables.groups().len();
        Recovered {
            tables: self.tables,
            durable: self.durable,
            segments,
            unsealed_last,
            report: self.report,
        }
    }
}
