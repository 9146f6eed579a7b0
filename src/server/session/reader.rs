//! The read loop of one connection: reads from the socket, decodes operations and executes
//! them. Messages it publishes are queued straight into subscribers' outbound buffers;
//! their writers are woken once per read, not once per message.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use tokio::io::AsyncReadExt;
use tokio::net::tcp::OwnedReadHalf;

use super::errors;
use crate::server::client::{ClientHandle, CloseReason};
use crate::server::dispatch::Dispatch;
use crate::server::router::Matches;
use crate::server::stats::ServerStats;
use crate::server::subscription::{Subscriber, Subscription};
use crate::server::ServerShared;
use crate::subject::cache::MatchCache;
use crate::subject::validate::{is_valid_queue, is_valid_subject};
use crate::wire::encoder;
use crate::wire::handshake::{ConnectOptions, ServerInfo};
use crate::wire::{ClientOp, Decoder};

const READ_CHUNK: usize = 64 * 1024;
const MATCH_CACHE_ENTRIES: usize = 1024;
const MIN_PRUNE_AT: usize = 64;
/// Longest a publisher pauses per read for backed-up receivers (nats-server stalls a fast
/// producer for a few milliseconds in the same situation).
const MAX_PRODUCER_PAUSE: std::time::Duration = std::time::Duration::from_millis(10);
/// The only account jetraft has; nats-server names its default account `$G`.
const GLOBAL_ACCOUNT: &str = "$G";

/// Operation handling stopped because the connection is closing.
pub(super) struct Closing;

/// Per-connection state owned by the read loop.
pub(super) struct Reader {
    pub(super) shared: Arc<ServerShared>,
    pub(super) client: Arc<ClientHandle>,
    /// `None` until CONNECT arrives.
    pub(super) options: Option<ConnectOptions>,
    pub(super) subs: HashMap<Bytes, Arc<Subscription>>,
    pub(super) cache: MatchCache<Matches>,
    /// Writers to wake at the end of this read.
    pub(super) dispatch: Dispatch,
    pub(super) in_msgs: u64,
    pub(super) in_bytes: u64,
    prune_subs_at: usize,
    /// This connection's INFO, re-sent once after the first PONG (see `answer_ping`).
    info: Option<ServerInfo>,
}

impl Reader {
    pub(super) fn new(
        shared: Arc<ServerShared>,
        client: Arc<ClientHandle>,
        info: ServerInfo,
    ) -> Self {
        Reader {
            shared,
            client,
            options: None,
            subs: HashMap::new(),
            cache: MatchCache::new(MATCH_CACHE_ENTRIES),
            dispatch: Dispatch::default(),
            in_msgs: 0,
            in_bytes: 0,
            prune_subs_at: MIN_PRUNE_AT,
            info: Some(info),
        }
    }

