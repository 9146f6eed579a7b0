//! The on-disk record format: segment headers, record framing, CRCs, encoding and parsing.
//! See the module docs of [`super`] for the layout table. Pure functions over byte slices, no
//! I/O.

use bytes::Bytes;

use super::types::{LogOp, MetaKey};

pub(crate) const SEGMENT_MAGIC: [u8; 4] = *b"JRWL";
/// Version of the segment and record format. Bump only with a reader for the old version.
pub(crate) const FORMAT_VERSION: u16 = 1;
pub(crate) const SEGMENT_HEADER_LEN: usize = 24;
pub(crate) const RECORD_HEADER_LEN: usize = 32;
/// Largest payload of one record (an entry or a meta value).
pub(crate) const MAX_PAYLOAD: usize = 256 << 20;

/// Set on the last record of one `write` call (or of one checkpoint): recovery applies the
/// records of a write only once it has seen this flag, so a write is all-or-nothing.
pub(crate) const FLAG_END_OF_WRITE: u8 = 0x01;
/// Set on the first record of one group-commit batch (one `pwrite` followed by one fsync).
/// A batch is written only after the previous one was fsynced, so damage followed by the start
/// of another batch is damage to synced data; damage with no batch start after it lies in the
/// final batch, which was never fsynced and whose pages may reach the disk in any order.
pub(crate) const FLAG_START_OF_BATCH: u8 = 0x02;
const KNOWN_FLAGS: u8 = FLAG_END_OF_WRITE | FLAG_START_OF_BATCH;

/// Record tags. Append-only: never renumber or reuse a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Tag {
    Append = 1,
    TruncateFrom = 2,
    PurgeUpTo = 3,
    SetMeta = 4,
    DropGroup = 5,
    /// Last record of a segment that was closed on rotation or at open; `index` holds the
    /// segment id. A non-last segment without a seal was truncated.
    Seal = 6,
    /// The group was found corrupt by a recovery; carried into every checkpoint until the
    /// group is dropped, so the mark survives deletion of the segment with the damage.
    CorruptMark = 7,
    /// A copy of a live entry out of an old segment (compaction), so that segment can be
    /// deleted. Not an op: replay puts the entry back at its index if it is missing there.
    Rewrite = 8,
}

impl Tag {
    fn from_u8(byte: u8) -> Option<Tag> {
        Some(match byte {
            1 => Tag::Append,
            2 => Tag::TruncateFrom,
            3 => Tag::PurgeUpTo,
            4 => Tag::SetMeta,
            5 => Tag::DropGroup,
            6 => Tag::Seal,
            7 => Tag::CorruptMark,
            8 => Tag::Rewrite,
            _ => return None,
        })
    }
}

/// A record header whose CRC matched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecordHeader {
    pub tag: Tag,
    pub flags: u8,
    pub group: u64,
    pub index: u64,
    pub payload_len: u32,
    pub payload_crc: u32,
}

impl RecordHeader {
    pub fn ends_write(&self) -> bool {
        self.flags & FLAG_END_OF_WRITE != 0
    }

    pub fn starts_batch(&self) -> bool {
        self.flags & FLAG_START_OF_BATCH != 0
    }

    /// What this record means, given its payload.
    pub fn decode(self, payload: Bytes) -> Decoded {
        let group = self.group;
        Decoded::Op(match self.tag {
            Tag::Append => LogOp::Append {
                group,
                index: self.index,
                payload,
            },
            Tag::TruncateFrom => LogOp::TruncateFrom {
                group,
                index: self.index,
            },
            Tag::PurgeUpTo => LogOp::PurgeUpTo {
                group,
                index: self.index,
            },
            Tag::SetMeta => LogOp::SetMeta {
                group,
                key: MetaKey(self.index as u16),
                value: payload,
            },
            Tag::DropGroup => LogOp::DropGroup { group },
            Tag::Seal => {
                return Decoded::Seal {
                    segment: self.index,
                }
            }
            Tag::CorruptMark => return Decoded::CorruptMark { group },
            Tag::Rewrite => {
                return Decoded::Rewrite {
                    group,
                    index: self.index,
                    payload,
                }
            }
        })
    }
}

/// The meaning of one intact record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    Op(LogOp),
    Seal {
        segment: u64,
    },
    CorruptMark {
        group: u64,
    },
    Rewrite {
        group: u64,
        index: u64,
        payload: Bytes,
    },
}

/// Size of the record that encodes `op`.
pub(crate) fn encoded_len(op: &LogOp) -> usize {
    RECORD_HEADER_LEN
        + match op {
            LogOp::Append { payload, .. } => payload.len(),
            LogOp::SetMeta { value, .. } => value.len(),
            _ => 0,
        }
}

