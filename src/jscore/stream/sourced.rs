//! Storing a message copied from another stream (a mirror's origin or a source): none of a
//! publish's header checks (the origin made them when it stored the message; a copy is not
//! a publish), but this stream's own `discard: new` limits before and its limits after, as
//! nats-server stores mirrored and sourced messages. A mirror keeps the origin's sequence
//! numbers (skipping the origin's gaps); a source appends at the next sequence. A counter
//! stream adds what a source copies to its counters (`counter.rs`).
//!
//! Which origin messages arrive, and only once, is the group's business
//! (`jscore::group` with `jscore::sourcing`'s replicated positions).

use super::append::AppendOutcome;
use super::counter::CounterBase;
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
        self.store_sourced_counted(msg, None)
    }

    /// `store_sourced`, given on a counter stream the body of the last message on `msg`'s
    /// subject (as `append_counted`): a counter stream stores the origin's value added to
    /// its own (`counter.rs`).
    pub fn store_sourced_counted(
        &mut self,
        mut msg: StoredMsg,
        base: Option<&CounterBase>,
    ) -> Result<AppendOutcome, AppendError> {
        if !self.config.allow_msg_counter {
            self.check_copy_limits(&msg)?;
            return Ok(self.store_copy(msg));
        }
        let counted = self.count(&msg.subject, &msg.headers, &msg.payload, base)?;
        msg.headers = Some(counted.headers.clone());
        msg.payload = counted.payload;
        self.check_copy_limits(&msg)?;
        Ok(AppendOutcome::Counted {
            stored: Box::new(self.store_copy(msg)),
            val: counted.value,
            headers: counted.headers,
        })
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