    pub(super) async fn run(mut self, mut socket: OwnedReadHalf) {
        let config = self.shared.config.clone();
        let mut decoder = Decoder::new(config.max_control_line, config.max_payload);
        let mut buf = BytesMut::with_capacity(READ_CHUNK);
        let auth_deadline = tokio::time::Instant::now() + config.auth_timeout;
        let auth_required = config.auth.required();

        'read: loop {
            if buf.capacity() - buf.len() < READ_CHUNK / 4 {
                buf.reserve(READ_CHUNK);
            }
            let awaiting_auth = auth_required && self.options.is_none();
            let read = tokio::select! {
                biased;
                _ = self.client.closed.cancelled() => break,
                _ = tokio::time::sleep_until(auth_deadline), if awaiting_auth => {
                    self.client.close_with_err(
                        Some(errors::AUTHENTICATION_TIMEOUT),
                        CloseReason::AuthenticationTimeout,
                    );
                    break;
                }
                read = socket.read_buf(&mut buf) => read,
            };
            match read {
                Ok(0) => {
                    self.client.close(CloseReason::ClientClosed);
                    break;
                }
                Ok(_) => {}
                Err(err) => {
                    tracing::debug!(cid = self.client.id, "read error: {err}");
                    self.client.close(CloseReason::ReadError);
                    break;
                }
            }
            loop {
                // With auth, nats-server treats any first byte but `C`/`c` as an auth
                // violation, before it even knows the operation.
                let awaiting_auth = auth_required && self.options.is_none();
                if awaiting_auth && buf.first().is_some_and(|b| !matches!(b, b'C' | b'c')) {
                    self.flush_batch();
                    self.client.close_with_err(
                        Some(errors::AUTHORIZATION_VIOLATION),
                        CloseReason::AuthorizationViolation,
                    );
                    break 'read;
                }
                match decoder.decode(&mut buf) {
                    Ok(Some(op)) => {
                        if self.execute(op).is_err() {
                            self.flush_batch();
                            break 'read;
                        }
                    }
                    Ok(None) => break,
                    Err(err) => {
                        tracing::debug!(cid = self.client.id, "protocol error: {err}");
                        let (text, reason) = errors::for_decode_error(&err);
                        self.flush_batch();
                        self.client.close_with_err(text, reason);
                        break 'read;
                    }
                }
            }
            self.flush_batch();
            self.dispatch.pause_for_backed_up(MAX_PRODUCER_PAUSE).await;
        }
        self.unsubscribe_all();
    }

    fn execute(&mut self, op: ClientOp) -> Result<(), Closing> {
        let authorized = self.options.is_some() || !self.shared.config.auth.required();
        if !authorized && !matches!(op, ClientOp::Connect(_)) {
            self.client.close_with_err(
                Some(errors::AUTHORIZATION_VIOLATION),
                CloseReason::AuthorizationViolation,
            );
            return Err(Closing);
        }
        match op {
            ClientOp::Connect(json) => self.connect(&json)?,
            ClientOp::Pub {
                subject,
                reply,
                headers,
                payload,
            } => self.publish(subject, reply, headers, payload)?,
            ClientOp::Sub {
                subject,
                queue,
                sid,
            } => self.subscribe(subject, queue, sid),
            ClientOp::Unsub { sid, max } => self.unsubscribe(sid, max),
            ClientOp::Ping => self.answer_ping(),
            ClientOp::Pong => self.client.record_pong(),
            ClientOp::Ignored => {}
        }
        Ok(())
    }

    /// PONG; after the first one, protocol-1 clients get the INFO again with `connect_info`
    /// (as nats-server does), which tells them the connection is fully set up.
    fn answer_ping(&mut self) {
        self.client.queue_protocol(encoder::PONG);
        if self.options.as_ref().is_some_and(|o| o.protocol >= 1) {
            if let Some(mut info) = self.info.take() {
                info.connect_info = true;
                info.remote_account = Some(GLOBAL_ACCOUNT.to_owned());
                self.client.queue_protocol(&super::info_line(&info));
            }
        }
    }

    /// `+OK` after an operation, for clients that asked for verbose mode.
    pub(super) fn ack_if_verbose(&self) {
        if self.options.as_ref().is_none_or(|o| o.verbose) {
            self.client.queue_protocol(encoder::OK);
        }
    }

    fn subscribe(&mut self, subject: Bytes, queue: Option<Bytes>, sid: Bytes) {
        if !is_valid_subject(&subject) || !queue.as_deref().is_none_or(is_valid_queue) {
            self.client.send_err(errors::INVALID_SUBJECT);
            return;
        }
        if self.subs.get(&sid).is_some_and(|sub| !sub.is_removed()) {
            // nats-server ignores a SUB that reuses a live sid.
            self.ack_if_verbose();
            return;
        }
        let sub = Arc::new(Subscription::new(
            Subscriber::Client(self.client.clone()),
            subject,
            queue,
            sid.clone(),
        ));
        self.shared.router.subscribe(sub.clone());
        self.subs.insert(sid, sub);
        self.ack_if_verbose();
    }

    fn unsubscribe(&mut self, sid: Bytes, max: Option<u64>) {
        if let Some(sub) = self.subs.get(&sid) {
            let keep = matches!(max, Some(max) if max > 0 && sub.limit_to(max));
            if !keep {
                self.shared.router.unsubscribe(sub);
                self.subs.remove(&sid);
            }
        }
        self.ack_if_verbose();
    }

    /// Wakes the writers that got messages during this read and publishes the counters.
    fn flush_batch(&mut self) {
        self.dispatch.wake_all(&self.shared.stats);
        if self.in_msgs > 0 {
            let stats = &self.shared.stats;
            ServerStats::add(&stats.in_msgs, self.in_msgs);
            ServerStats::add(&stats.in_bytes, self.in_bytes);
            self.in_msgs = 0;
            self.in_bytes = 0;
        }
        // Subscriptions that reached their auto-unsubscribe limit (removed from the router by
        // whichever connection delivered the last message) leave the sid map here, amortised.
        if self.subs.len() >= self.prune_subs_at {
            self.subs.retain(|_, sub| !sub.is_removed());
            self.prune_subs_at = (self.subs.len() * 2).max(MIN_PRUNE_AT);
        }
    }

    fn unsubscribe_all(&mut self) {
        for (_, sub) in self.subs.drain() {
            self.shared.router.unsubscribe(&sub);
        }
    }
}
