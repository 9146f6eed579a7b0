//! The value format of a `b/` message block (the key is `keys::block`): the messages of a
//! run of sequences with their bodies, behind a version byte and, from [`BLOCK_V2`] on, a
//! crc32c of the rest. Part of the on-disk format (`keys` says the rules: never change what a
//! version means). `block.rs` holds a block once decoded.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::keys::{BLOCK_V2, VALUE_V1};
use crate::consensus::MachineError;
#[cfg(test)]
use crate::jscore::stream::StoredMsg;

#[derive(Serialize)]
struct BlockMsgRef<'a> {
    seq: u64,
    subject: &'a str,
    headers: Option<RawBytes<'a>>,
    payload: RawBytes<'a>,
    ts_nanos: i64,
}

/// One message inside a `b/` block value: borrowed from the value when read, from the
/// message's parts when written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct BlockMsg<'a> {
    pub seq: u64,
    pub subject: &'a str,
    pub headers: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub ts_nanos: i64,
}

/// A byte string for serde (postcard: length ++ bytes, the same encoding `Bytes` has), not
/// a sequence of `u8`s.
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(self.0)
    }
}

/// The bytes a message takes in a block, about (to cut blocks at `BLOCK_BYTES`).
pub fn block_msg_len(subject: usize, headers: usize, payload: usize) -> usize {
    subject + headers + payload + 24
}

/// `b/<first seq>`: [`BLOCK_V2`] ++ crc32c of the rest (u32, little endian) ++ postcard of
/// the block's messages in sequence order, each (seq, subject, headers, payload, time).
/// Sequences are increasing but may have gaps (messages removed before the block was
/// written).
pub fn encode_block<'a>(messages: impl IntoIterator<Item = BlockMsg<'a>>) -> Bytes {
    let messages: Vec<BlockMsgRef<'a>> = messages
        .into_iter()
        .map(|msg| BlockMsgRef {
            seq: msg.seq,
            subject: msg.subject,
            headers: msg.headers.map(RawBytes),
            payload: RawBytes(msg.payload),
            ts_nanos: msg.ts_nanos,
        })
        .collect();
    let capacity: usize = messages
        .iter()
        .map(|m| {
            block_msg_len(
                m.subject.len(),
                m.headers.as_ref().map_or(0, |h| h.0.len()),
                m.payload.0.len(),
            )
        })
        .sum();
    let mut value = Vec::with_capacity(capacity + 8 + BLOCK_V2_HEADER);
    value.push(BLOCK_V2);
    value.extend_from_slice(&[0; 4]);
    let mut value = postcard::to_extend(&messages, value).expect("in-memory encoding");
    let crc = crc32c::crc32c(&value[BLOCK_V2_HEADER..]);
    value[1..BLOCK_V2_HEADER].copy_from_slice(&crc.to_le_bytes());
    Bytes::from(value)
}

/// The version byte and the checksum before a [`BLOCK_V2`] block's body.
const BLOCK_V2_HEADER: usize = 5;

/// The messages of a `b/` value, in sequence order, borrowed from it (nothing is copied:
/// `load` reads the metadata of every message this way, the block cache the bodies'
/// places). A [`BLOCK_V2`] value is checked against its checksum: a damaged block is
/// [`MachineError::Checksum`], never a message with altered bytes.
///
/// A value in a segment file may be several [`BLOCK_V2`] frames back to back (layout 4:
/// an apply call of a few messages extends the stream's last block with a frame of its own
/// instead of starting a block, `stage::write_blocks`); each frame carries the checksum of
/// its own body, which ends where its postcard list of messages ends.
pub fn parse_block(value: &[u8]) -> Result<Vec<BlockMsg<'_>>, MachineError> {
    let corrupt = |e: &dyn std::fmt::Display| MachineError::Corrupt(format!("message block: {e}"));
    if let Some((&VALUE_V1, body)) = value.split_first() {
        return postcard::from_bytes(body).map_err(|e| corrupt(&e));
    }
    if value.is_empty() {
        return Err(corrupt(&"unknown value version"));
    }
    let mut msgs: Vec<BlockMsg<'_>> = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        if rest[0] != BLOCK_V2 {
            return Err(corrupt(&"unknown value version"));
        }
        if rest.len() < BLOCK_V2_HEADER {
            return Err(corrupt(&"a block frame shorter than its header"));
        }
        let (header, body) = rest.split_at(BLOCK_V2_HEADER);
        let stored = u32::from_le_bytes(header[1..].try_into().expect("4 bytes"));
        let checksum = |checked: &[u8]| {
            let computed = crc32c::crc32c(checked);
            (stored != computed).then_some(MachineError::Checksum {
                what: "message block",
                stored,
                computed,
            })
        };
        match postcard::take_from_bytes::<Vec<BlockMsg<'_>>>(body) {
            Ok((frame, after)) => {
                if let Some(error) = checksum(&body[..body.len() - after.len()]) {
                    return Err(error);
                }
                if frame
                    .first()
                    .zip(msgs.last())
                    .is_some_and(|(next, last)| next.seq <= last.seq)
                {
                    return Err(corrupt(&"block frames out of sequence order"));
                }
                msgs.extend(frame);
                rest = after;
            }
            // Undecodable: damaged (its checksum tells) or not a block at all.
            Err(e) => return Err(checksum(body).unwrap_or_else(|| corrupt(&e))),
        }
    }
    Ok(msgs)
}