/// Append the record of `op` to `buf`.
pub(crate) fn encode_op(buf: &mut Vec<u8>, op: &LogOp, flags: u8) {
    match op {
        LogOp::Append {
            group,
            index,
            payload,
        } => encode(buf, Tag::Append, flags, *group, *index, payload),
        LogOp::TruncateFrom { group, index } => {
            encode(buf, Tag::TruncateFrom, flags, *group, *index, &[])
        }
        LogOp::PurgeUpTo { group, index } => {
            encode(buf, Tag::PurgeUpTo, flags, *group, *index, &[])
        }
        LogOp::SetMeta { group, key, value } => {
            encode(buf, Tag::SetMeta, flags, *group, u64::from(key.0), value)
        }
        LogOp::DropGroup { group } => encode(buf, Tag::DropGroup, flags, *group, 0, &[]),
    }
}

/// Append the seal record of segment `segment_id` to `buf`.
pub(crate) fn encode_seal(buf: &mut Vec<u8>, segment_id: u64) {
    let flags = FLAG_START_OF_BATCH | FLAG_END_OF_WRITE;
    encode(buf, Tag::Seal, flags, 0, segment_id, &[]);
}

/// Append a rewrite record (compaction copy of entry `index` of `group`) to `buf`.
pub(crate) fn encode_rewrite(buf: &mut Vec<u8>, group: u64, index: u64, payload: &[u8], flags: u8) {
    encode(buf, Tag::Rewrite, flags, group, index, payload);
}

/// Append a corruption mark of `group` to `buf`.
pub(crate) fn encode_corrupt_mark(buf: &mut Vec<u8>, group: u64, flags: u8) {
    encode(buf, Tag::CorruptMark, flags, group, 0, &[]);
}

fn encode(buf: &mut Vec<u8>, tag: Tag, flags: u8, group: u64, index: u64, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_PAYLOAD);
    let start = buf.len();
    buf.extend_from_slice(&[0u8; 4]); // header crc, filled below
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.push(tag as u8);
    buf.push(flags);
    buf.extend_from_slice(&[0u8; 2]);
    buf.extend_from_slice(&group.to_le_bytes());
    buf.extend_from_slice(&index.to_le_bytes());
    buf.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let header_crc = crc32c::crc32c(&buf[start + 4..start + RECORD_HEADER_LEN]);
    buf[start..start + 4].copy_from_slice(&header_crc.to_le_bytes());
    buf.extend_from_slice(payload);
}

/// What is at one offset of a segment buffer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// A whole, intact record; the next record starts at `next`.
    Record { header: RecordHeader, next: usize },
    /// The header is intact (so group, index, tag and length are trusted) but the payload
    /// failed its CRC. The next record would start at `next`.
    BadPayload { header: RecordHeader, next: usize },
    /// The header is intact but the payload runs past the end of the buffer.
    Truncated { header: RecordHeader },
    /// Not a record header: short, CRC mismatch, unknown tag or flags.
    BadHeader,
}

/// Parse the record starting at `pos` (which must be `< buf.len()`).
pub(crate) fn parse(buf: &[u8], pos: usize) -> Parsed {
    let Some(header) = parse_header(buf, pos) else {
        return Parsed::BadHeader;
    };
    let start = pos + RECORD_HEADER_LEN;
    let next = start + header.payload_len as usize;
    if next > buf.len() {
        return Parsed::Truncated { header };
    }
    if crc32c::crc32c(&buf[start..next]) != header.payload_crc {
        return Parsed::BadPayload { header, next };
    }
    Parsed::Record { header, next }
}

fn parse_header(buf: &[u8], pos: usize) -> Option<RecordHeader> {
    let raw = buf.get(pos..pos + RECORD_HEADER_LEN)?;
    if crc32c::crc32c(&raw[4..]) != u32_at(raw, 0) {
        return None;
    }
    let tag = Tag::from_u8(raw[8])?;
    let flags = raw[9];
    if flags & !KNOWN_FLAGS != 0 || raw[10] != 0 || raw[11] != 0 {
        return None;
    }
    let payload_len = u32_at(raw, 4);
    if payload_len as usize > MAX_PAYLOAD {
        return None;
    }
    Some(RecordHeader {
        tag,
        flags,
        group: u64_at(raw, 12),
        index: u64_at(raw, 20),
        payload_len,
        payload_crc: u32_at(raw, 28),
    })
}

/// Does a batch start anywhere in `buf[from..]` (an intact record with START_OF_BATCH)? If so,
/// damage before `from` is in a batch that was fsynced; if not, it is in the final batch.
/// The scan steps over each intact record it meets whole: a message payload may itself hold
/// WAL bytes (a segment file published to a stream or an object store), and those are data,
/// not a batch start.
pub(crate) fn batch_starts_after(buf: &[u8], from: usize) -> bool {
    let mut pos = from;
    while pos + RECORD_HEADER_LEN <= buf.len() {
        match parse(buf, pos) {
            Parsed::Record { header, .. } if header.starts_batch() => return true,
            Parsed::Record { next, .. } => pos = next,
            _ => pos += 1,
        }
    }
    false
}

