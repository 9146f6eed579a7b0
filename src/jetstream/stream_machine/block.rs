//! [`Block`]: a `b/` message block as the block cache holds it: the value itself and where
//! each message's headers and payload sit in it (24 bytes a message), so a body is two
//! `Bytes` slices of the value, never a copy. A block read from its segment is one value; a
//! block extended in memory by a later apply call (`stage::write_blocks`) holds the frame
//! each call added beside the ones before, as its segment holds them back to back. Subjects and times are not looked up here:
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
    /// The value, or the frames it was extended by, in order.
    values: Vec<Bytes>,
    /// In sequence order.
    places: Vec<Place>,
    /// Per value, the index in `places` of its first message.
    starts: Vec<u32>,
}

/// Where one message's body sits in its value: offsets and lengths (u32: a block is small).
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
        let mut block = Block {
            values: Vec::new(),
            places: Vec::new(),
            starts: Vec::new(),
        };
        block.push_value(value)?;
        Ok(block)
    }

    /// This block extended by `frame` (a `b/` value of messages after its last): what an
    /// apply call that appended `frame` to the block's segment makes of it. The values are
    /// shared, the places copied.
    pub fn extended(&self, frame: Bytes) -> Result<Block, MachineError> {
        let mut block = Block {
            values: self.values.clone(),
            places: Vec::with_capacity(self.places.len() + 1),
            starts: self.starts.clone(),
        };
        block.places.extend_from_slice(&self.places);
        let after = block.places.last().map(|place| place.seq);
        block.push_value(frame)?;
        let first = block.places.get(self.places.len()).map(|place| place.seq);
        if first
            .zip(after)
            .is_some_and(|(first, after)| first <= after)
        {
            return Err(MachineError::Corrupt(
                "a block extended by messages before its last".into(),
            ));
        }
        Ok(block)
    }

    /// How many messages it holds.
    pub fn message_count(&self) -> usize {
        self.places.len()
    }

    fn push_value(&mut self, value: Bytes) -> Result<(), MachineError> {
        let base = value.as_ptr() as usize;
        let offset = |slice: &[u8]| (slice.as_ptr() as usize - base) as u32;
        self.starts.push(self.places.len() as u32);
        let places = keys::parse_block(&value)?.into_iter().map(|msg| Place {
            seq: msg.seq,
            headers_at: msg.headers.map_or(NO_HEADERS, offset),
            headers_len: msg.headers.map_or(0, |h| h.len() as u32),
            payload_at: offset(msg.payload),
            payload_len: msg.payload.len() as u32,
        });
        self.places.extend(places);
        self.values.push(value);
        Ok(())
    }

    /// The body of message `seq`, if the block holds it.
    pub fn body(&self, seq: u64) -> Option<Body> {
        let index = self.places.binary_search_by_key(&seq, |p| p.seq).ok()?;
        let place = self.places[index];
        let value = self
            .starts
            .partition_point(|start| *start as usize <= index)
            - 1;
        let value = &self.values[value];
        let slice = |at: u32, len: u32| value.slice(at as usize..(at + len) as usize);
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

    /// The sequence of its first message.
    pub fn first_seq(&self) -> Option<u64> {
        self.places.first().map(|place| place.seq)
    }

    /// What it costs the cache's budget: the value and the places.
    pub fn cost(&self) -> u64 {
        let values: usize = self.values.iter().map(Bytes::len).sum();
        (values
            + self.places.len() * std::mem::size_of::<Place>()
            + self.values.len() * (std::mem::size_of::<Bytes>() + 4)
            + 64) as u64
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

        // Extended by a frame of later messages: every body from its own value.
        let frame = |seq: u64, payload: &'static [u8]| {
            keys::encode_block([keys::BlockMsg {
                seq,
                subject: "s.c",
                headers: None,
                payload,
                ts_nanos: 3,
            }])
        };
        let longer = block.extended(frame(12, b"third")).unwrap();
        let longest = longer.extended(frame(13, b"fourth")).unwrap();
        assert_eq!(longest.message_count(), 4);
        assert_eq!(longest.seqs().collect::<Vec<_>>(), [5, 9, 12, 13]);
        assert_eq!(&longest.body(5).unwrap().payload[..], b"first");
        assert_eq!(&longest.body(12).unwrap().payload[..], b"third");
        assert_eq!(&longest.body(13).unwrap().payload[..], b"fourth");
        assert!(longest.cost() > longer.cost() && longer.cost() > block.cost());
        // The same messages read back from the segment as one value of three frames.
        let whole = [
            &keys::encode_block(messages)[..],
            &frame(12, b"third")[..],
            &frame(13, b"fourth")[..],
        ]
        .concat();
        let read = Block::decode(Bytes::from(whole)).unwrap();
        assert_eq!(read.message_count(), 4);
        assert_eq!(read.body(13), longest.body(13));
        assert_eq!(read.body(5), longest.body(5));
        // Never by earlier messages.
        assert!(longest.extended(frame(12, b"again")).is_err());
    }
}
