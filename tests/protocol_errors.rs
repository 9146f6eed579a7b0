//! Byte-exact answers to bad and edge-case client input, checked against what nats-server
//! 2.15.1 was observed to send (`/work/notes/protocol-behaviour.md`; section numbers below
//! refer to it). Each test speaks raw bytes over TCP to an in-process jetraft.
//!
//! Every error case also checks a *bystander*: a second, already connected client that must
//! keep receiving messages and PONGs ("no error case may disturb other clients").
//!
//! The cases are split by topic into `tests/protocol_errors/*.rs`:
//! * `parse`: unknown operations, malformed arguments, payload terminator, case/whitespace,
//!   client-sent `+OK`/`INFO`/`-ERR` (sections 0, 1, 2, 14);
//! * `size_limits`: control line and payload limits (sections 3, 4);
//! * `subjects`: SUB subject validity and pedantic PUB (section 5);
//! * `auth`: user/password, token and the auth timeout (section 6);
//! * `connect`: CONNECT options, verbose `+OK`, INFO and the second INFO (sections 7, 8, 12);
//! * `unsub`: UNSUB max semantics and sids (section 13);
//! * `no_responders`: the exact 503 HMSG (section 11).

mod common;

#[path = "protocol_errors/auth.rs"]
mod auth;
#[path = "protocol_errors/connect.rs"]
mod connect;
#[path = "protocol_errors/no_responders.rs"]
mod no_responders;
#[path = "protocol_errors/parse.rs"]
mod parse;
#[path = "protocol_errors/size_limits.rs"]
mod size_limits;
#[path = "protocol_errors/subjects.rs"]
mod subjects;
#[path = "protocol_errors/unsub.rs"]
mod unsub;

use common::raw::{show, Raw};
use jetraft::config::Config;
use jetraft::node::RunningNode;

/// The usual CONNECT (`C` in the notes).
pub const C: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false}\r\n";
/// The usual CONNECT with header support (`CH` in the notes).
pub const CH: &[u8] = b"CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true}\r\n";
/// What an `-ERR` for `text` looks like on the wire.
pub fn err(text: &str) -> Vec<u8> {
    format!("-ERR '{text}'\r\n").into_bytes()
}

/// `a` followed by `b`.
pub fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    [a, b].concat()
}

/// A server plus a bystander client subscribed to `bystander`.
pub struct Harness {
    pub server: RunningNode,
    bystander: Raw,
    /// A CONNECT the server accepts (differs when auth is configured).
    connect: Vec<u8>,
}

impl Harness {
    pub async fn start() -> Harness {
        Harness::with(Config::loopback()).await
    }

    pub async fn with(config: Config) -> Harness {
        Harness::with_connect(config, C).await
    }

    /// `connect` is what the bystander (and its publisher) send to be accepted.
    pub async fn with_connect(config: Config, connect: &[u8]) -> Harness {
        let server = common::start(config).await;
        let mut bystander = Raw::connect(&server).await.named("bystander");
        bystander
            .send(cat(connect, b"SUB bystander 1\r\nPING\r\n"))
            .await;
        bystander.expect(b"PONG\r\n").await;
        Harness {
            server,
            bystander,
            connect: connect.to_vec(),
        }
    }

    /// A fresh connection (INFO already read), named after `input` for failure messages.
    pub async fn client(&self, input: &[u8]) -> Raw {
        Raw::connect(&self.server).await.named(show(input))
    }

    /// Sends `input` on a fresh connection and asserts the server sends exactly `answer`
    /// and then closes the connection. Then checks the bystander.
    pub async fn closes(&mut self, input: &[u8], answer: &[u8]) {
        let mut raw = self.client(input).await;
        // The server may close (even reset) before taking all of a long input.
        let _ = raw.try_send(input).await;
        let got = raw.expect_closed().await;
        assert!(
            got == answer,
            "input {}\n expected {} then close\n got {}",
            show(input),
            show(answer),
            show(&got)
        );
        self.check_bystander().await;
    }

    /// Sends `input` on a fresh connection and asserts the server answers exactly `answer`
    /// and keeps the connection open. Then checks the bystander. Returns the connection.
    pub async fn answers(&mut self, input: &[u8], answer: &[u8]) -> Raw {
        let mut raw = self.client(input).await;
        raw.send(input).await;
        raw.expect(answer).await;
        raw.assert_open().await;
        self.check_bystander().await;
        raw
    }

    /// The bystander still gets a message published by another client, and a PONG.
    pub async fn check_bystander(&mut self) {
        let mut publisher = Raw::connect(&self.server)
            .await
            .named("bystander's publisher");
        publisher
            .send(cat(&self.connect, b"PUB bystander 2\r\nok\r\nPING\r\n"))
            .await;
        publisher.expect(b"PONG\r\n").await;
        self.bystander.expect(b"MSG bystander 1 2\r\nok\r\n").await;
        self.bystander.assert_open().await;
    }

    pub async fn stop(mut self) {
        self.check_bystander().await;
        self.server.shutdown().await;
    }
}
