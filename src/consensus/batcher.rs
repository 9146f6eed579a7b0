//! [`ProposalBatcher`]: coalesces concurrent single-command proposals to one group into one Raft
//! entry. One per [`RaftGroup`](super::RaftGroup) (a task plus the handle that feeds it).
//!
//! Why: openraft 0.9 appends, flushes and applies entries of one group one `client_write` at a
//! time, and each entry costs a trip through RaftCore, the log engine and the state-machine
//! task. Packing the commands that arrive while the previous batch is being written into one
//! [`Proposal`] makes a busy group pay that cost once per batch instead of once per command,
//! while an idle group still sends a lone command at once (no timer, no added latency).
//!
//! Up to [`MAX_IN_FLIGHT`] batches are in openraft at a time, so a batch can be appended while
//! the previous one is applied. Commands keep their order: a batch is taken from the queue in
//! order, and openraft appends entries in `client_write` order.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use openraft::error::RaftError;

use super::group::ProposeError;
use super::types::{Command, Proposal, Raft, Response};

/// Batches of one group in openraft at the same time.
pub const MAX_IN_FLIGHT: usize = 4;
/// Largest batch, in commands.
pub const MAX_BATCH_COMMANDS: usize = 1024;
/// A batch is closed once its payloads reach this many bytes.
pub const MAX_BATCH_BYTES: usize = 1 << 20;

struct Pending {
    command: Command,
    reply: oneshot::Sender<Result<Response, ProposeError>>,
}

/// Handle to a group's batching task. Dropping it ends the task once queued proposals are
/// sent.
pub(crate) struct ProposalBatcher {
    queue: mpsc::UnboundedSender<Pending>,
}

impl ProposalBatcher {
    pub fn start(raft: Raft) -> ProposalBatcher {
        let (queue, receiver) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, receiver));
        ProposalBatcher { queue }
    }

    /// Queue `command`; resolves when its batch was committed and applied.
    pub async fn propose(&self, command: Command) -> Result<Response, ProposeError> {
        let (reply, response) = oneshot::channel();
        self.queue
            .send(Pending { command, reply })
            .map_err(|_| ProposeError::Stopped("proposal batcher stopped".into()))?;
        response
            .await
            .map_err(|_| ProposeError::Stopped("proposal batcher stopped".into()))?
    }
}

async fn run(raft: Raft, mut queue: mpsc::UnboundedReceiver<Pending>) {
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    while let Some(first) = queue.recv().await {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        // Take everything that queued up while we waited for a slot.
        let mut bytes = first.command.payload.len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_COMMANDS && bytes < MAX_BATCH_BYTES {
            match queue.try_recv() {
                Ok(next) => {
                    bytes += next.command.payload.len();
                    batch.push(next);
                }
                Err(_) => break,
            }
        }
        let (commands, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|pending| (pending.command, pending.reply))
            .unzip();
        // `client_write_ff` hands the entry to RaftCore before returning, so batches reach the
        // log in the order they were taken from the queue; only the wait is concurrent.
        let submitted = raft.client_write_ff(Proposal { commands }).await;
        tokio::spawn(async move {
            let outcome = match submitted {
                Err(fatal) => Err(ProposeError::Stopped(fatal.to_string())),
                Ok(receiver) => match receiver.await {
                    Err(_) => Err(ProposeError::Stopped(
                        "raft core dropped the proposal".into(),
                    )),
                    Ok(Err(error)) => Err(ProposeError::from(RaftError::APIError(error))),
                    Ok(Ok(written)) => Ok(written.data.responses),
                },
            };
            drop(permit);
            deliver(replies, outcome);
        });
    }
}

fn deliver(
    replies: Vec<oneshot::Sender<Result<Response, ProposeError>>>,
    outcome: Result<Vec<Response>, ProposeError>,
) {
    match outcome {
        Ok(responses) => {
            let mut responses = responses.into_iter();
            for reply in replies {
                let response = responses.next().ok_or_else(|| {
                    ProposeError::Rejected("state machine returned fewer responses".into())
                });
                let _ = reply.send(response);
            }
        }
        Err(error) => {
            for reply in replies {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}
