//! A raw NATS client for byte-exact protocol tests: it sends exactly the bytes a test gives
//! and checks exactly the bytes the server answers.
//!
//! Every wait has a deadline ([`WAIT`]) instead of a sleep, and every failure shows what was
//! actually received (escaped, e.g. `-ERR 'x'\r\n`), so a mismatch reads like the notes in
//! `protocol-behaviour.md`.

use std::io::ErrorKind;
use std::net::SocketAddr;

use jetraft::node::RunningNode;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{timeout_at, Instant};

use super::WAIT;

/// One raw connection. Bytes received but not yet matched by an `expect` stay in `pending`.
pub struct Raw {
    stream: TcpStream,
    pending: Vec<u8>,
    /// The JSON of the INFO line the server sent on connect.
    pub info: Value,
    /// That INFO line as received, CRLF included.
    pub info_line: Vec<u8>,
    /// Shown in failure messages (the input under test, typically).
    name: String,
}

/// How a read ended.
enum Read {
    Data,
    /// FIN, or a reset: either way the server is gone.
    Closed,
}

/// `bytes` as text with `\r`, `\n`, `\t` and other control or non-ASCII bytes escaped (quotes
/// are left alone, so `-ERR 'x'\r\n` reads as in the notes); long runs are elided in the middle.
pub fn show(bytes: &[u8]) -> String {
    const KEEP: usize = 160;
    fn escape(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len());
        for &b in bytes {
            match b {
                b'\r' => out.push_str("\\r"),
                b'\n' => out.push_str("\\n"),
                b'\t' => out.push_str("\\t"),
                b'\\' => out.push_str("\\\\"),
                0x20..=0x7e => out.push(char::from(b)),
                _ => out.push_str(&format!("\\x{b:02x}")),
            }
        }
        out
    }
    if bytes.len() <= 2 * KEEP {
        return escape(bytes);
    }
    format!(
        "{}…<{} bytes>…{}",
        escape(&bytes[..KEEP]),
        bytes.len() - 2 * KEEP,
        escape(&bytes[bytes.len() - KEEP..])
    )
}

impl Raw {
    /// Connects to `server` and reads its INFO line.
    pub async fn connect(server: &RunningNode) -> Raw {
        Raw::connect_to(server.client_addr()).await
    }

    pub async fn connect_to(addr: SocketAddr) -> Raw {
        let stream = timeout_at(Instant::now() + WAIT, TcpStream::connect(addr))
            .await
            .expect("timed out connecting")
            .expect("tcp connect");
        Raw::from_stream(stream).await
    }

    /// Connects with a small `SO_RCVBUF`, for a client that is meant to stop reading.
    pub async fn connect_with_recv_buffer(addr: SocketAddr, size: u32) -> Raw {
        let socket = TcpSocket::new_v4().expect("socket");
        socket.set_recv_buffer_size(size).expect("SO_RCVBUF");
        let stream = timeout_at(Instant::now() + WAIT, socket.connect(addr))
            .await
            .expect("timed out connecting")
            .expect("tcp connect");
        Raw::from_stream(stream).await
    }

    async fn from_stream(stream: TcpStream) -> Raw {
        let mut raw = Raw {
            stream,
            pending: Vec::new(),
            info: Value::Null,
            info_line: Vec::new(),
            name: "raw client".to_owned(),
        };
        raw.info_line = raw.read_line().await;
        raw.info = raw.parse_info(&raw.info_line);
        raw
    }

    /// Names this connection in failure messages.
    pub fn named(mut self, name: impl Into<String>) -> Raw {
        self.name = name.into();
        self
    }

    /// Reads one `INFO {json}` line (a trailing space before CRLF is tolerated) and parses it.
    pub async fn read_info(&mut self) -> Value {
        let line = self.read_line().await;
        self.parse_info(&line)
    }

