//! The all-or-nothing check of an atomic batch (ADR-50) before any member is applied: each
//! member is checked as `append.rs` would check it with the members before it already
//! stored (their sequences follow the stream's last one), so the appends that follow a
//! passed check cannot be refused and the batch is stored whole. A failed check stores
//! nothing, on every replica alike (it is part of the replicated apply).
//!
//! Where it differs from a lone publish: a `Nats-Msg-Id` already in the duplicate window,
//! or twice in the batch, refuses the whole batch (10201) rather than acking a duplicate;
//! `Nats-Expected-Last-Msg-Id` is refused (10177), as nats-server does. The `discard: new`
//! limits are checked for the batch's total (every member counted as a new message), which
//! may refuse a batch a member-by-member check would just fit, never the other way round.
//! As in nats-server, a rollup must not undo the batch itself: `Nats-Rollup: sub` only on a
//! subject no earlier member wrote, `all` only on the first member (10111).
//!
//! On a counter stream each member must be an increment (`counter.rs`: `Nats-Incr`, no
//! payload, no rollup or expectation); the values are computed member by member while
//! applying, each from the one before on its subject. What only the stored bodies can tell
//! (a last value that does not parse, 10172) is found there, alike on every replica.

use std::collections::HashSet;

use bytes::Bytes;

use crate::jsapi::stream_config::RetentionPolicy;
use crate::jscore::atomic_batch::BatchError;
use crate::jscore::subject_filter::SubjectFilter;
use crate::wire::headers::lookup;

use super::append::AppendRequest;
use super::counter::{check_increment, MsgCounters};
use super::error::AppendError;
use super::limits::MAX_HEADERS_LEN;
use super::message::stored_size;
use super::publish_headers::{PublishHeaders, Rollup, EXPECTED_LAST_MSG_ID};
use super::state::StreamState;
use super::unsupported_headers::MSG_INCR;

impl StreamState {
    /// Whether every member of the batch would be stored, in order; `has_interest` as for
    /// `append` (on an interest stream a member nobody wants uses its sequence, unstored).
    pub fn check_batch(
        &self,
        members: &[AppendRequest],
        has_interest: &dyn Fn(&str) -> bool,
    ) -> Result<(), BatchError> {
        if self.config.sealed {
            return Err(AppendError::Sealed.into());
        }
        let mut msg_ids = HashSet::new();
        // (subject, sequence) of the members checked so far that will be stored.
        let mut stored: Vec<(&str, u64)> = Vec::new();
        let (mut new_msgs, mut new_bytes) = (0u64, 0u64);
        for (index, member) in members.iter().enumerate() {
            let seq = self.last_seq + index as u64 + 1;
            let headers = PublishHeaders::parse(member.headers.as_deref());
            // As nats-server, an increment's checks come first.
            self.check_member_increment(member)?;
            if headers
                .expected_stream
                .as_ref()
                .is_some_and(|expected| *expected != self.config.name)
            {
                return Err(AppendError::StreamMismatch.into());
            }
            if headers.expected_last_msg_id.is_some() {
                return Err(BatchError::UnsupportedHeader(EXPECTED_LAST_MSG_ID));
            }
            if let Some(id) = headers.msg_id.as_deref() {
                let window = self.limits.duplicate_window_nanos;
                let known = self.dedup.lookup_at(id, member.now_nanos, window).is_some();
                if known || !msg_ids.insert(id.to_owned()) {
                    return Err(BatchError::DuplicateMsgId);
                }
            }
            self.check_member_expectations(member, &headers, seq, &stored)?;
            match self.check_rollup(&headers)? {
                Some(Rollup::Subject)
                    if members[..index].iter().any(|m| m.subject == member.subject) =>
                {
                    return Err(AppendError::BatchRollupSubInvalid.into());
                }
                Some(Rollup::All) if index > 0 => {
                    return Err(AppendError::BatchRollupAllInvalid.into())
                }
                _ => {}
            }
            let headers_len = member.headers.as_ref().map_or(0, Bytes::len);
            let size = (headers_len + member.payload.len()) as u64;
            if self.limits.max_msg_size.is_some_and(|max| size > max) {
                return Err(AppendError::MessageTooLarge.into());
            }
            if headers_len > MAX_HEADERS_LEN {
                return Err(AppendError::HeadersTooLarge.into());
            }
            if self.limits.retention == RetentionPolicy::Interest && !has_interest(&member.subject)
            {
                continue;
            }
            new_msgs += 1;
            new_bytes += stored_size(
                self.limits.storage,
                member.subject.len(),
                headers_len,
                member.payload.len(),
            );
            let in_batch = stored.iter().filter(|(s, _)| *s == member.subject).count();
            self.check_batch_discard_new(&member.subject, in_batch as u64, new_msgs, new_bytes)?;
            stored.push((&member.subject, seq));
        }
        Ok(())
    }