/// The messages of a `b/` value as whole messages, in sequence order (tests).
#[cfg(test)]
pub fn decode_block(value: &[u8]) -> Result<Vec<(u64, StoredMsg)>, MachineError> {
    Ok(parse_block(value)?
        .into_iter()
        .map(|msg| {
            let stored = StoredMsg {
                subject: msg.subject.to_owned(),
                headers: msg.headers.map(Bytes::copy_from_slice),
                payload: Bytes::copy_from_slice(msg.payload),
                ts_nanos: msg.ts_nanos,
            };
            (msg.seq, stored)
        })
        .collect())
}

/// A whole message as a block entry (tests).
#[cfg(test)]
pub fn block_msg(seq: u64, msg: &StoredMsg) -> BlockMsg<'_> {
    BlockMsg {
        seq,
        subject: &msg.subject,
        headers: msg.headers.as_deref(),
        payload: &msg.payload,
        ts_nanos: msg.ts_nanos,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::stream_machine::keys::*;

    #[test]
    fn blocks_round_trip() {
        let msgs = [
            (
                3,
                StoredMsg {
                    subject: "s.a".into(),
                    headers: Some(Bytes::from_static(b"NATS/1.0\r\n\r\n")),
                    payload: Bytes::from_static(b"payload"),
                    ts_nanos: -5,
                },
            ),
            (
                9,
                StoredMsg {
                    subject: "s.b".into(),
                    headers: None,
                    payload: Bytes::new(),
                    ts_nanos: 7,
                },
            ),
        ];
        let value = encode_block(msgs.iter().map(|(seq, msg)| block_msg(*seq, msg)));
        assert_eq!(value[0], BLOCK_V2);
        assert_eq!(decode_block(&value).unwrap(), msgs.to_vec());
        // A message in a block is encoded as a `StoredMsgV1` after its sequence.
        let single = encode_block([block_msg(3, &msgs[0].1)]);
        let alone = encode(&StoredMsgV1::from(&msgs[0].1));
        assert_eq!(&single[BLOCK_V2_HEADER + 2..], &alone[1..]);
        assert!(decode_block(&value[..value.len() - 1]).is_err());
        // A block written before checksums (version 1: the same body, no crc) still reads.
        let old = [&[VALUE_V1][..], &value[BLOCK_V2_HEADER..]].concat();
        assert_eq!(decode_block(&old).unwrap(), msgs.to_vec());
        assert!(block(1) < block(256) && tombstone(1) < tombstone(256));
    }

    #[test]
    fn frames_back_to_back_read_as_one_block_in_sequence_order() {
        let msg = |n: u8| StoredMsg {
            subject: format!("s.{n}"),
            headers: n
                .is_multiple_of(2)
                .then(|| Bytes::from_static(b"NATS/1.0\r\n\r\n")),
            payload: Bytes::from(vec![n; n as usize]),
            ts_nanos: i64::from(n),
        };
        let msgs: Vec<(u64, StoredMsg)> = (1..=5).map(|n| (u64::from(n) * 2, msg(n))).collect();
        let first = encode_block(msgs[..2].iter().map(|(seq, msg)| block_msg(*seq, msg)));
        let second = encode_block([block_msg(msgs[2].0, &msgs[2].1)]);
        let third = encode_block(msgs[3..].iter().map(|(seq, msg)| block_msg(*seq, msg)));
        let value = [&first[..], &second[..], &third[..]].concat();
        assert_eq!(decode_block(&value).unwrap(), msgs);
        // A frame whose messages do not come after the previous one's is not a block.
        let backwards = [&third[..], &first[..]].concat();
        assert!(matches!(
            parse_block(&backwards),
            Err(MachineError::Corrupt(_))
        ));
        // Cut inside the last frame.
        assert!(parse_block(&value[..value.len() - 1]).is_err());
        assert!(parse_block(&value[..first.len() + 3]).is_err());
    }

    #[test]
    fn a_block_failing_its_checksum_is_refused_never_read() {
        let msg = StoredMsg {
            subject: "s.a".into(),
            headers: None,
            payload: Bytes::from_static(b"payload"),
            ts_nanos: 1,
        };
        let value = encode_block([block_msg(4, &msg)]);
        // Every single bit flip, in the checksum or the body, is caught.
        for bit in 8..value.len() * 8 {
            let mut flipped = value.to_vec();
            flipped[bit / 8] ^= 1 << (bit % 8);
            match parse_block(&flipped) {
                Err(MachineError::Checksum { what, .. }) => assert_eq!(what, "message block"),
                other => panic!("bit {bit}: {other:?}"),
            }
        }
        // A block too short to hold its checksum.
        assert!(parse_block(&[BLOCK_V2, 1, 2]).is_err());
        // The same in a frame after the first: whatever the flip, the value is refused.
        let two = [&value[..], &encode_block([block_msg(5, &msg)])[..]].concat();
        assert_eq!(parse_block(&two).unwrap().len(), 2);
        for bit in (value.len() + 1) * 8..two.len() * 8 {
            let mut flipped = two.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(parse_block(&flipped).is_err(), "bit {bit}");
        }
        assert!(block(1) < block(256) && tombstone(1) < tombstone(256));
    }
}