    fn parse_info(&self, line: &[u8]) -> Value {
        let Some(json) = line.strip_prefix(b"INFO ") else {
            panic!("{}: expected an INFO line, got {}", self.name, show(line));
        };
        serde_json::from_slice(json.trim_ascii())
            .unwrap_or_else(|err| panic!("{}: INFO is not JSON ({err}): {}", self.name, show(line)))
    }

    /// Reads up to and including the next `\r\n`.
    pub async fn read_line(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(at) = self.pending.windows(2).position(|w| w == b"\r\n") {
                return self.pending.drain(..at + 2).collect();
            }
            if let Read::Closed = self.fill(deadline, "a line").await {
                panic!(
                    "{}: connection closed before a full line; got {}",
                    self.name,
                    show(&self.pending)
                );
            }
        }
    }

    /// Sends `bytes`, failing the test if the connection is already gone.
    pub async fn send(&mut self, bytes: impl AsRef<[u8]>) {
        if let Err(err) = self.try_send(bytes).await {
            panic!("{}: send failed: {err}", self.name);
        }
    }

    /// Sends `bytes`; an error means the server closed (or reset) the connection.
    pub async fn try_send(&mut self, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
        let write = async {
            self.stream.write_all(bytes.as_ref()).await?;
            self.stream.flush().await
        };
        timeout_at(Instant::now() + WAIT, write)
            .await
            .unwrap_or_else(|_| panic!("{}: timed out sending", self.name))
    }

    /// Reads until exactly `expected` has arrived next, and consumes it. Fails as soon as
    /// the bytes diverge, on close, or after [`WAIT`].
    pub async fn expect(&mut self, expected: impl AsRef<[u8]>) {
        let expected = expected.as_ref();
        let deadline = Instant::now() + WAIT;
        loop {
            let have = self.pending.len().min(expected.len());
            if self.pending[..have] != expected[..have] {
                panic!(
                    "{}: expected {}\n got {}",
                    self.name,
                    show(expected),
                    show(&self.pending)
                );
            }
            if have == expected.len() {
                self.pending.drain(..have);
                return;
            }
            let waiting = show(expected);
            if let Read::Closed = self.fill(deadline, &waiting).await {
                panic!(
                    "{}: connection closed; expected {}\n got {}",
                    self.name,
                    show(expected),
                    show(&self.pending)
                );
            }
        }
    }

    /// Reads until the server closes the connection (FIN or reset) and returns everything
    /// received that no `expect` consumed.
    pub async fn expect_closed(&mut self) -> Vec<u8> {
        let deadline = Instant::now() + WAIT;
        while let Read::Data = self.fill(deadline, "the connection to close").await {}
        std::mem::take(&mut self.pending)
    }

    /// `PING` → exactly `PONG` next: the connection is open and nothing else was pending.
    pub async fn assert_open(&mut self) {
        if let Err(err) = self.try_send(b"PING\r\n").await {
            panic!(
                "{}: connection is closed ({err}); had received {}",
                self.name,
                show(&self.pending)
            );
        }
        self.expect(b"PONG\r\n").await;
    }

    /// Takes whatever has been received so far without waiting.
    pub fn take_pending(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    /// One read into `pending`.
    async fn fill(&mut self, deadline: Instant, waiting_for: &str) -> Read {
        // Read straight into `pending` (a stack buffer would bloat every future using this).
        self.pending.reserve(64 * 1024);
        match timeout_at(deadline, self.stream.read_buf(&mut self.pending)).await {
            Err(_) => panic!(
                "{}: timed out waiting for {waiting_for}; got {}",
                self.name,
                show(&self.pending)
            ),
            Ok(Ok(0)) => Read::Closed,
            Ok(Ok(_)) => Read::Data,
            Ok(Err(err))
                if matches!(
                    err.kind(),
                    ErrorKind::ConnectionReset
                        | ErrorKind::ConnectionAborted
                        | ErrorKind::BrokenPipe
                ) =>
            {
                Read::Closed
            }
            Ok(Err(err)) => panic!("{}: read failed: {err}", self.name),
        }
    }
}
