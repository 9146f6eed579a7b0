//! Incremental decoder of client operations.
//!
//! `Decoder::decode` takes the connection's read buffer and returns `Ok(None)` until a whole
//! operation (control line, plus payload for PUB/HPUB) has arrived. Limits are checked before
//! anything is buffered: a control line longer than `max_control_line`, or a PUB announcing more
//! than `max_payload` bytes, is refused as soon as the line (or its first bytes) are seen, so a
//! hostile client cannot make the server hold more than the limits. Payloads are split off the
//! buffer without copying.

use bytes::{Buf, Bytes, BytesMut};

use super::op::ClientOp;

/// Why the byte stream from a client is not valid protocol. Each maps to the `-ERR` nats-server
/// sends (see `server/session/errors.rs`); all of them end the connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("unknown protocol operation")]
    UnknownOperation,
    #[error("malformed {op} arguments")]
    BadArguments { op: &'static str },
    #[error("control line longer than {limit} bytes")]
    ControlLineTooLong { limit: usize },
    #[error("payload of {size} bytes exceeds max_payload {limit}")]
    MaxPayload { size: usize, limit: usize },
}

/// A PUB/HPUB whose control line has been read and whose payload is still arriving.
#[derive(Debug)]
struct AwaitingPayload {
    subject: Bytes,
    reply: Option<Bytes>,
    /// `Some(n)` for HPUB: the first `n` payload bytes are the header block.
    header_len: Option<usize>,
    total_len: usize,
}

/// One per connection; owned by the session's read loop.
#[derive(Debug)]
pub struct Decoder {
    max_control_line: usize,
    max_payload: usize,
    awaiting: Option<AwaitingPayload>,
}

impl Decoder {
    pub fn new(max_control_line: usize, max_payload: usize) -> Self {
        Decoder {
            max_control_line,
            max_payload,
            awaiting: None,
        }
    }

    /// Decodes the next whole operation from `buf`, consuming its bytes.
    pub fn decode(&mut self, buf: &mut BytesMut) -> Result<Option<ClientOp>, DecodeError> {
        loop {
            if let Some(awaiting) = &self.awaiting {
                let needed = awaiting.total_len + 2;
                if buf.len() < needed {
                    buf.reserve(needed - buf.len());
                    return Ok(None);
                }
                if &buf[awaiting.total_len..needed] != b"\r\n" {
                    return Err(DecodeError::UnknownOperation);
                }
                let awaiting = self.awaiting.take().expect("checked above");
                let mut body = buf.split_to(awaiting.total_len).freeze();
                buf.advance(2);
                let headers = awaiting.header_len.map(|n| body.split_to(n));
                return Ok(Some(ClientOp::Pub {
                    subject: awaiting.subject,
                    reply: awaiting.reply,
                    headers,
                    payload: body,
                }));
            }

            let Some(newline) = memchr::memchr(b'\n', buf) else {
                self.check_partial_line(buf)?;
                return Ok(None);
            };
            let line = buf.split_to(newline + 1).freeze();
            let mut end = newline;
            if end > 0 && line[end - 1] == b'\r' {
                end -= 1;
            }
            let line = line.slice(..end);
            if let Some(op) = self.parse_line(line)? {
                return Ok(Some(op));
            }
            // A PUB/HPUB header was read; loop to look for its payload.
        }
    }

    /// Refuses a control line whose arguments have grown past the limit before its newline
    /// arrived (nats-server checks at the end of every read, too).
    fn check_partial_line(&self, buf: &BytesMut) -> Result<(), DecodeError> {
        let line = buf.strip_suffix(b"\r").unwrap_or(buf);
        if argument_len(line) > self.max_control_line {
            return Err(DecodeError::ControlLineTooLong {
                limit: self.max_control_line,
            });
        }
        Ok(())
    }

    fn parse_line(&mut self, line: Bytes) -> Result<Option<ClientOp>, DecodeError> {
        let op_end = line
            .iter()
            .position(|b| *b == b' ' || *b == b'\t')
            .unwrap_or(line.len());
        let op = &line[..op_end];
        // The limit is on the arguments, CONNECT's JSON included, as nats-server counts it.
        if argument_len(&line) > self.max_control_line {
            return Err(DecodeError::ControlLineTooLong {
                limit: self.max_control_line,
            });
        }
        if op.eq_ignore_ascii_case(b"CONNECT") {
            let json = trim(line.slice(op_end..));
            return Ok(Some(ClientOp::Connect(json)));
        }
        let has_args = op_end < line.len();
        let args = Args::new(line.clone(), op_end);
        let needs_args = [&b"PUB"[..], b"HPUB", b"SUB", b"UNSUB"];
        if !has_args && needs_args.iter().any(|name| op.eq_ignore_ascii_case(name)) {
            // `PUB\r\n`: nats-server's byte-level parser fails here, before argument parsing.
            return Err(DecodeError::UnknownOperation);
        }
        if op.eq_ignore_ascii_case(b"PUB") {
            self.parse_pub(args)
        } else if op.eq_ignore_ascii_case(b"HPUB") {
            self.parse_hpub(args)
        } else if op.eq_ignore_ascii_case(b"SUB") {
            parse_sub(args).map(Some)
        } else if op.eq_ignore_ascii_case(b"UNSUB") {
            parse_unsub(args).map(Some)
        } else if op.eq_ignore_ascii_case(b"PING") {
            Ok(Some(ClientOp::Ping))
        } else if op.eq_ignore_ascii_case(b"PONG") {
            Ok(Some(ClientOp::Pong))
        } else if op.eq_ignore_ascii_case(b"INFO")
            || op.eq_ignore_ascii_case(b"+OK")
            || op.eq_ignore_ascii_case(b"-ERR")
        {
            Ok(Some(ClientOp::Ignored))
        } else {
            Err(DecodeError::UnknownOperation)
        }
    }

