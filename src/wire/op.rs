//! The operations a client sends, as decoded from the socket.
//!
//! Every field is a zero-copy slice of the connection's read buffer (`Bytes`), so routing a
//! message never copies its subject or payload until it is written to a subscriber.

use bytes::Bytes;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientOp {
    /// `CONNECT <json>`: the raw JSON, parsed by the session (`handshake::ConnectOptions`).
    Connect(Bytes),
    /// `PUB` (headers `None`) or `HPUB` (headers `Some`, the whole `NATS/1.0` block).
    Pub {
        subject: Bytes,
        reply: Option<Bytes>,
        headers: Option<Bytes>,
        payload: Bytes,
    },
    /// `SUB <subject> [queue] <sid>`.
    Sub {
        subject: Bytes,
        queue: Option<Bytes>,
        sid: Bytes,
    },
    /// `UNSUB <sid> [max]`.
    Unsub {
        sid: Bytes,
        max: Option<u64>,
    },
    Ping,
    Pong,
    /// `INFO`, `+OK` or `-ERR` from a client: legal, and ignored as nats-server ignores them.
    Ignored,
}

impl ClientOp {
    /// The name used in logs and in `+OK` bookkeeping.
    pub fn name(&self) -> &'static str {
        match self {
            ClientOp::Connect(_) => "CONNECT",
            ClientOp::Pub { headers: None, .. } => "PUB",
            ClientOp::Pub { .. } => "HPUB",
            ClientOp::Sub { .. } => "SUB",
            ClientOp::Unsub { .. } => "UNSUB",
            ClientOp::Ping => "PING",
            ClientOp::Pong => "PONG",
            ClientOp::Ignored => "IGNORED",
        }
    }
}
