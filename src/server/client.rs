//! The shared half of a client connection: its outbound buffer and its close signal.
//!
//! One `ClientHandle` per connection. Publishers on any connection append messages for this
//! client straight into its outbound queue (under a short, non-async lock; chunks of about
//! 64 KiB, `out_queue.rs`), and its writer task takes what is queued and writes it to the
//! socket — so many messages become one (vectored) write.
//! The buffer is bounded by `max_pending`: a client that stops reading is cut off as a slow
//! consumer instead of growing the server's memory.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use bytes::BytesMut;
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::out_queue::{Batch, OutQueue};
use super::stats::ServerStats;
use crate::wire::encoder::{self, Delivery};

/// Why a connection ended; logged at info level on disconnect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    ClientClosed,
    ReadError,
    WriteError,
    ProtocolViolation,
    AuthorizationViolation,
    AuthenticationTimeout,
    MaxPayloadExceeded,
    MaxControlLineExceeded,
    MaxConnectionsExceeded,
    SlowConsumer,
    StaleConnection,
    ServerShutdown,
}

impl CloseReason {
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::ClientClosed => "Client Closed",
            CloseReason::ReadError => "Read Error",
            CloseReason::WriteError => "Write Error",
            CloseReason::ProtocolViolation => "Protocol Violation",
            CloseReason::AuthorizationViolation => "Authorization Violation",
            CloseReason::AuthenticationTimeout => "Authentication Timeout",
            CloseReason::MaxPayloadExceeded => "Maximum Message Payload Exceeded",
            CloseReason::MaxControlLineExceeded => "Maximum Control Line Exceeded",
            CloseReason::MaxConnectionsExceeded => "Maximum Connections Exceeded",
            CloseReason::SlowConsumer => "Slow Consumer (Pending Bytes)",
            CloseReason::StaleConnection => "Stale Connection",
            CloseReason::ServerShutdown => "Server Shutdown",
        }
    }
}

#[derive(Debug, Default)]
struct Outbound {
    buf: OutQueue,
    /// Set once; the writer flushes what is queued (unless the reason discards it) and closes.
    closing: Option<CloseReason>,
}

/// What queuing a delivery asks of the publisher.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Queued {
    /// The message is in the buffer (false: the client is closing or was just cut off).
    pub queued: bool,
    /// The buffer was empty: the writer must be woken.
    pub wake: bool,
    /// More than half of `max_pending` is queued: the publisher should pause briefly
    /// (see [`ClientHandle::wait_drained`]) so a fast producer cannot push a consumer that
    /// is merely slower than it into being cut off.
    pub backed_up: bool,
}

/// What the writer task should do next.
#[derive(Debug)]
pub enum WriterWork {
    Write(Batch),
    Close(CloseReason),
    Idle,
}

#[derive(Debug)]
pub struct ClientHandle {
    pub id: u64,
    outbound: Mutex<Outbound>,
    wake_writer: Notify,
    /// Notified by the writer after every write, for publishers pausing on a backed-up client.
    drained: Notify,
    /// Cancelled when the connection is closing: stops the read loop.
    pub closed: CancellationToken,
    max_pending: usize,
    /// Set by CONNECT: deliver HMSG to this client (otherwise headers are stripped).
    headers: AtomicBool,
    pings_outstanding: AtomicU32,
    stats: Arc<ServerStats>,
}

impl ClientHandle {
    pub fn new(id: u64, max_pending: usize, stats: Arc<ServerStats>) -> Self {
        ClientHandle {
            id,
            outbound: Mutex::new(Outbound::default()),
            wake_writer: Notify::new(),
            drained: Notify::new(),
            closed: CancellationToken::new(),
            max_pending,
            headers: AtomicBool::new(false),
            pings_outstanding: AtomicU32::new(0),
            stats,
        }
    }

    pub fn set_headers(&self, supported: bool) {
        self.headers.store(supported, Ordering::Relaxed);
    }

