//! Reading one block's record of a version-1 segment summary (`summary.rs`; version 2 is
//! `summary_shaped.rs`, and shares this file's [`Cursor`]) without serde: a restart
//! reads every stored message's record, and decoding them into a `Vec` through serde was a
//! fifth of a 10 GiB stream's load (`bench/HISTORY.md`, "a restart's load"). The bytes are
//! postcard's, as version 1's encoder wrote them through serde (kept for tests:
//! `summary::encode_record_v1`); this walks them in
//! place: the block's subjects, then per message the sequence and time as steps from the
//! previous one (varint, the time zigzagged), the subject's index, the payload's length and
//! the optional header block. A record is checked whole before any of it is used, each
//! message decoded once into a list the caller walks.

/// One message of a block's record, as stored: steps still to be added up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordMsg<'a> {
    pub seq_step: u64,
    pub ts_step: i64,
    /// Index into the block's subjects, checked against their count.
    pub subject: usize,
    pub payload_len: u32,
    pub headers: Option<&'a [u8]>,
}

/// A block's record: its subjects, then its messages one at a time.
pub struct Record<'a> {
    pub subjects: Vec<&'a str>,
    msgs: std::vec::IntoIter<RecordMsg<'a>>,
}

/// The fewest bytes one message of a record takes (a byte for each varint and the header
/// flag): bounds what a record's message count may reserve.
const MIN_MSG_BYTES: usize = 5;

impl<'a> Record<'a> {
    /// The record in `bytes`, checked whole first (every field in range, nothing left over),
    /// so that a caller who acts on each message never acts on part of a damaged one;
    /// `None` when it does not check out. Each message is decoded once, here (decoding them
    /// again to act on them was a tenth of a restart's load).
    pub fn parse(bytes: &'a [u8]) -> Option<Record<'a>> {
        let mut cursor = Cursor { bytes };
        let count = cursor.len()?;
        let mut subjects = Vec::with_capacity(count.min(64));
        for _ in 0..count {
            subjects.push(std::str::from_utf8(cursor.bytes()?).ok()?);
        }
        let left = cursor.len()?;
        let mut msgs = Vec::with_capacity(left.min(cursor.bytes.len() / MIN_MSG_BYTES));
        for _ in 0..left {
            msgs.push(next_msg(&mut cursor, subjects.len())?);
        }
        cursor.bytes.is_empty().then(|| Record {
            subjects,
            msgs: msgs.into_iter(),
        })
    }
}

fn next_msg<'a>(cursor: &mut Cursor<'a>, subjects: usize) -> Option<RecordMsg<'a>> {
    let seq_step = cursor.varint(10)?;
    let ts_step = unzigzag(cursor.varint(10)?);
    let subject = usize::try_from(cursor.varint(5)?).ok()?;
    let payload_len = cursor.u32()?;
    let headers = match cursor.byte()? {
        0 => None,
        1 => Some(cursor.bytes()?),
        _ => return None,
    };
    (subject < subjects).then_some(RecordMsg {
        seq_step,
        ts_step,
        subject,
        payload_len,
        headers,
    })
}

impl<'a> Iterator for Record<'a> {
    type Item = RecordMsg<'a>;

    fn next(&mut self) -> Option<RecordMsg<'a>> {
        self.msgs.next()
    }
}

/// Varints and byte strings read off the front of a record (version 1 and 2 alike).
#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
}

impl<'a> Cursor<'a> {
    pub(super) fn byte(&mut self) -> Option<u8> {
        let (&first, rest) = self.bytes.split_first()?;
        self.bytes = rest;
        Some(first)
    }

    /// A LEB128 varint of at most `max_bytes` bytes whose value fits in a u64.
    pub(super) fn varint(&mut self, max_bytes: u32) -> Option<u64> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let byte = self.byte()?;
            let bits = u64::from(byte & 0x7f);
            let shift = 7 * i;
            if shift == 63 && bits > 1 {
                return None;
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.varint(5)?).ok()
    }

    pub(super) fn len(&mut self) -> Option<usize> {
        usize::try_from(self.varint(10)?).ok()
    }

    /// A length-prefixed byte string.
    pub(super) fn bytes(&mut self) -> Option<&'a [u8]> {
        let len = self.len()?;
        if len > self.bytes.len() {
            return None;
        }
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        Some(taken)
    }
}

