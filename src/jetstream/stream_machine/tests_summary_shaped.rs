use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

fn msg<'a>(seq: u64, subject: &'a str, payload_len: usize, ts_nanos: i64) -> MsgMetaRef<'a> {
    MsgMetaRef {
        seq,
        subject,
        headers: None,
        payload_len,
        ts_nanos,
    }
}

/// What `for_each` hands on: each message with its subject's index.
fn read_back(bytes: &[u8]) -> Option<Vec<(MsgMetaRef<'_>, usize)>> {
    decode(bytes)
}

/// The subjects' indexes in order of first appearance, as the encoder numbers them.
fn slots(msgs: &[MsgMetaRef<'_>]) -> Vec<usize> {
    let mut seen: Vec<&str> = Vec::new();
    msgs.iter()
        .map(|msg| match seen.iter().position(|s| *s == msg.subject) {
            Some(at) => at,
            None => {
                seen.push(msg.subject);
                seen.len() - 1
            }
        })
        .collect()
}

#[test]
fn the_bytes_of_a_uniform_block_and_of_a_mixed_one_are_pinned() {
    // One subject, consecutive sequences, one length, no headers: the time step alone.
    let uniform = [
        msg(300, "o", 1024, 5),
        msg(301, "o", 1024, 6),
        msg(302, "o", 1024, 4),
    ];
    assert_eq!(
        encode(&uniform),
        [
            1, 1, b'o', // subjects
            3,    // messages
            7,    // CONSECUTIVE | SAME_LENGTH | NO_HEADERS
            0xac, 0x02, // first sequence 300
            10,   // first time 5, zigzagged
            0x80, 0x08, // length 1024
            2,    // +1
            3,    // -2
        ]
    );
    let mixed = [
        MsgMetaRef {
            headers: Some(b"H"),
            ..msg(9, "a", 2, 1)
        },
        msg(11, "b", 3, 1),
    ];
    assert_eq!(
        encode(&mixed),
        [
            2, 1, b'a', 1, b'b', // subjects
            2,    // messages
            0,    // no shape
            9, 2, // first sequence and time
            0, 2, 1, 1, b'H', // subject 0, length 2, headers "H"
            2, 0, 1, 3, 0, // +2, +0, subject 1, length 3, no headers
        ]
    );
}

#[test]
fn what_is_encoded_reads_back_in_every_shape() {
    let mut rng = StdRng::seed_from_u64(37);
    let subjects = ["a", "b.c", "orders.new", ""];
    let headers: [&[u8]; 3] = [
        b"",
        b"NATS/1.0\r\nNats-TTL: 5s\r\n\r\n",
        b"NATS/1.0\r\n\r\n",
    ];
    for round in 0..2000 {
        let len = rng.random_range(1..40);
        let consecutive = rng.random_bool(0.5);
        let one_subject = rng.random_bool(0.5);
        let one_length = rng.random_bool(0.5);
        let with_headers = rng.random_bool(0.3);
        let mut seq = match round % 3 {
            0 => u64::MAX - 5,
            _ => rng.random(),
        };
        let mut ts: i64 = rng.random();
        let msgs: Vec<MsgMetaRef<'_>> = (0..len)
            .map(|_| {
                let out = MsgMetaRef {
                    seq,
                    subject: subjects[if one_subject {
                        0
                    } else {
                        rng.random_range(0..4)
                    }],
                    headers: (with_headers && rng.random_bool(0.5))
                        .then(|| headers[rng.random_range(0..3)]),
                    payload_len: if one_length {
                        77
                    } else {
                        rng.random_range(0..70_000)
                    },
                    ts_nanos: ts,
                };
                seq = seq.wrapping_add(if consecutive {
                    1
                } else {
                    rng.random_range(1..1000)
                });
                ts = ts.wrapping_add(rng.random_range(-1_000_000_000..1_000_000_000));
                out
            })
            .collect();
        let bytes = encode(&msgs);
        let expected: Vec<(MsgMetaRef<'_>, usize)> =
            msgs.iter().copied().zip(slots(&msgs)).collect();
        assert_eq!(read_back(&bytes), Some(expected), "round {round}");
    }
}

#[test]
fn a_uniform_block_takes_about_a_byte_or_two_a_message() {
    // 1 KiB messages 15 µs apart (a stream taking ~65k msgs/s): 3 bytes of time step each
    // in version 1 beside four more fields; here the time step alone.
    let msgs: Vec<MsgMetaRef<'_>> = (0..1000)
        .map(|i| {
            msg(
                1_000_000 + i,
                "orders.new",
                1024,
                1_700_000_000_000_000_000 + 15_000 * i as i64,
            )
        })
        .collect();
    let bytes = encode(&msgs);
    assert!(bytes.len() < 3 * msgs.len() + 40, "{} bytes", bytes.len());
    // Equal times (one apply call's messages stamped together): a byte each.
    let same_time: Vec<MsgMetaRef<'_>> = (0..1000).map(|i| msg(1 + i, "o", 1024, 42)).collect();
    assert!(encode(&same_time).len() < msgs.len() + 40);
}

#[test]
fn a_cut_extended_or_out_of_range_record_is_refused_whole() {
    let msgs: Vec<MsgMetaRef<'_>> = (1..=20)
        .map(|seq| MsgMetaRef {
            headers: (seq % 3 == 0).then_some(&b"NATS/1.0\r\n\r\n"[..]),
            ..msg(
                seq * 2,
                if seq % 2 == 0 { "even" } else { "odd" },
                seq as usize,
                seq as i64,
            )
        })
        .collect();
    let bytes = encode(&msgs);
    assert_eq!(read_back(&bytes).map(|read| read.len()), Some(20));
    for cut in 0..bytes.len() {
        assert!(decode(&bytes[..cut]).is_none(), "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer).is_none());
    // The last message: step 2, time step 1 (zigzag 2), subject 1 of 2, length 20, no
    // headers.
    let at = bytes.len() - 5;
    assert_eq!(bytes[at..], [2, 2, 1, 20, 0]);
    let mut bad = bytes.clone();
    bad[at + 2] = 2;
    assert!(decode(&bad).is_none(), "subject 2 of 2");
    let mut bad = bytes.clone();
    bad[at + 4] = 2;
    assert!(decode(&bad).is_none(), "a header flag of 2");

    let uniform = encode(&[msg(1, "o", 1, 1), msg(2, "o", 1, 2)]);
    let shape_at = 4;
    assert_eq!(uniform[shape_at], SHAPE_BITS);
    let mut bad = uniform.clone();
    bad[shape_at] |= 8;
    assert!(decode(&bad).is_none(), "an unknown shape bit");
    let mut empty = uniform.clone();
    empty[shape_at - 1] = 0;
    assert!(decode(&empty).is_none(), "no message");
}