    /// On a counter stream, that the member is an increment (`counter.rs`).
    fn check_member_increment(&self, member: &AppendRequest) -> Result<(), AppendError> {
        if !self.config.allow_msg_counter {
            return Ok(());
        }
        let block = member.headers.as_deref().unwrap_or_default();
        if lookup(block, MSG_INCR).is_none_or(|value| value.trim_ascii().is_empty()) {
            return Err(AppendError::CounterIncrementMissing);
        }
        check_increment(block, Some(member.payload.len()), MsgCounters::Allowed)
    }

    /// The expected-sequence headers of the member at `seq`, the members before it (`stored`)
    /// counting as stored.
    fn check_member_expectations(
        &self,
        member: &AppendRequest,
        headers: &PublishHeaders,
        seq: u64,
        stored: &[(&str, u64)],
    ) -> Result<(), AppendError> {
        match (
            headers.expected_last_subject_seq,
            &headers.expected_last_subject_seq_subject,
        ) {
            (Some(expected), override_subject) => {
                let checked = override_subject.as_deref().unwrap_or(&member.subject);
                let filter = SubjectFilter::new([checked]);
                let actual = stored
                    .iter()
                    .rev()
                    .find(|(subject, _)| filter.matches(subject))
                    .map(|(_, seq)| *seq)
                    .or_else(|| self.last_seq_for_subject(checked))
                    .unwrap_or(0);
                if actual != expected {
                    return Err(AppendError::WrongLastSequence { actual });
                }
            }
            (None, Some(_)) => return Err(AppendError::MissingLastSubjectSequence),
            (None, None) => {}
        }
        let last_seq = seq - 1;
        match headers.expected_last_seq {
            Some(expected) if expected != last_seq => {
                Err(AppendError::WrongLastSequence { actual: last_seq })
            }
            _ => Ok(()),
        }
    }

    /// `discard: new` with `new_msgs` / `new_bytes` of the batch stored so far (this member
    /// included) and `in_batch` earlier members on its subject.
    fn check_batch_discard_new(
        &self,
        subject: &str,
        in_batch: u64,
        new_msgs: u64,
        new_bytes: u64,
    ) -> Result<(), AppendError> {
        if !self.limits.discards_new() {
            return Ok(());
        }
        let per_subject = self.subjects.count(subject) + in_batch;
        if self.limits.discard_new_per_subject
            && self
                .limits
                .max_msgs_per_subject
                .is_some_and(|max| per_subject >= max)
        {
            return Err(AppendError::MaxMessagesPerSubject);
        }
        if self
            .limits
            .max_msgs
            .is_some_and(|max| self.message_count() + new_msgs > max)
        {
            return Err(AppendError::MaxMessages);
        }
        if self
            .limits
            .max_bytes
            .is_some_and(|max| self.bytes + new_bytes > max)
        {
            return Err(AppendError::MaxBytes);
        }
        Ok(())
    }
}