pub(super) fn unzigzag(raw: u64) -> i64 {
    ((raw >> 1) as i64) ^ -((raw & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::stream_machine::keys::BlockMsg;
    use crate::jetstream::stream_machine::summary::encode_record_v1 as encode_record;

    const RECORD_HEADER: usize = 16;

    /// Sequence, time, subject index, payload length, headers.
    type ReadMsg<'a> = (u64, i64, usize, u32, Option<&'a [u8]>);

    fn record_of(msgs: &[BlockMsg<'_>]) -> Vec<u8> {
        encode_record(0, 0, msgs)[RECORD_HEADER..].to_vec()
    }

    #[test]
    fn it_reads_what_the_serde_encoder_writes() {
        let headers = b"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n";
        let msgs = [
            BlockMsg {
                seq: 1,
                subject: "a.b",
                headers: None,
                payload: &[0; 300],
                ts_nanos: -5,
            },
            BlockMsg {
                seq: 2,
                subject: "c",
                headers: Some(headers),
                payload: b"",
                ts_nanos: i64::MAX,
            },
            BlockMsg {
                seq: u64::MAX,
                subject: "a.b",
                headers: Some(b""),
                payload: b"x",
                ts_nanos: i64::MIN,
            },
        ];
        let bytes = record_of(&msgs);
        let mut record = Record::parse(&bytes).expect("a record the encoder wrote");
        // taken as `SegmentSummary::for_each` takes them: the messages still come
        assert_eq!(std::mem::take(&mut record.subjects), ["a.b", "c"]);
        let (mut seq, mut ts) = (0u64, 0i64);
        let read: Vec<ReadMsg<'_>> = record
            .map(|msg| {
                seq = seq.wrapping_add(msg.seq_step);
                ts = ts.wrapping_add(msg.ts_step);
                (seq, ts, msg.subject, msg.payload_len, msg.headers)
            })
            .collect();
        assert_eq!(
            read,
            [
                (1, -5, 0, 300, None),
                (2, i64::MAX, 1, 0, Some(&headers[..])),
                (u64::MAX, i64::MIN, 0, 1, Some(&b""[..])),
            ]
        );
    }

    #[test]
    fn a_cut_extended_or_out_of_range_record_is_refused_whole() {
        let msgs: Vec<BlockMsg<'_>> = (1..=20)
            .map(|seq| BlockMsg {
                seq,
                subject: if seq % 2 == 0 { "even" } else { "odd" },
                headers: (seq % 3 == 0).then_some(&b"NATS/1.0\r\n\r\n"[..]),
                payload: b"body",
                ts_nanos: seq as i64 * 1000,
            })
            .collect();
        let bytes = record_of(&msgs);
        assert_eq!(Record::parse(&bytes).unwrap().count(), 20);
        for cut in 0..bytes.len() {
            assert!(Record::parse(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Record::parse(&longer).is_none());
        // the last message names subject 2 of 2
        let mut bad = bytes.clone();
        // its last bytes: subject index, payload length (4), no headers (0)
        let at = bytes.len() - 3;
        assert_eq!(bad[at..], [1, 4, 0]);
        bad[at] = 2;
        assert!(Record::parse(&bad).is_none());
    }

    #[test]
    fn an_overlong_varint_is_refused() {
        let mut cursor = Cursor {
            bytes: &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
        };
        assert_eq!(cursor.varint(10), Some(u64::MAX));
        let mut cursor = Cursor {
            bytes: &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
        };
        assert_eq!(cursor.varint(10), None);
        let mut cursor = Cursor {
            bytes: &[0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
        };
        assert_eq!(cursor.varint(5), None);
    }
}
