//! Storing a message copied from another stream (a mirror's origin or a source): none of a
//! publish's header checks (the origin made them when it stored the message; a copy is not
//! a publish), but this stream's own `discard: new` limits before and its limits after, as
//! nats-server stores mirrored and sourced messages. A mirror keeps the origin's sequence
//! numbers (skipping the origin's gaps); a source appends at the next sequence.
//!
//! Which origin messages arrive, and only once, is the group's business
//! (`jscore::group` with `jscore::sourcing`'s replicated positions).

use super::append::AppendOutcome;
use super::error::AppendError;
use super::message::StoredMsg;
use super::state::StreamState;

impl StreamState {
    /// Stores `msg` at the origin's sequence `origin_seq`, leaving the sequences between
    /// this stream's last and it unused. `Duplicate` when the stream is already past it.
    pub fn store_mirrored(
        &mut self,
        origin_seq: u64,
        msg: StoredMsg,
    ) -> Result<AppendOutcome, AppendError> {
        if origin_seq <= self.last_seq {
            return Ok(AppendOutcome::Duplicate { seq: origin_seq });
        }
        self.check_copy_limits(&msg)?;
        if origin_seq > self.last_seq + 1 {
            self.last_seq = origin_seq - 1;
            if self.messages.is_empty() {
                self.first_seq = origin_seq;
            }
        }
        Ok(self.store_copy(msg))
    }

    /// Stores `msg` at this stream's next sequence.
    pub fn store_sourced(&mut self, msg: StoredMsg) -> Result<AppendOutcome, AppendError> {
        self.check_copy_limits(&msg)?;
        Ok(self.store_copy(msg))
    }

    fn check_copy_limits(&self, msg: &StoredMsg) -> Result<(), AppendError> {
        let headers_len = msg.headers.as_ref().map_or(0, |h| h.len());
        self.check_discard_new(&msg.subject, headers_len, msg.payload.len())
    }

    /// Stores `msg`'s metadata; its body goes to the message blocks through the group's
    /// state machine, as an append's does (`jetstream::stream_machine`).
    fn store_copy(&mut self, msg: StoredMsg) -> AppendOutcome {
        let subject = msg.subject.clone();
        let last_subject_seq = self
            .config
            .republish
            .is_some()
            .then(|| self.subjects.last_seq(&subject).unwrap_or(0));
        let size = msg.stored_size(self.limits.storage);
        let seq = self.insert_next(&subject, msg.ts_nanos, size, msg.headers.as_deref());
        let removed = self.enforce_limits_after_store(&subject);
        match last_subject_seq {
            Some(last_subject_seq) => AppendOutcome::StoredRepublished {
                seq,
                removed,
                last_subject_seq,
            },
            None => AppendOutcome::Stored { seq, removed },
        }
    }
}
