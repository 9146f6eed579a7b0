//! `BatchStager`: the batches a stream's leader is collecting, until each is committed,
//! refused or abandoned. Pure: the caller passes the time and each member's size, and gets
//! what to answer; nothing here is replicated (a staged batch is leader memory, lost with
//! the leader, and its publisher then gets 10176 or a timeout — never a partial batch).
//!
//! One per stream, owned by the stream's ingest task on its leader. Bounded: at most
//! `max_batches` batches, `max_messages` members each, `max_bytes` staged bytes in all, and a
//! batch idle for `idle_timeout_nanos` is dropped (nats-server's limits: 50, 1000, 10 s).

use std::collections::HashMap;

use super::error::BatchError;
use super::headers::{BatchMember, Commit};

/// The bounds of one stream's staged batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub max_batches: usize,
    pub max_messages: usize,
    pub max_bytes: usize,
    pub idle_timeout_nanos: i64,
}

impl Default for BatchLimits {
    /// nats-server's per-stream defaults (`streamDefaultMaxBatchInflightPerStream`,
    /// `…MaxBatchSize`, `…MaxBatchTimeout`); the byte bound is jetraft's, the same as a
    /// stream's ingest queue (nats-server stages in a memory store without one).
    fn default() -> Self {
        Self {
            max_batches: 50,
            max_messages: 1000,
            max_bytes: 128 << 20,
            idle_timeout_nanos: 10_000_000_000,
        }
    }
}

/// What to answer a staged member.
#[derive(Debug, PartialEq, Eq)]
pub enum StageOutcome<T> {
    /// Taken; the member's reply (if any) gets an empty message.
    Staged,
    /// The batch is complete: propose it; the committing member's reply gets the PubAck.
    Committed(CommittedBatch<T>),
    /// Refused; the batch (if any) is gone.
    Refused(BatchError),
}

/// A complete batch, in member order.
#[derive(Debug, PartialEq, Eq)]
pub struct CommittedBatch<T> {
    pub id: String,
    pub members: Vec<T>,
}

#[derive(Debug)]
struct Staged<T> {
    /// The sequence the next member must carry.
    next_seq: u64,
    members: Vec<T>,
    bytes: usize,
    last_activity_nanos: i64,
    /// The first member the stream would refuse: answered at the commit (its members are
    /// no longer kept).
    refusal: Option<BatchError>,
}

#[derive(Debug)]
pub struct BatchStager<T> {
    limits: BatchLimits,
    batches: HashMap<String, Staged<T>>,
    bytes: usize,
}

impl<T> BatchStager<T> {
    pub fn new(limits: BatchLimits) -> Self {
        Self {
            limits,
            batches: HashMap::new(),
            bytes: 0,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    pub fn staged_bytes(&self) -> usize {
        self.bytes
    }

    /// Takes one member (`item`, `size` bytes) of batch `member.id`. `check` is whether the
    /// stream would take the message on its own (its headers; answered at the commit).
    pub fn stage(
        &mut self,
        member: &BatchMember,
        item: T,
        size: usize,
        check: Result<(), BatchError>,
        now_nanos: i64,
    ) -> StageOutcome<T> {
        if member.seq == 1 {
            // A batch started again is refused and dropped, as nats-server does.
            if self.drop_batch(&member.id) {
                return StageOutcome::Refused(BatchError::Incomplete);
            }
            if self.batches.len() >= self.limits.max_batches {
                return StageOutcome::Refused(BatchError::TooManyInflight);
            }
            self.batches.insert(
                member.id.clone(),
                Staged {
                    next_seq: 1,
                    members: Vec::new(),
                    bytes: 0,
                    last_activity_nanos: now_nanos,
                    refusal: None,
                },
            );
        }
        let Some(batch) = self.batches.get(&member.id) else {
            return StageOutcome::Refused(BatchError::Incomplete);
        };
        let refusal = if member.seq != batch.next_seq {
            Some(BatchError::Incomplete)
        } else if member.seq > self.limits.max_messages as u64 {
            Some(BatchError::TooLarge {
                max: self.limits.max_messages,
            })
        } else if member.commit == Commit::Invalid {
            Some(BatchError::InvalidCommit)
        } else if self.bytes + size > self.limits.max_bytes {
            Some(BatchError::TooManyInflight)
        } else {
            None
        };
        if let Some(refusal) = refusal {
            self.drop_batch(&member.id);
            return StageOutcome::Refused(refusal);
        }
        let batch = self.batches.get_mut(&member.id).expect("checked above");
        batch.next_seq += 1;
        batch.last_activity_nanos = now_nanos;
        if member.commit != Commit::EndOfBatch {
            if let Err(error) = check {
                batch.refusal.get_or_insert(error);
            }
            if batch.refusal.is_none() {
                batch.members.push(item);
                batch.bytes += size;
                self.bytes += size;
            } else {
                // Nothing of a refused batch is stored: stop holding its members.
                self.bytes -= batch.bytes;
                batch.bytes = 0;
                batch.members.clear();
            }
        }
        if member.commit == Commit::No {
            return StageOutcome::Staged;
        }
        let batch = self.batches.remove(&member.id).expect("checked above");
        self.bytes -= batch.bytes;
        match batch.refusal {
            Some(refusal) => StageOutcome::Refused(refusal),
            None if batch.members.is_empty() => StageOutcome::Refused(BatchError::Incomplete),
            None => StageOutcome::Committed(CommittedBatch {
                id: member.id.clone(),
                members: batch.members,
            }),
        }
    }

    /// Drops the batches idle for the timeout at `now_nanos` (nats-server abandons them
    /// without a reply); returns their ids.
    pub fn abandon_idle(&mut self, now_nanos: i64) -> Vec<String> {
        let timeout = self.limits.idle_timeout_nanos;
        let idle: Vec<String> = self
            .batches
            .iter()
            .filter(|(_, batch)| now_nanos.saturating_sub(batch.last_activity_nanos) >= timeout)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &idle {
            self.drop_batch(id);
        }
        idle
    }

    /// When the next batch becomes idle for the timeout, if any is staged.
    pub fn next_idle_deadline(&self) -> Option<i64> {
        self.batches
            .values()
            .map(|batch| batch.last_activity_nanos + self.limits.idle_timeout_nanos)
            .min()
    }

    fn drop_batch(&mut self, id: &str) -> bool {
        match self.batches.remove(id) {
            Some(batch) => {
                self.bytes -= batch.bytes;
                true
            }
            None => false,
        }
    }
}
