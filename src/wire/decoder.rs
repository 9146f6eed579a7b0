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
    #[error("client sent -ERR")]
    ClientError,
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
                    // The `\r` may already be here: fail on a wrong byte at once, as
                    // nats-server's byte-level parser does (`hello\n`).
                    if buf.len() > awaiting.total_len && buf[awaiting.total_len] != b'\r' {
                        return Err(DecodeError::UnknownOperation);
                    }
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

    /// Refuses a partial line that cannot become a valid operation, or that has grown past
    /// the control-line limit, before its newline arrives.
    fn check_partial_line(&self, buf: &BytesMut) -> Result<(), DecodeError> {
        // nats-server fails on the first byte that cannot continue an operation name.
        if !buf.is_empty() && recognize(buf).is_none() {
            let could_continue = OPS.iter().any(|(name, _, _)| {
                buf.len() <= name.len() && buf.eq_ignore_ascii_case(&name[..buf.len()])
            });
            if !could_continue {
                return Err(DecodeError::UnknownOperation);
            }
        }
        let line = buf.strip_suffix(b"\r").unwrap_or(buf);
        self.check_line_length(line)
    }

    /// The control-line limit, the same whether the line is whole or still arriving (the
    /// answer must not depend on how the bytes were cut). The limit is on the arguments,
    /// CONNECT's JSON included, as nats-server counts it; the second bound catches a line with
    /// no separator at all (`PINGxxxx...`), whose "arguments" argument_len cannot see, so
    /// nothing unbounded is ever buffered.
    fn check_line_length(&self, line: &[u8]) -> Result<(), DecodeError> {
        if argument_len(line) > self.max_control_line
            || line.len() > self.max_control_line + LONGEST_OP_WITH_SEPARATOR
        {
            return Err(DecodeError::ControlLineTooLong {
                limit: self.max_control_line,
            });
        }
        Ok(())
    }

    fn parse_line(&mut self, line: Bytes) -> Result<Option<ClientOp>, DecodeError> {
        let (name, op_end) = recognize(&line).ok_or(DecodeError::UnknownOperation)?;
        self.check_line_length(&line)?;
        let args = Args::new(line.clone(), op_end);
        match name {
            // `CONNECT{...}` needs no separator.
            OpName::Connect => Ok(Some(ClientOp::Connect(trim(line.slice(op_end..))))),
            OpName::Pub => self.parse_pub(args),
            OpName::Hpub => self.parse_hpub(args),
            OpName::Sub => parse_sub(args).map(Some),
            OpName::Unsub => parse_unsub(args).map(Some),
            // Everything after PING/PONG/+OK up to the newline is ignored (`PINGX`).
            OpName::Ping => Ok(Some(ClientOp::Ping)),
            OpName::Pong => Ok(Some(ClientOp::Pong)),
            OpName::Ok => Ok(Some(ClientOp::Ignored)),
            // An INFO from a client is ignored if it is a JSON object; otherwise nats-server
            // closes as for a bad CONNECT.
            OpName::Info => {
                let json = trim(line.slice(op_end..));
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&json)
                    .map(|_| Some(ClientOp::Ignored))
                    .map_err(|_| DecodeError::BadArguments { op: "INFO" })
            }
            // nats-server logs `Client Error` and closes without an answer.
            OpName::Err => Err(DecodeError::ClientError),
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

/// The operations a client may send, recognised as nats-server's parser does: by name
/// prefix, case-insensitively, byte by byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpName {
    Connect,
    Pub,
    Hpub,
    Sub,
    Unsub,
    Ping,
    Pong,
    Info,
    Ok,
    Err,
}

/// What must follow an operation name: `Separator` ops need a space or tab (`PUB\r\n` is an
/// unknown operation); the others take anything (`PINGX`, `CONNECT{...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follow {
    Separator,
    Anything,
}

/// `CONNECT` plus its separator: a line longer than the limit plus this cannot be valid.
const LONGEST_OP_WITH_SEPARATOR: usize = 8;

const OPS: [(&[u8], OpName, Follow); 10] = [
    (b"CONNECT", OpName::Connect, Follow::Anything),
    (b"PUB", OpName::Pub, Follow::Separator),
    (b"HPUB", OpName::Hpub, Follow::Separator),
    (b"SUB", OpName::Sub, Follow::Separator),
    (b"UNSUB", OpName::Unsub, Follow::Separator),
    (b"PING", OpName::Ping, Follow::Anything),
    (b"PONG", OpName::Pong, Follow::Anything),
    (b"INFO", OpName::Info, Follow::Separator),
    (b"+OK", OpName::Ok, Follow::Anything),
    (b"-ERR", OpName::Err, Follow::Separator),
];

/// The operation `line` starts with and where its name ends; `None` if it starts with no
/// operation, or lacks the separator its name needs.
fn recognize(line: &[u8]) -> Option<(OpName, usize)> {
    OPS.iter().find_map(|&(name, op, follow)| {
        let head = line.get(..name.len())?;
        if !head.eq_ignore_ascii_case(name) {
            return None;
        }
        match (follow, line.get(name.len())) {
            (Follow::Anything, _) => Some((op, name.len())),
            (Follow::Separator, Some(b)) if is_space(*b) => Some((op, name.len())),
            (Follow::Separator, _) => None,
        }
    })
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
