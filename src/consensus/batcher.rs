//! `ProposalBatcher`: coalesces concurrent proposals to one group into one Raft entry. One
//! per [`RaftGroup`](super::RaftGroup) (a task plus the handle that feeds it). The task starts
//! with the group's first proposal on this node: a follower (whose proposals are forwarded)
//! and an idle stream never need it, and a node may host thousands of those.
//!
//! Why: openraft 0.9 appends, flushes and applies entries of one group one at a time — an
//! entry submitted while the previous one is being flushed waits for that flush before its
//! own append even starts — and each entry costs a trip through RaftCore, the log engine and
//! the state-machine task. So while an entry is being committed, everything proposed to the
//! group meanwhile (single commands and whole units from `propose_all`: a batch of publishes,
//! a batch of acks, a consumer's `DeliverNext`) waits here and goes out as the next entry: one
//! fsync for all of it instead of one each. An idle group still sends a lone proposal at once;
//! while proposals come in bursts, an entry waits until the burst goes quiet (the commit delay,
//! tens of microseconds against an fsync of milliseconds).
//!
//! [`MAX_IN_FLIGHT`] entries are in openraft at a time. A unit is never split: its commands
//! stay contiguous and in order in one entry. Units keep their order: they are taken from the
//! queue in order, and openraft appends entries in `client_write` order.

use std::sync::{Arc, OnceLock};

use tokio::sync::{mpsc, oneshot, watch, Semaphore};

use openraft::error::RaftError;

use super::error::ProposeError;
use super::gather::Bursts;
use super::log_store::Durable;
use super::types::{Command, Proposal, Raft, Response};

/// Entries of one group in openraft at the same time. One: openraft would only queue a second
/// entry behind the first one's flush anyway, while here it keeps absorbing proposals.
pub const MAX_IN_FLIGHT: usize = 1;
/// Largest batch, in commands.
pub const MAX_BATCH_COMMANDS: usize = 1024;
/// A batch is closed once its payloads reach this many bytes.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

/// One proposal: its commands go into one entry, contiguous and in order.
struct Pending {
    commands: Vec<Command>,
    reply: oneshot::Sender<Result<Vec<Response>, ProposeError>>,
}

impl Pending {
    fn bytes(&self) -> usize {
        self.commands.iter().map(|c| c.payload.len()).sum()
    }
}

/// Handle to a group's batching task. Dropping it ends the task once queued proposals are
/// sent.
pub(crate) struct ProposalBatcher {
    /// The task's queue, set when the first proposal starts it.
    queue: OnceLock<mpsc::UnboundedSender<Pending>>,
    raft: Raft,
    durable: watch::Receiver<Durable>,
}

impl ProposalBatcher {
    /// `durable` follows how far the group's log is fsynced here: an entry's responses wait
    /// for it (see `log_store`). The task starts with the first proposal.
    pub fn new(raft: Raft, durable: watch::Receiver<Durable>) -> ProposalBatcher {
        ProposalBatcher {
            queue: OnceLock::new(),
            raft,
            durable,
        }
    }

    /// The task's queue, starting the task on first use (from inside the runtime).
    fn queue(&self) -> &mpsc::UnboundedSender<Pending> {
        self.queue.get_or_init(|| {
            let (queue, receiver) = mpsc::unbounded_channel();
            tokio::spawn(run(self.raft.clone(), self.durable.clone(), receiver));
            queue
        })
    }

    /// Queue `command`; resolves when its entry was committed and applied.
    pub async fn propose(&self, command: Command) -> Result<Response, ProposeError> {
        self.propose_all(vec![command])
            .await?
            .pop()
            .ok_or(ProposeError::MissingResponses {
                commands: 1,
                answered: 0,
            })
    }

    /// Queue `commands` to go into one entry together; resolves with their responses when
    /// the entry was committed and applied.
    pub async fn propose_all(&self, commands: Vec<Command>) -> Result<Vec<Response>, ProposeError> {
        let (reply, response) = oneshot::channel();
        self.queue()
            .send(Pending { commands, reply })
            .map_err(|_| ProposeError::BatcherStopped)?;
        response.await.map_err(|_| ProposeError::BatcherStopped)?
    }
}