    fn parse_pub(&mut self, args: Args) -> Result<Option<ClientOp>, DecodeError> {
        const OP: &str = "PUB";
        let mut tokens = args.collect::<Vec<_>>();
        let (subject, reply, size) = match tokens.len() {
            2 => (tokens.swap_remove(0), None, tokens.pop()),
            3 => {
                let size = tokens.pop();
                let reply = tokens.pop();
                (tokens.swap_remove(0), reply, size)
            }
            _ => return Err(DecodeError::BadArguments { op: OP }),
        };
        let size = parse_size(size.as_deref(), OP)?;
        self.check_payload(size)?;
        self.awaiting = Some(AwaitingPayload {
            subject,
            reply,
            header_len: None,
            total_len: size,
        });
        Ok(None)
    }

    fn parse_hpub(&mut self, args: Args) -> Result<Option<ClientOp>, DecodeError> {
        const OP: &str = "HPUB";
        let mut tokens = args.collect::<Vec<_>>();
        let (subject, reply, header_len, total) = match tokens.len() {
            3 => {
                let total = tokens.pop();
                let header = tokens.pop();
                (tokens.swap_remove(0), None, header, total)
            }
            4 => {
                let total = tokens.pop();
                let header = tokens.pop();
                let reply = tokens.pop();
                (tokens.swap_remove(0), reply, header, total)
            }
            _ => return Err(DecodeError::BadArguments { op: OP }),
        };
        let header_len = parse_size(header_len.as_deref(), OP)?;
        let total = parse_size(total.as_deref(), OP)?;
        if header_len > total {
            return Err(DecodeError::BadArguments { op: OP });
        }
        self.check_payload(total)?;
        self.awaiting = Some(AwaitingPayload {
            subject,
            reply,
            header_len: Some(header_len),
            total_len: total,
        });
        Ok(None)
    }

    fn check_payload(&self, size: usize) -> Result<(), DecodeError> {
        if size > self.max_payload {
            return Err(DecodeError::MaxPayload {
                size,
                limit: self.max_payload,
            });
        }
        Ok(())
    }
}

fn parse_sub(args: Args) -> Result<ClientOp, DecodeError> {
    let mut tokens = args.collect::<Vec<_>>();
    let (subject, queue, sid) = match tokens.len() {
        2 => {
            let sid = tokens.pop();
            (tokens.swap_remove(0), None, sid)
        }
        3 => {
            let sid = tokens.pop();
            let queue = tokens.pop();
            (tokens.swap_remove(0), queue, sid)
        }
        _ => return Err(DecodeError::BadArguments { op: "SUB" }),
    };
    Ok(ClientOp::Sub {
        subject,
        queue,
        sid: sid.expect("two or three tokens"),
    })
}

fn parse_unsub(args: Args) -> Result<ClientOp, DecodeError> {
    let tokens = args.collect::<Vec<_>>();
    match tokens.as_slice() {
        [sid] => Ok(ClientOp::Unsub {
            sid: sid.clone(),
            max: None,
        }),
        // nats-server reads an unparsable max as -1, i.e. "unsubscribe now", without an error.
        [sid, max] => Ok(ClientOp::Unsub {
            sid: sid.clone(),
            max: Some(parse_size(Some(max), "UNSUB").map_or(0, |n| n as u64)),
        }),
        _ => Err(DecodeError::BadArguments { op: "UNSUB" }),
    }
}

fn parse_size(token: Option<&[u8]>, op: &'static str) -> Result<usize, DecodeError> {
    let token = token.ok_or(DecodeError::BadArguments { op })?;
    if token.is_empty() || token.len() > 19 || !token.iter().all(u8::is_ascii_digit) {
        return Err(DecodeError::BadArguments { op });
    }
    Ok(token
        .iter()
        .fold(0usize, |n, d| n * 10 + usize::from(d - b'0')))
}

/// Length of a control line's arguments: everything after the operation name and the
/// separator that follows it.
fn argument_len(line: &[u8]) -> usize {
    match line.iter().position(|b| is_space(*b)) {
        Some(op_end) => line.len() - op_end - 1,
        None => 0,
    }
}

fn is_space(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn trim(bytes: Bytes) -> Bytes {
    let start = bytes
        .iter()
        .position(|b| !is_space(*b))
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_space(*b))
        .map_or(start, |i| i + 1);
    bytes.slice(start..end.max(start))
}

/// Whitespace-separated arguments of a control line, tolerating repeated and trailing spaces
/// and tabs as real clients send them (`SUB foo  7`, `UNSUB 7 `).
struct Args {
    line: Bytes,
    pos: usize,
}

impl Args {
    fn new(line: Bytes, pos: usize) -> Self {
        Args { line, pos }
    }
}

impl Iterator for Args {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        let rest = &self.line[self.pos..];
        let start = self.pos + rest.iter().position(|b| !is_space(*b))?;
        let len = self.line[start..]
            .iter()
            .position(|b| is_space(*b))
            .unwrap_or(self.line.len() - start);
        self.pos = start + len;
        Some(self.line.slice(start..start + len))
    }
}

#[cfg(test)]
#[path = "decoder_tests.rs"]
mod tests;
