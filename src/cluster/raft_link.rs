//! [`RaftLinks`]: the Raft RPCs of every group to one peer travel on one `RaftLink` stream,
//! the client side of `ClusterService::raft_link`.
//!
//! A unary gRPC call per RPC is an HTTP/2 stream per RPC. A call its caller gives up on (a
//! heartbeat after 100 ms on a loaded node) resets its stream, and when its answer arrives for
//! a stream h2 no longer remembers, h2 resets that one itself; after 1024 such resets of its
//! own, counted over the connection's life (h2's `max_local_error_reset_streams`, which tonic's
//! client does not let us set), h2 closes the connection with `GOAWAY`, and every group's RPCs,
//! the pings and the core-NATS route to that peer fail with it. Measured with 1000 busy R3
//! streams: a connection lost every few seconds on every node, and publishes unacknowledged
//! for the whole reconnect. On a link a call given up is only forgotten (its answer finds no
//! caller), and the calls queued while one message is written go out together in the next.
//!
//! A link opens its stream on its first call and again on the first call after the stream
//! ended. When opening fails it waits a backoff, failing at once the calls made meanwhile, as
//! for any unreachable peer (openraft backs off and retries).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::transport::Channel;

use super::proto::{self, cluster_client::ClusterClient};

/// Calls of one `RaftCalls` message: about this many bytes of payload at most (a larger call
/// goes alone).
const BATCH_BYTES: usize = 1 << 20;
/// Messages written ahead on the stream; past them calls wait in the link's queue, and go out
/// together in the next message.
const MESSAGES_AHEAD: usize = 4;
/// Backoff after the stream could not be opened: from this, doubling up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(50);
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// What a call costs beside its payload when batching.
const CALL_OVERHEAD: usize = 32;

/// Why a call got no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LinkError {
    #[error("no answer from the peer within {0:?}")]
    TimedOut(Duration),
    #[error("the stream to the peer ended before it answered")]
    Lost,
    #[error("the link to the peer is closed")]
    Closed,
}

/// The node's links, one per peer address (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct RaftLinks {
    links: Arc<Mutex<HashMap<String, Arc<RaftLink>>>>,
    shutdown: CancellationToken,
}

impl RaftLinks {
    /// Links whose streams end when `shutdown` is cancelled.
    pub fn new(shutdown: CancellationToken) -> RaftLinks {
        RaftLinks {
            links: Arc::default(),
            shutdown,
        }
    }

    /// The link to the peer at `addr`, started over `client` the first time.
    pub fn link(&self, addr: &str, client: ClusterClient<Channel>) -> Arc<RaftLink> {
        let mut links = self.links.lock();
        if let Some(link) = links.get(addr) {
            return link.clone();
        }
        let link = RaftLink::start(client, self.shutdown.clone());
        links.insert(addr.to_string(), link.clone());
        link
    }
}

/// The link to one peer. Its task ends once the link is dropped or the node shuts down.
#[derive(Debug)]
pub struct RaftLink {
    outgoing: mpsc::UnboundedSender<proto::RaftCall>,
    shared: Arc<Shared>,
    next_id: AtomicU64,
}

#[derive(Debug, Default)]
struct Shared {
    /// Calls sent or queued, by id, with where their answer goes.
    pending: Mutex<HashMap<u64, oneshot::Sender<proto::RaftReply>>>,
    /// Streams opened or tried so far.
    streams: AtomicU64,
}

impl Shared {
    fn answer(&self, answer: proto::RaftAnswer) {
        let caller = self.pending.lock().remove(&answer.id);
        if let (Some(caller), Some(reply)) = (caller, answer.reply) {
            let _ = caller.send(reply);
        }
    }

    /// Fails every call waiting (its caller sees [`LinkError::Lost`]).
    fn fail_all(&self) {
        self.pending.lock().clear();
    }
}

/// Forgets a call its caller stops waiting for unanswered (timed out, or the call dropped);
/// an answered call was taken out of `pending` by its answer.
struct Forget<'a> {
    pending: &'a Mutex<HashMap<u64, oneshot::Sender<proto::RaftReply>>>,
    id: u64,
    answered: bool,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if !self.answered {
            self.pending.lock().remove(&self.id);
        }
    }
}

