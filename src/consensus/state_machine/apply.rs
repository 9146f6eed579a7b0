//! Applying committed entries to a [`GroupStateMachine`]: one machine transaction per
//! openraft `apply` call, written behind as one sled batch (the module docs of [`super`]).

use openraft::{AnyError, EntryPayload, StorageIOError};

use super::{sm_write_err, GroupStateMachine};
use crate::consensus::machine::{ApplyPosition, MachineTxn};
use crate::consensus::raft_codec;
use crate::consensus::state_db::{self, KEY_APPLIED, KEY_MEMBERSHIP, SPACE_RAFT};
use crate::consensus::types::{Entry, ProposalResponse, StorageError, StoredMembership};

impl GroupStateMachine {
    /// Apply `entries` (openraft's `apply`).
    pub(super) fn apply_entries(
        &mut self,
        entries: impl IntoIterator<Item = Entry>,
    ) -> Result<Vec<ProposalResponse>, StorageError> {
        let mut replies = Vec::new();
        let mut txn = MachineTxn::new(&self.view);
        let mut last_applied = None;
        let mut new_membership = None;
        let mut applied_bytes = 0u64;
        for entry in entries {
            let log_id = entry.log_id;
            match entry.payload {
                EntryPayload::Blank => replies.push(ProposalResponse::default()),
                EntryPayload::Normal(proposal) => {
                    applied_bytes += proposal
                        .commands
                        .iter()
                        .map(|command| command.payload.len() as u64)
                        .sum::<u64>();
                    let mut responses = Vec::with_capacity(proposal.commands.len());
                    for (position, command) in proposal.commands.iter().enumerate() {
                        let at = ApplyPosition {
                            index: log_id.index,
                            position: position as u32,
                        };
                        let response = self
                            .machine
                            .apply(at, command, &mut txn)
                            .map_err(|e| StorageIOError::apply(log_id, AnyError::new(&e)))?;
                        responses.push(response);
                    }
                    replies.push(ProposalResponse { responses });
                }
                EntryPayload::Membership(membership) => {
                    new_membership = Some(StoredMembership::new(Some(log_id), membership));
                    replies.push(ProposalResponse::default());
                }
            }
            last_applied = Some(log_id);
        }
        let Some(last_log_id) = last_applied else {
            return Ok(replies);
        };
        self.machine
            .finish(&mut txn)
            .map_err(|e| StorageIOError::apply(last_log_id, AnyError::new(&e)))?;
        let (mut writes, files) = txn.into_parts();
        // A file no key points into any more (a compacted segment, whose blocks' keys were
        // moved, not removed) goes only at the next sync of sled: it asks for a round as
        // removed keys do, or it waited for whatever sync came next, if any.
        let removed_keys = writes.iter().filter(|(_, value)| value.is_none()).count() as u64
            + files.unlink_after_sync.len() as u64 * crate::consensus::log_growth::REMOVED_KEYS;
        writes.push((
            state_db::key(self.group, SPACE_RAFT, KEY_APPLIED),
            Some(raft_codec::encode(&last_applied)),
        ));
        if let Some(membership) = &new_membership {
            writes.push((
                state_db::key(self.group, SPACE_RAFT, KEY_MEMBERSHIP),
                Some(raft_codec::encode(membership)),
            ));
        }
        // Written behind: the machine's in-memory state already answers, and every reader of
        // sled flushes the queue first (state_writer.rs).
        let ticket = self
            .db
            .writer()
            .submit_with(self.owner, writes, files)
            .map_err(sm_write_err)?;
        self.machine.submitted(ticket);
        self.applied = last_applied;
        if let Some(membership) = new_membership {
            self.membership = membership;
        }
        if let Some(reason) = self.growth.applied(applied_bytes, removed_keys) {
            if let Some(compactor) = &self.compactor {
                compactor.request(self.group, reason);
            }
        }
        Ok(replies)
    }
}
