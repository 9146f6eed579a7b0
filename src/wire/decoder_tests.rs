//! Unit tests of the decoder: every op, tolerated whitespace, limits, and input split at
//! every possible point (the stream arrives in arbitrary chunks).

use super::*;

fn decoder() -> Decoder {
    Decoder::new(4096, 1024)
}

fn decode_all(input: &[u8]) -> Result<Vec<ClientOp>, DecodeError> {
    let mut dec = decoder();
    let mut buf = BytesMut::from(input);
    let mut ops = Vec::new();
    while let Some(op) = dec.decode(&mut buf)? {
        ops.push(op);
    }
    Ok(ops)
}

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn decodes_every_operation() {
    let input = b"CONNECT {\"verbose\":false}\r\nPING\r\nPONG\r\nSUB foo 1\r\nSUB foo q 2\r\n\
UNSUB 1\r\nUNSUB 2 5\r\nPUB foo 5\r\nhello\r\nPUB foo bar 0\r\n\r\n\
HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n";
    let ops = decode_all(input).unwrap();
    assert_eq!(
        ops,
        vec![
            ClientOp::Connect(b("{\"verbose\":false}")),
            ClientOp::Ping,
            ClientOp::Pong,
            ClientOp::Sub {
                subject: b("foo"),
                queue: None,
                sid: b("1")
            },
            ClientOp::Sub {
                subject: b("foo"),
                queue: Some(b("q")),
                sid: b("2")
            },
            ClientOp::Unsub {
                sid: b("1"),
                max: None
            },
            ClientOp::Unsub {
                sid: b("2"),
                max: Some(5)
            },
            ClientOp::Pub {
                subject: b("foo"),
                reply: None,
                headers: None,
                payload: b("hello")
            },
            ClientOp::Pub {
                subject: b("foo"),
                reply: Some(b("bar")),
                headers: None,
                payload: b("")
            },
            ClientOp::Pub {
                subject: b("foo"),
                reply: None,
                headers: Some(b("NATS/1.0\r\n\r\n")),
                payload: b("hi")
            },
        ]
    );
}

#[test]
fn tolerates_case_tabs_repeated_and_trailing_spaces_and_bare_lf() {
    let ops = decode_all(b"sub  foo   7\r\nUNSUB 7 \r\npub\tfoo 1\r\nx\r\nping\n").unwrap();
    assert_eq!(ops.len(), 4);
    assert_eq!(
        ops[0],
        ClientOp::Sub {
            subject: b("foo"),
            queue: None,
            sid: b("7")
        }
    );
    assert_eq!(
        ops[1],
        ClientOp::Unsub {
            sid: b("7"),
            max: None
        }
    );
    assert_eq!(ops[3], ClientOp::Ping);
}

#[test]
fn every_split_point_gives_the_same_operations() {
    let input: &[u8] = b"CONNECT {}\r\nSUB a.b q 1\r\nHPUB a.b r 12 17\r\nNATS/1.0\r\n\r\nworld\r\nPUB x 3\r\nabc\r\nPING\r\n";
    let whole = decode_all(input).unwrap();
    for split in 0..input.len() {
        let mut dec = decoder();
        let mut buf = BytesMut::from(&input[..split]);
        let mut ops = Vec::new();
        while let Some(op) = dec.decode(&mut buf).unwrap() {
            ops.push(op);
        }
        buf.extend_from_slice(&input[split..]);
        while let Some(op) = dec.decode(&mut buf).unwrap() {
            ops.push(op);
        }
        assert_eq!(ops, whole, "split at {split}");
    }
}

#[test]
fn unknown_operation_is_an_error() {
    assert_eq!(
        decode_all(b"FOO bar\r\n"),
        Err(DecodeError::UnknownOperation)
    );
}

#[test]
fn malformed_arguments_are_errors() {
    for input in [
        &b"PUB foo\r\n"[..],
        b"PUB foo bar\r\n",
        b"PUB foo -1\r\n",
        b"SUB foo\r\n",
        b"SUB a b c d\r\n",
        b"UNSUB 1 2 3\r\n",
        b"HPUB foo 10 5\r\n",
        b"HPUB foo 5\r\n",
    ] {
        assert!(
            matches!(decode_all(input), Err(DecodeError::BadArguments { .. })),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn operation_without_its_arguments_is_an_unknown_operation() {
    for input in [
        &b"PUB\r\n"[..],
        b"SUB\r\n",
        b"UNSUB\r\n",
        b"HPUB\r\n",
        b"\r\n",
        b" PING\r\n",
    ] {
        assert_eq!(decode_all(input), Err(DecodeError::UnknownOperation));
    }
}

#[test]
fn unparsable_unsub_max_means_unsubscribe_now() {
    assert_eq!(
        decode_all(b"UNSUB 1 x\r\n").unwrap(),
        vec![ClientOp::Unsub {
            sid: b("1"),
            max: Some(0)
        }]
    );
}

#[test]
fn payload_without_trailing_crlf_is_an_error() {
    assert_eq!(
        decode_all(b"PUB foo 2\r\nabcd\r\n"),
        Err(DecodeError::UnknownOperation)
    );
}

#[test]
fn max_payload_is_checked_before_the_payload_arrives() {
    let mut dec = decoder();
    let mut buf = BytesMut::from(&b"PUB foo 1025\r\n"[..]);
    assert_eq!(
        dec.decode(&mut buf),
        Err(DecodeError::MaxPayload {
            size: 1025,
            limit: 1024
        })
    );
    let mut buf = BytesMut::from(&b"HPUB foo 12 1030\r\n"[..]);
    assert!(matches!(
        decoder().decode(&mut buf),
        Err(DecodeError::MaxPayload { .. })
    ));
    assert_eq!(decode_all(b"PUB foo 1024\r\n").unwrap(), vec![]);
}

#[test]
fn control_line_limit_counts_arguments_with_and_without_newline() {
    let at_limit = format!("SUB {}", "a".repeat(4096));
    let mut buf = BytesMut::from(at_limit.as_bytes());
    assert_eq!(decoder().decode(&mut buf), Ok(None));
    let over = format!("SUB {}", "a".repeat(4097));
    let mut buf = BytesMut::from(over.as_bytes());
    assert_eq!(
        decoder().decode(&mut buf),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
    assert_eq!(
        decode_all(format!("{over}\r\n").as_bytes()),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
}

#[test]
fn connect_counts_against_the_control_line_limit() {
    let line = format!("CONNECT {{\"name\":\"{}\"}}\r\n", "x".repeat(5000));
    assert_eq!(
        decode_all(line.as_bytes()),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
}

#[test]
fn a_line_without_separator_or_newline_is_bounded() {
    let mut buf = BytesMut::from(format!("PING{}", "x".repeat(5000)).as_bytes());
    assert_eq!(
        decoder().decode(&mut buf),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
}

/// Found by `fuzz/fuzz_targets/wire_decoder.rs`: a line with no separator longer than the
/// bound was refused when it arrived in pieces but accepted when its newline came with it
/// (`PING` + 5000 bytes + CRLF). The answer must not depend on how the bytes arrive.
#[test]
fn a_line_without_separator_is_refused_however_it_arrives() {
    let line = format!("PING{}\r\nPING\r\n", "x".repeat(5000));
    assert_eq!(
        decode_all(line.as_bytes()),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
    let connect = format!("CONNECT{{\"name\":\"{}\"}}\r\n", "x".repeat(5000));
    assert_eq!(
        decode_all(connect.as_bytes()),
        Err(DecodeError::ControlLineTooLong { limit: 4096 })
    );
}
