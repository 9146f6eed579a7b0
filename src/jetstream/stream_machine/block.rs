//! [`Block`]: a `b/` message block as the block cache holds it: the value itself and where
//! each message's headers and payload sit in it (24 bytes a message), so a body is two
//! `Bytes` slices of the value, never a copy. A block read from a segment may be several
//! frames back to back (`extend.rs`): the places point into the one value all the same, as
//! they do in a cached block that a frame joined (`joined` copies both into one value). Subjects and times are not looked up here:
//! the stream state has them (`jscore::stream::MsgInfo`).

use bytes::Bytes;

use super::keys;
use crate::consensus::MachineError;

/// A message's headers and payload, as the front sends them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body {
    pub headers: Option<Bytes>,
    pub payload: Bytes,
}

#[derive(Debug)]
pub struct Block {
    value: Bytes,
    /// In sequence order.
    places: Vec<Place>,
}

/// Where one message's body sits in the value: offsets and lengths (u32: a block is small).
#[derive(Debug, Clone, Copy)]
struct Place {
    seq: u64,
    /// Offset of the headers; `u32::MAX`: no headers.
    headers_at: u32,
    headers_len: u32,
    payload_at: u32,
    payload_len: u32,
}

const NO_HEADERS: u32 = u32::MAX;

impl Block {
    /// Parses a `b/` value (see `keys::parse_block`), keeping it whole.
    pub fn decode(value: Bytes) -> Result<Block, MachineError> {
        let base = value.as_ptr() as usize;
        let offset = |slice: &[u8]| (slice.as_ptr() as usize - base) as u32;
        let places = keys::parse_block(&value)?
            .into_iter()
            .map(|msg| Place {
                seq: msg.seq,
                headers_at: msg.headers.map_or(NO_HEADERS, offset),
                headers_len: msg.headers.map_or(0, |h| h.len() as u32),
                payload_at: offset(msg.payload),
                payload_len: msg.payload.len() as u32,
            })
            .collect();
        Ok(Block { value, places })
    }

    /// This block with `frame`'s messages after its own, in one value as its segment holds
    /// them once a frame extended it (`extend.rs`); `None` if `frame` does not come after it.
    /// Both values are copied into one: a cached block stays one allocation, however many
    /// frames joined it.
    pub fn joined(&self, frame: &Block) -> Option<Block> {
        if frame
            .first_seq()
            .zip(self.last_seq())
            .is_some_and(|(first, last)| first <= last)
        {
            return None;
        }
        let shift = u32::try_from(self.value.len()).ok()?;
        let mut value = Vec::with_capacity(self.value.len() + frame.value.len());
        value.extend_from_slice(&self.value);
        value.extend_from_slice(&frame.value);
        let mut places = Vec::with_capacity(self.places.len() + frame.places.len());
        places.extend_from_slice(&self.places);
        places.extend(frame.places.iter().map(|place| Place {
            headers_at: match place.headers_at {
                NO_HEADERS => NO_HEADERS,
                at => at + shift,
            },
            payload_at: place.payload_at + shift,
            ..*place
        }));
        Some(Block {
            value: Bytes::from(value),
            places,
        })
    }

    /// The body of message `seq`, if the block holds it.
    pub fn body(&self, seq: u64) -> Option<Body> {
        let index = self.places.binary_search_by_key(&seq, |p| p.seq).ok()?;
        let place = self.places[index];
        let slice = |at: u32, len: u32| self.value.slice(at as usize..(at + len) as usize);
        Some(Body {
            headers: (place.headers_at != NO_HEADERS)
                .then(|| slice(place.headers_at, place.headers_len)),
            payload: slice(place.payload_at, place.payload_len),
        })
    }

    /// The sequences of its messages, ascending.
    pub fn seqs(&self) -> impl Iterator<Item = u64> + '_ {
        self.places.iter().map(|place| place.seq)
    }

    /// The sequence of its last message.
    pub fn last_seq(&self) -> Option<u64> {
        self.places.last().map(|place| place.seq)
    }

    /// The sequence of its first message.
    pub fn first_seq(&self) -> Option<u64> {
        self.places.first().map(|place| place.seq)
    }

    /// What it costs the cache's budget: the value and the places.
    pub fn cost(&self) -> u64 {
        (self.value.len() + self.places.len() * std::mem::size_of::<Place>() + 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_slices_of_the_value() {
        let messages = [
            keys::BlockMsg {
                seq: 5,
                subject: "s.a",
                headers: Some(b"NATS/1.0\r\nA: b\r\n\r\n"),
                payload: b"first",
                ts_nanos: 1,
            },
            keys::BlockMsg {
                seq: 9,
                subject: "s.b",
                headers: None,
                payload: b"",
                ts_nanos: 2,
            },
        ];
        let block = Block::decode(keys::encode_block(messages)).unwrap();
        let first = block.body(5).unwrap();
        assert_eq!(
            first.headers.as_deref(),
            Some(&b"NATS/1.0\r\nA: b\r\n\r\n"[..])
        );
        assert_eq!(&first.payload[..], b"first");
        assert_eq!(
            block.body(9).unwrap(),
            Body {
                headers: None,
                payload: Bytes::new()
            }
        );
        assert!(block.body(6).is_none());
        assert!(Block::decode(Bytes::from_static(b"\x01\x05")).is_err());

        // A block extended by a frame (`extend.rs`) reads back as one value.
        let frame = keys::encode_block([keys::BlockMsg {
            seq: 12,
            subject: "s.c",
            headers: Some(b"NATS/1.0\r\nB: c\r\n\r\n"),
            payload: b"third",
            ts_nanos: 3,
        }]);
        let whole = [&keys::encode_block(messages)[..], &frame[..]].concat();
        let extended = Block::decode(Bytes::from(whole)).unwrap();
        assert_eq!(extended.seqs().collect::<Vec<_>>(), [5, 9, 12]);
        assert_eq!(
            (extended.first_seq(), extended.last_seq()),
            (Some(5), Some(12))
        );
        assert_eq!(&extended.body(12).unwrap().payload[..], b"third");
        assert_eq!(extended.body(5), block.body(5));
        // The same in memory: the frame joins the block read before it.
        let joined = block
            .joined(&Block::decode(frame.clone()).unwrap())
            .unwrap();
        assert_eq!(joined.seqs().collect::<Vec<_>>(), [5, 9, 12]);
        for seq in [5, 9, 12] {
            assert_eq!(joined.body(seq), extended.body(seq));
        }
        assert!(joined.cost() > block.cost());
        let twice = joined.joined(&Block::decode(frame).unwrap());
        assert!(
            twice.is_none(),
            "a frame never joins a block holding its messages"
        );
    }
}