impl RaftLink {
    fn start(client: ClusterClient<Channel>, shutdown: CancellationToken) -> Arc<RaftLink> {
        let (outgoing, queued) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared::default());
        tokio::spawn(run(shared.clone(), client, queued, shutdown));
        Arc::new(RaftLink {
            outgoing,
            shared,
            next_id: AtomicU64::new(0),
        })
    }

    /// Sends `request` and waits up to `timeout` for its answer.
    pub async fn call(
        &self,
        request: proto::RaftRequest,
        timeout: Duration,
    ) -> Result<proto::RaftReply, LinkError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answered, answer) = oneshot::channel();
        self.shared.pending.lock().insert(id, answered);
        let mut forget = Forget {
            pending: &self.shared.pending,
            id,
            answered: false,
        };
        let call = proto::RaftCall {
            id,
            request: Some(request),
        };
        if self.outgoing.send(call).is_err() {
            return Err(LinkError::Closed);
        }
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => {
                forget.answered = true;
                Ok(reply)
            }
            Ok(Err(_)) => Err(LinkError::Lost),
            Err(_) => Err(LinkError::TimedOut(timeout)),
        }
    }

    /// How many streams the link has opened or tried to (a test's view of reconnects).
    pub fn streams_opened(&self) -> u64 {
        self.shared.streams.load(Ordering::Relaxed)
    }
}

/// The link's task: a stream at a time, opened on demand (see the module docs).
async fn run(
    shared: Arc<Shared>,
    client: ClusterClient<Channel>,
    mut queued: mpsc::UnboundedReceiver<proto::RaftCall>,
    shutdown: CancellationToken,
) {
    let mut backoff = MIN_BACKOFF;
    let mut retry_at: Option<Instant> = None;
    loop {
        let first = tokio::select! {
            _ = shutdown.cancelled() => break,
            call = queued.recv() => match call {
                Some(call) => call,
                None => break,
            },
        };
        if retry_at.is_some_and(|at| Instant::now() < at) {
            shared.pending.lock().remove(&first.id);
            continue;
        }
        let answered = stream(&shared, client.clone(), first, &mut queued, &shutdown).await;
        shared.fail_all();
        if answered {
            backoff = MIN_BACKOFF;
            retry_at = None;
        } else {
            retry_at = Some(Instant::now() + backoff);
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
    shared.fail_all();
}

/// One stream: opens it with `first` and whatever else is queued, then writes calls and reads
/// answers until either side ends. Returns whether the peer answered anything.
async fn stream(
    shared: &Shared,
    mut client: ClusterClient<Channel>,
    first: proto::RaftCall,
    queued: &mut mpsc::UnboundedReceiver<proto::RaftCall>,
    shutdown: &CancellationToken,
) -> bool {
    let (to_peer, calls) = mpsc::channel(MESSAGES_AHEAD);
    if let Some(batch) = gather(shared, first, queued) {
        let _ = to_peer.try_send(batch);
    }
    shared.streams.fetch_add(1, Ordering::Relaxed);
    let mut answers = match client.raft_link(ReceiverStream::new(calls)).await {
        Ok(answers) => answers.into_inner(),
        Err(status) => {
            tracing::debug!(%status, "raft link: no stream to the peer");
            return false;
        }
    };
    let mut answered = false;
    let sending = async {
        while let Some(call) = queued.recv().await {
            let Some(batch) = gather(shared, call, queued) else {
                continue;
            };
            if to_peer.send(batch).await.is_err() {
                break;
            }
        }
    };
    let receiving = async {
        loop {
            match answers.message().await {
                Ok(Some(batch)) => {
                    answered = true;
                    batch.answers.into_iter().for_each(|a| shared.answer(a));
                }
                Ok(None) => break,
                Err(status) => {
                    tracing::debug!(%status, "raft link: the stream to the peer failed");
                    break;
                }
            }
        }
    };
    tokio::select! {
        _ = sending => {}
        _ = receiving => {}
        _ = shutdown.cancelled() => {}
    }
    answered
}

/// `first` and the calls queued behind it, up to [`BATCH_BYTES`], less those whose callers
/// stopped waiting; None when none is left.
fn gather(
    shared: &Shared,
    first: proto::RaftCall,
    queued: &mut mpsc::UnboundedReceiver<proto::RaftCall>,
) -> Option<proto::RaftCalls> {
    let mut bytes = size(&first);
    let mut calls = vec![first];
    while bytes < BATCH_BYTES {
        let Ok(call) = queued.try_recv() else {
            break;
        };
        bytes += size(&call);
        calls.push(call);
    }
    let pending = shared.pending.lock();
    calls.retain(|call| pending.contains_key(&call.id));
    drop(pending);
    (!calls.is_empty()).then_some(proto::RaftCalls { calls })
}

fn size(call: &proto::RaftCall) -> usize {
    CALL_OVERHEAD + call.request.as_ref().map_or(0, |r| r.payload.len())
}

#[cfg(test)]
#[path = "raft_link_tests.rs"]
mod tests;
