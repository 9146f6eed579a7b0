//! The client protocol decoder (`crate::wire::Decoder`) over arbitrary bytes that arrive in
//! arbitrary pieces: it never panics, never yields a payload above `max_payload`, and gives
//! the same operations and the same error whether the bytes arrive at once, one at a time,
//! or cut where the input says.
//!
//! Input: `k` (one byte, `k % 8` cuts), then `k % 8` cut offsets (u16 little endian, into the
//! traffic), then the client's bytes.

use crate::wire::{ClientOp, DecodeError, Decoder};
use bytes::BytesMut;

/// Small limits, so that the fuzzer reaches them with short inputs.
const MAX_CONTROL_LINE: usize = 256;
const MAX_PAYLOAD: usize = 512;
/// Byte-at-a-time decoding rescans the buffer for each byte: only for inputs up to this size.
const BYTEWISE_LIMIT: usize = 2048;

/// What the decoder made of `traffic` delivered in pieces ending at `cuts` (ascending), then
/// the rest: the operations, and the error that ended the connection if one did.
fn decode_in_pieces(traffic: &[u8], cuts: &[usize]) -> (Vec<ClientOp>, Option<DecodeError>) {
    let mut decoder = Decoder::new(MAX_CONTROL_LINE, MAX_PAYLOAD);
    let mut buf = BytesMut::new();
    let mut ops = Vec::new();
    let mut start = 0;
    for end in cuts.iter().copied().chain([traffic.len()]) {
        buf.extend_from_slice(&traffic[start..end]);
        start = end;
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(op)) => ops.push(op),
                Ok(None) => break,
                Err(error) => return (ops, Some(error)),
            }
        }
    }
    (ops, None)
}

fn check_limits(ops: &[ClientOp]) {
    for op in ops {
        if let ClientOp::Pub {
            headers, payload, ..
        } = op
        {
            let total = payload.len() + headers.as_ref().map_or(0, |h| h.len());
            assert!(
                total <= MAX_PAYLOAD,
                "a payload of {total} bytes got through"
            );
        }
    }
}

/// One run of the target over the fuzzer's input (`fuzz/fuzz_targets/` calls it; the corpus
/// replay test too). Panics on a finding.
pub fn run(data: &[u8]) {
    let Some((&count, rest)) = data.split_first() else {
        return;
    };
    let count = usize::from(count % 8);
    let Some(offsets) = rest.get(..count * 2) else {
        return;
    };
    let traffic = &rest[count * 2..];
    let mut cuts: Vec<usize> = offsets
        .chunks_exact(2)
        .map(|pair| usize::from(u16::from_le_bytes([pair[0], pair[1]])) % (traffic.len() + 1))
        .collect();
    cuts.sort_unstable();

    let whole = decode_in_pieces(traffic, &[]);
    check_limits(&whole.0);
    let cut = decode_in_pieces(traffic, &cuts);
    assert_eq!(whole, cut, "cut at {cuts:?}");
    if traffic.len() <= BYTEWISE_LIMIT {
        let every_byte: Vec<usize> = (1..traffic.len()).collect();
        assert_eq!(
            whole,
            decode_in_pieces(traffic, &every_byte),
            "one byte at a time"
        );
    }
}
