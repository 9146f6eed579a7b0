//! A sealed chunk as bytes and back: the node-local form in which `meta_spill.rs` keeps a
//! chunk out of memory. Never sent to another node nor read across a restart (a restart
//! rebuilds the metadata from the message store), so it has no version; it ends in a
//! CRC-32C, and a chunk is checked whole before it is used.

use super::{Chunk, Column, Packed, CHUNK_LEN, WORDS};
use crate::jscore::stream::message::MsgMeta;
use crate::jscore::stream::subject_index::SubjectId;

/// The first byte of an encoded chunk: its layout.
const PACKED_TAG: u8 = 1;
const FEW_TAG: u8 = 2;
/// Bytes of one entry of an encoded `Few` chunk: offset, time, size, subject id.
const FEW_CODED: usize = 2 + 8 + 4 + 4;

/// Why bytes read back are not a chunk this code wrote.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata chunk undecodable: {0}")]
pub(in crate::jscore::stream) struct Undecodable(&'static str);

impl Chunk {
    /// The chunk sealed, as bytes [`decode`](Self::decode) reads back (the node-local form of
    /// `meta_spill.rs`, never sent nor kept across a restart), ending in a CRC-32C of the rest.
    pub(in crate::jscore::stream) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Chunk::Packed(packed) => {
                out.push(PACKED_TAG);
                out.extend_from_slice(&packed.live.to_le_bytes());
                for word in packed.present {
                    out.extend_from_slice(&word.to_le_bytes());
                }
                for column in [&packed.ts, &packed.size, &packed.subject] {
                    out.extend_from_slice(&column.base.to_le_bytes());
                    out.push(column.width);
                    out.extend_from_slice(&(column.values.len() as u32).to_le_bytes());
                    out.extend_from_slice(&column.values);
                }
            }
            Chunk::Open(_) | Chunk::Few(_) => {
                let entries = self.entries();
                out.push(FEW_TAG);
                out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
                for (off, meta) in entries {
                    out.extend_from_slice(&off.to_le_bytes());
                    out.extend_from_slice(&meta.ts_nanos.to_le_bytes());
                    out.extend_from_slice(&meta.size.to_le_bytes());
                    out.extend_from_slice(&meta.subject.raw().to_le_bytes());
                }
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// The chunk `encode` wrote, checked whole first.
    pub(in crate::jscore::stream) fn decode(bytes: &[u8]) -> Result<Chunk, Undecodable> {
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or(Undecodable("shorter than its checksum"))?;
        let (body, crc) = bytes.split_at(body_len);
        if crc32c::crc32c(body) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
            return Err(Undecodable("checksum mismatch"));
        }
        let mut reader = Reader(body);
        let chunk = match reader.u8()? {
            PACKED_TAG => {
                let live = reader.u16()?;
                let mut present = [0u64; WORDS];
                for word in &mut present {
                    *word = reader.u64()?;
                }
                let mut column = || -> Result<Column, Undecodable> {
                    let base = reader.u64()?;
                    let width = reader.u8()?;
                    let len = reader.u32()? as usize;
                    let values = reader.take(len)?;
                    if width > 8
                        || (width == 0 && len > 0)
                        || (width > 0 && !len.is_multiple_of(usize::from(width)))
                    {
                        return Err(Undecodable("bad column"));
                    }
                    Ok(Column {
                        base,
                        width,
                        values: values.into(),
                    })
                };
                let (ts, size, subject) = (column()?, column()?, column()?);
                let packed = Packed {
                    present,
                    live,
                    ts,
                    size,
                    subject,
                };
                let ones: u32 = present.iter().map(|word| word.count_ones()).sum();
                let highest = (0..CHUNK_LEN as u32)
                    .rev()
                    .find(|off| packed.has(*off as u16));
                let fits = |column: &Column| {
                    column.width == 0
                        || highest.is_none_or(|off| {
                            (off as usize + 1) * usize::from(column.width) <= column.values.len()
                        })
                };
                if ones != u32::from(live)
                    || ![&packed.ts, &packed.size, &packed.subject]
                        .into_iter()
                        .all(fits)
                {
                    return Err(Undecodable("packed chunk inconsistent"));
                }
                Chunk::Packed(Box::new(packed))
            }
            FEW_TAG => {
                let count = usize::from(reader.u16()?);
                if reader.0.len() != count * FEW_CODED {
                    return Err(Undecodable("few chunk of the wrong length"));
                }
                let mut few = Vec::with_capacity(count);
                for _ in 0..count {
                    let off = reader.u16()?;
                    let meta = MsgMeta {
                        ts_nanos: reader.u64()? as i64,
                        size: reader.u32()?,
                        subject: SubjectId::from_raw(reader.u32()?),
                    };
                    if usize::from(off) >= CHUNK_LEN
                        || few.last().is_some_and(|(last, _)| *last >= off)
                    {
                        return Err(Undecodable("few chunk out of order"));
                    }
                    few.push((off, meta));
                }
                Chunk::Few(few)
            }
            _ => return Err(Undecodable("unknown layout")),
        };
        if !reader.0.is_empty() {
            return Err(Undecodable("trailing bytes"));
        }
        Ok(chunk)
    }
}

/// Little-endian fields off the front of a slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], Undecodable> {
        if self.0.len() < len {
            return Err(Undecodable("truncated"));
        }
        let (head, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, Undecodable> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Undecodable> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }

    fn u32(&mut self) -> Result<u32, Undecodable> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().expect("4 bytes"),
        ))
    }

    fn u64(&mut self) -> Result<u64, Undecodable> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(ts_nanos: i64, size: u32, subject: u32) -> MsgMeta {
        MsgMeta {
            ts_nanos,
            size,
            subject: SubjectId::from_raw(subject),
        }
    }

    fn entries(chunk: &Chunk) -> Vec<(u16, MsgMeta)> {
        chunk.entries()
    }

    #[test]
    fn sealed_chunks_come_back_as_they_went_and_damage_is_refused() {
        let mut packed = Chunk::new();
        for off in (0..CHUNK_LEN as u16).filter(|off| off % 7 != 3) {
            packed.insert(
                off,
                meta(-5 + i64::from(off) * 1_000_003, 100 + u32::from(off % 9), 1),
            );
        }
        packed.seal();
        let mut few = Chunk::new();
        for off in [3u16, 90, CHUNK_LEN as u16 - 1] {
            few.insert(off, meta(i64::MIN + i64::from(off), u32::MAX, 7));
        }
        few.seal();
        let mut open = Chunk::new();
        open.insert(12, meta(1, 2, 3));
        for (chunk, layout) in [(&packed, "packed"), (&few, "few"), (&open, "open")] {
            let bytes = chunk.encode();
            let back = Chunk::decode(&bytes).unwrap();
            assert_eq!(entries(&back), entries(chunk), "{layout}");
            assert_eq!(back.live(), chunk.live(), "{layout}");
            // Every flipped byte, and every cut, is refused.
            for at in (0..bytes.len()).step_by(7) {
                let mut bad = bytes.clone();
                bad[at] ^= 0x20;
                assert!(Chunk::decode(&bad).is_err(), "{layout}: byte {at} flipped");
            }
            assert!(
                Chunk::decode(&bytes[..bytes.len() - 1]).is_err(),
                "{layout}: cut"
            );
            assert!(Chunk::decode(&[]).is_err());
        }
        assert_eq!(packed.layout(), "packed");
        assert_eq!(few.layout(), "few");
    }
}