/// The 24-byte header every segment file starts with.
pub(crate) fn encode_segment_header(buf: &mut Vec<u8>, segment_id: u64) {
    let start = buf.len();
    buf.extend_from_slice(&SEGMENT_MAGIC);
    buf.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    buf.extend_from_slice(&[0u8; 2]);
    buf.extend_from_slice(&segment_id.to_le_bytes());
    let crc = crc32c::crc32c(&buf[start..start + 16]);
    buf.extend_from_slice(&crc.to_le_bytes());
    buf.extend_from_slice(&[0u8; 4]);
}

/// Why a segment header was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BadSegmentHeader {
    /// Short or CRC mismatch: a torn header if this is the newest segment.
    Damaged,
    /// Intact header of a format this build cannot read.
    UnsupportedVersion(u16),
    /// Intact header naming another segment id than the file name.
    WrongId(u64),
}

pub(crate) fn parse_segment_header(buf: &[u8], expected_id: u64) -> Result<(), BadSegmentHeader> {
    let raw = buf
        .get(..SEGMENT_HEADER_LEN)
        .ok_or(BadSegmentHeader::Damaged)?;
    if raw[..4] != SEGMENT_MAGIC || crc32c::crc32c(&raw[..16]) != u32_at(raw, 16) {
        return Err(BadSegmentHeader::Damaged);
    }
    let version = u16::from_le_bytes([raw[4], raw[5]]);
    if version != FORMAT_VERSION {
        return Err(BadSegmentHeader::UnsupportedVersion(version));
    }
    let id = u64_at(raw, 8);
    if id != expected_id {
        return Err(BadSegmentHeader::WrongId(id));
    }
    Ok(())
}

fn u32_at(raw: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(raw[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(raw: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(raw[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<LogOp> {
        vec![
            LogOp::Append {
                group: 7,
                index: 42,
                payload: Bytes::from_static(b"hello"),
            },
            LogOp::TruncateFrom {
                group: 7,
                index: 40,
            },
            LogOp::PurgeUpTo { group: 9, index: 3 },
            LogOp::SetMeta {
                group: 9,
                key: MetaKey::VOTE,
                value: Bytes::from_static(b"vote"),
            },
            LogOp::DropGroup { group: u64::MAX },
        ]
    }

    #[test]
    fn ops_round_trip_through_records() {
        let mut buf = Vec::new();
        for op in sample() {
            encode_op(&mut buf, &op, FLAG_END_OF_WRITE);
        }
        let mut pos = 0;
        let mut decoded = Vec::new();
        while pos < buf.len() {
            let Parsed::Record { header, next } = parse(&buf, pos) else {
                panic!("bad record at {pos}");
            };
            assert!(header.ends_write());
            let payload = Bytes::copy_from_slice(&buf[pos + RECORD_HEADER_LEN..next]);
            decoded.push(header.decode(payload));
            pos = next;
        }
        let expected: Vec<Decoded> = sample().into_iter().map(Decoded::Op).collect();
        assert_eq!(decoded, expected);
        let expected_len: usize = sample().iter().map(encoded_len).sum();
        assert_eq!(buf.len(), expected_len);
    }

    #[test]
    fn every_single_bit_flip_is_detected() {
        let mut buf = Vec::new();
        encode_op(&mut buf, &sample()[0], 0);
        for bit in 0..buf.len() * 8 {
            let mut damaged = buf.clone();
            damaged[bit / 8] ^= 1 << (bit % 8);
            let parsed = parse(&damaged, 0);
            assert!(
                !matches!(parsed, Parsed::Record { .. }),
                "flip of bit {bit} not detected"
            );
            if bit / 8 >= RECORD_HEADER_LEN {
                assert!(matches!(parsed, Parsed::BadPayload { .. }), "bit {bit}");
            }
        }
    }

    #[test]
    fn truncated_record_and_search_for_later_records() {
        let mut buf = Vec::new();
        encode_op(&mut buf, &sample()[0], FLAG_START_OF_BATCH);
        let first_len = buf.len();
        encode_op(&mut buf, &sample()[3], FLAG_END_OF_WRITE);
        let second_len = buf.len();
        encode_op(&mut buf, &sample()[2], FLAG_START_OF_BATCH);
        assert!(matches!(
            parse(&buf[..first_len - 1], 0),
            Parsed::Truncated { .. }
        ));
        assert!(batch_starts_after(&buf, 0));
        assert!(batch_starts_after(&buf, 1));
        assert!(!batch_starts_after(&buf, second_len + 1));
        assert!(!batch_starts_after(&buf[..second_len], 1));
    }

    #[test]
    fn segment_header_checks() {
        let mut buf = Vec::new();
        encode_segment_header(&mut buf, 5);
        assert_eq!(buf.len(), SEGMENT_HEADER_LEN);
        assert_eq!(parse_segment_header(&buf, 5), Ok(()));
        assert_eq!(
            parse_segment_header(&buf, 6),
            Err(BadSegmentHeader::WrongId(5))
        );
        assert_eq!(
            parse_segment_header(&buf[..10], 5),
            Err(BadSegmentHeader::Damaged)
        );
        buf[3] ^= 1;
        assert_eq!(
            parse_segment_header(&buf, 5),
            Err(BadSegmentHeader::Damaged)
        );
    }
}