    /// Queues a MSG/HMSG for subscription `sid`. The caller batches wake-ups with
    /// [`ClientHandle::wake`] and pauses on backed-up clients.
    pub fn queue_delivery(&self, sid: &[u8], msg: &Delivery<'_>) -> Queued {
        let msg = if msg.headers.is_some() && !self.headers.load(Ordering::Relaxed) {
            // A client that did not announce header support gets the payload alone.
            Delivery {
                headers: None,
                ..*msg
            }
        } else {
            *msg
        };
        let mut out = self.outbound.lock();
        if out.closing.is_some() {
            return Queued::default();
        }
        let was_empty = out.buf.is_empty();
        out.buf.append(encoder::delivery_len(sid, &msg), |buf| {
            encoder::write_delivery(buf, sid, &msg)
        });
        if out.buf.len() > self.max_pending {
            self.cut_off_slow_consumer(&mut out);
            return Queued::default();
        }
        Queued {
            queued: true,
            wake: was_empty,
            backed_up: out.buf.len() > self.max_pending / 2,
        }
    }

    /// Waits (at most `limit`) until this client's queued bytes drop to half of
    /// `max_pending` or it closes: the producer-side pause nats-server calls a stall.
    pub async fn wait_drained(&self, limit: std::time::Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let drained = self.drained.notified();
            {
                let out = self.outbound.lock();
                if out.closing.is_some() || out.buf.len() <= self.max_pending / 2 {
                    return;
                }
            }
            if tokio::time::timeout_at(deadline, drained).await.is_err() {
                return;
            }
        }
    }

    /// Called by the writer after each write.
    pub fn notify_drained(&self) {
        self.drained.notify_waiters();
    }

    /// Queues protocol bytes (PONG, +OK, INFO, PING) and wakes the writer.
    pub fn queue_protocol(&self, bytes: &[u8]) {
        let mut out = self.outbound.lock();
        if out.closing.is_some() {
            return;
        }
        out.buf
            .append(bytes.len(), |buf| buf.extend_from_slice(bytes));
        if out.buf.len() > self.max_pending {
            self.cut_off_slow_consumer(&mut out);
            return;
        }
        drop(out);
        self.wake();
    }

    /// Sends `-ERR '<text>'` and keeps the connection open.
    pub fn send_err(&self, text: &str) {
        let mut bytes = BytesMut::new();
        encoder::write_err(&mut bytes, text);
        self.queue_protocol(&bytes);
    }

    /// Sends `-ERR '<text>'` (if given), then closes once it is written.
    pub fn close_with_err(&self, text: Option<&str>, reason: CloseReason) {
        let mut out = self.outbound.lock();
        if out.closing.is_some() {
            return;
        }
        if let Some(text) = text {
            out.buf
                .append(encoder::err_len(text), |buf| encoder::write_err(buf, text));
        }
        out.closing = Some(reason);
        drop(out);
        self.closed.cancel();
        self.wake();
    }

    /// Closes without another word (the client went away, or the server is stopping).
    pub fn close(&self, reason: CloseReason) {
        self.close_with_err(None, reason);
    }

    pub fn wake(&self) {
        self.wake_writer.notify_one();
    }

    pub async fn wait_for_work(&self) {
        self.wake_writer.notified().await;
    }

    /// Takes everything queued so far, for the writer task.
    pub fn take_work(&self) -> WriterWork {
        let mut out = self.outbound.lock();
        if !out.buf.is_empty() {
            return WriterWork::Write(out.buf.take());
        }
        match out.closing {
            Some(reason) => WriterWork::Close(reason),
            None => WriterWork::Idle,
        }
    }

    pub fn closing_reason(&self) -> Option<CloseReason> {
        self.outbound.lock().closing
    }

    /// The server's keep-alive: returns false if too many PINGs went unanswered.
    pub fn record_ping_sent(&self, ping_max: u32) -> bool {
        self.pings_outstanding.fetch_add(1, Ordering::AcqRel) < ping_max
    }

    pub fn record_pong(&self) {
        self.pings_outstanding.store(0, Ordering::Release);
    }

    fn cut_off_slow_consumer(&self, out: &mut Outbound) {
        // nats-server drops what is pending and closes without an -ERR.
        out.buf = OutQueue::default();
        out.closing = Some(CloseReason::SlowConsumer);
        ServerStats::add(&self.stats.slow_consumers, 1);
        tracing::warn!(cid = self.id, "slow consumer detected, closing connection");
        self.closed.cancel();
        self.wake_writer.notify_one();
    }
}