async fn run(
    raft: Raft,
    durable: watch::Receiver<Durable>,
    mut queue: mpsc::UnboundedReceiver<Pending>,
) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    // A unit taken from the queue that did not fit the previous entry.
    let mut held: Option<Pending> = None;
    // Whether the last entry held several units (see the commit delay below).
    let mut bursts = Bursts::default();
    loop {
        let first = match held.take() {
            Some(first) => first,
            None => match queue.recv().await {
                Some(first) => first,
                None => return,
            },
        };
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        // Take everything that queued up while we waited for a slot (whole units only; a
        // unit beyond the limits waits for the next entry, unless it is the first).
        let mut bytes = first.bytes();
        let mut count = first.commands.len();
        let mut batch = vec![first];
        let mut gathering = bursts.start();
        'gather: loop {
            while count < MAX_BATCH_COMMANDS && bytes < MAX_BATCH_BYTES {
                match queue.try_recv() {
                    Ok(next) => {
                        let (next_count, next_bytes) = (next.commands.len(), next.bytes());
                        if count + next_count > MAX_BATCH_COMMANDS
                            || bytes + next_bytes > MAX_BATCH_BYTES
                        {
                            held = Some(next);
                            break 'gather;
                        }
                        bytes += next_bytes;
                        count += next_count;
                        batch.push(next);
                    }
                    Err(_) => break,
                }
            }
            // Commit delay (`consensus::gather`): while proposals come in bursts (this entry
            // or the last one has several units), wait for the burst to go quiet before paying
            // for the fsync — the pull request that follows a consumer's acks, the rest of a
            // client's publishes.
            let full = count >= MAX_BATCH_COMMANDS || bytes >= MAX_BATCH_BYTES;
            if full || !gathering.pause_for_more(batch.len()).await {
                break;
            }
        }
        bursts.record(batch.len());
        let mut commands = Vec::with_capacity(count);
        let mut replies = Vec::with_capacity(batch.len());
        for pending in batch {
            replies.push((pending.commands.len(), pending.reply));
            commands.extend(pending.commands);
        }
        // `client_write_ff` hands the entry to RaftCore before returning, so batches reach the
        // log in the order they were taken from the queue; only the wait is concurrent.
        let submitted = raft.client_write_ff(Proposal { commands }).await;
        let mut durable = durable.clone();
        tokio::spawn(async move {
            let outcome = match submitted {
                Err(fatal) => Err(ProposeError::Fatal(fatal)),
                Ok(receiver) => match receiver.await {
                    Err(_) => Err(ProposeError::Dropped),
                    Ok(Err(error)) => Err(ProposeError::from(RaftError::APIError(error))),
                    Ok(Ok(written)) => Ok((written.log_id.index, written.data.responses)),
                },
            };
            drop(permit);
            // Committed and applied; acknowledged only once durable here too (this node
            // proposed it, so it leads, and its own copy may have counted before its fsync).
            let outcome = match outcome {
                Ok((index, responses)) => {
                    let reached = durable.wait_for(|d| d.index >= index || d.failed).await;
                    match reached {
                        Ok(d) if d.index >= index => Ok(responses),
                        _ => Err(ProposeError::LogWriteFailed),
                    }
                }
                Err(error) => Err(error),
            };
            deliver(replies, outcome);
        });
    }
}

type Reply = oneshot::Sender<Result<Vec<Response>, ProposeError>>;

/// Hands each unit its share of the entry's responses, in order.
fn deliver(replies: Vec<(usize, Reply)>, outcome: Result<Vec<Response>, ProposeError>) {
    match outcome {
        Ok(responses) => {
            let mut responses = responses.into_iter();
            for (count, reply) in replies {
                let share: Vec<Response> = responses.by_ref().take(count).collect();
                let result = if share.len() == count {
                    Ok(share)
                } else {
                    Err(ProposeError::MissingResponses {
                        commands: count,
                        answered: share.len(),
                    })
                };
                let _ = reply.send(result);
            }
        }
        Err(error) => {
            for (_, reply) in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}
