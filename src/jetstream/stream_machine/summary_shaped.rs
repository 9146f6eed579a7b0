//! A block's record in a version-2 segment summary (`summary.rs`, ADR 0037): a "shaped"
//! record, which stores once what every message of the block shares and per message only
//! what differs. A block of one apply call is mostly one subject, consecutive sequences,
//! equal payload lengths and no headers; its messages then cost one varint each, the time
//! step (version 1 spent five fields a message, 6.6 bytes a message over a 10 GiB stream,
//! all of which a cold restart reads and decodes).
//!
//! Layout, varints LEB128 (times zigzagged), steps wrapping:
//!
//! ```text
//! subject count, then each subject (length ++ UTF-8 bytes)
//! message count (at least 1)
//! shape: a byte of flags, CONSECUTIVE | SAME_LENGTH | NO_HEADERS (no other bit)
//! first sequence, first time
//! the payload length, if SAME_LENGTH
//! per message:
//!   sequence step from the previous (not for the first; none if CONSECUTIVE: 1)
//!   time step from the previous (not for the first)
//!   subject index (only when the block has more than one subject)
//!   payload length (unless SAME_LENGTH)
//!   headers: 0, or 1 ++ length ++ bytes (unless NO_HEADERS)
//! ```
//!
//! A record is checked whole (every field in range, nothing left over) before any message
//! is handed on, so a load never acts on part of a damaged one.

use std::collections::HashMap;

use super::summary::MsgMetaRef;
use super::summary_decode::{unzigzag, Cursor};

const CONSECUTIVE: u8 = 1;
const SAME_LENGTH: u8 = 2;
const NO_HEADERS: u8 = 4;
const SHAPE_BITS: u8 = CONSECUTIVE | SAME_LENGTH | NO_HEADERS;

/// The record of a block's messages (in sequence order, at least one).
pub fn encode(msgs: &[MsgMetaRef<'_>]) -> Vec<u8> {
    let mut subjects: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, u64> = HashMap::new();
    let slots: Vec<u64> = msgs
        .iter()
        .map(|msg| {
            *index.entry(msg.subject).or_insert_with(|| {
                subjects.push(msg.subject);
                (subjects.len() - 1) as u64
            })
        })
        .collect();
    let first = msgs.first().expect("a block holds a message");
    let mut shape = SHAPE_BITS;
    for pair in msgs.windows(2) {
        if pair[1].seq != pair[0].seq.wrapping_add(1) {
            shape &= !CONSECUTIVE;
        }
    }
    if msgs.iter().any(|msg| msg.payload_len != first.payload_len) {
        shape &= !SAME_LENGTH;
    }
    if msgs.iter().any(|msg| msg.headers.is_some()) {
        shape &= !NO_HEADERS;
    }
    let mut out = Vec::with_capacity(16 + msgs.len() * 2);
    put_varint(&mut out, subjects.len() as u64);
    for subject in &subjects {
        put_bytes(&mut out, subject.as_bytes());
    }
    put_varint(&mut out, msgs.len() as u64);
    out.push(shape);
    put_varint(&mut out, first.seq);
    put_varint(&mut out, zigzag(first.ts_nanos));
    if shape & SAME_LENGTH != 0 {
        put_varint(&mut out, first.payload_len as u64);
    }
    let (mut seq, mut ts) = (first.seq, first.ts_nanos);
    for (i, (msg, slot)) in msgs.iter().zip(&slots).enumerate() {
        if i > 0 {
            if shape & CONSECUTIVE == 0 {
                put_varint(&mut out, msg.seq.wrapping_sub(seq));
            }
            put_varint(&mut out, zigzag(msg.ts_nanos.wrapping_sub(ts)));
            (seq, ts) = (msg.seq, msg.ts_nanos);
        }
        if subjects.len() > 1 {
            put_varint(&mut out, *slot);
        }
        if shape & SAME_LENGTH == 0 {
            put_varint(&mut out, msg.payload_len as u64);
        }
        if shape & NO_HEADERS == 0 {
            match msg.headers {
                None => out.push(0),
                Some(headers) => {
                    out.push(1);
                    put_bytes(&mut out, headers);
                }
            }
        }
    }
    out
}

/// The messages of the record in `bytes`, in order, each with its subject's index in the
/// block; `None` when it does not check out whole. One pass over the bytes, into a list the
/// caller walks (a check walk before a second, decoding one cost a restart more than this
/// list: `bench/HISTORY.md`).
pub fn decode(bytes: &[u8]) -> Option<Vec<(MsgMetaRef<'_>, usize)>> {
    let mut cursor = Cursor { bytes };
    let count = cursor.len()?;
    // Each subject takes a byte at least: bounds what a damaged count reserves.
    let mut subjects = Vec::with_capacity(count.min(cursor.bytes.len()));
    for _ in 0..count {
        subjects.push(std::str::from_utf8(cursor.bytes()?).ok()?);
    }
    let left = cursor.len()?;
    let shape = cursor.byte()?;
    if left == 0 || shape & !SHAPE_BITS != 0 {
        return None;
    }
    let (mut seq, mut ts) = (cursor.varint(10)?, unzigzag(cursor.varint(10)?));
    let same_length = match shape & SAME_LENGTH {
        0 => None,
        _ => Some(cursor.u32()? as usize),
    };
    // Each message after the first takes a byte at least (its time step).
    let mut msgs = Vec::with_capacity(left.min(cursor.bytes.len() + 1));
    for i in 0..left {
        if i > 0 {
            let step = match shape & CONSECUTIVE {
                0 => cursor.varint(10)?,
                _ => 1,
            };
            seq = seq.wrapping_add(step);
            ts = ts.wrapping_add(unzigzag(cursor.varint(10)?));
        }
        let slot = match subjects.len() {
            1 => 0,
            _ => usize::try_from(cursor.varint(5)?).ok()?,
        };
        let subject = *subjects.get(slot)?;
        let payload_len = match same_length {
            Some(len) => len,
            None => cursor.u32()? as usize,
        };
        let headers = match shape & NO_HEADERS {
            0 => match cursor.byte()? {
                0 => None,
                1 => Some(cursor.bytes()?),
                _ => return None,
            },
            _ => None,
        };
        let msg = MsgMetaRef {
            seq,
            subject,
            headers,
            payload_len,
            ts_nanos: ts,
        };
        msgs.push((msg, slot));
    }
    cursor.bytes.is_empty().then_some(msgs)
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

#[cfg(test)]
#[path = "tests_summary_shaped.rs"]
mod tests;
