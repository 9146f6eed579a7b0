//! The Append command: one published message arriving at the stream, with every
//! publish-time check nats-server makes, in its order (`processJetStreamMsg`): sealed,
//! expected stream, duplicate id, expected last subject sequence, expected last sequence,
//! expected last msg id, rollup permission, message and header size, interest, then the
//! discard-new limits; after storing, discard-old limits and the rollup purge.
//!
//! Replicated: the leader proposes the raw message with its receive time; each replica
//! applies this same function and reaches the same outcome (including refusals).

use bytes::Bytes;

use crate::jsapi::stream_config::RetentionPolicy;

use super::counter::{check_increment, count, Counted, CounterBase, MsgCounters};
use super::error::AppendError;
use super::limits::MAX_HEADERS_LEN;
use super::message::stored_size;
use super::publish_headers::{PublishHeaders, Rollup};
use super::schedule::cancelled_schedule;
use super::state::StreamState;

/// A message to store. `now_nanos` is the leader's receive time: it becomes the message's
/// timestamp and is the clock for the duplicate window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    pub subject: String,
    pub headers: Option<Bytes>,
    pub payload: Bytes,
    pub now_nanos: i64,
}

/// What happened to an accepted publish. Every variant is a successful PubAck.
/// Serde (postcard) encodes the variant index: the variant order is a wire format, append only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum AppendOutcome {
    /// Stored at `seq`; `removed` lists sequences dropped by discard-old limits or a rollup.
    Stored { seq: u64, removed: Vec<u64> },
    /// The `Nats-Msg-Id` was seen within the duplicate window; nothing stored. The PubAck
    /// carries the original sequence and `"duplicate": true`.
    Duplicate { seq: u64 },
    /// Interest retention with no consumer interested in the subject: the sequence is used
    /// up but nothing is kept (nats-server acks these like stored messages).
    SkippedNoInterest { seq: u64 },
    /// `Stored`, on a stream that republishes: also the sequence of the last message on the
    /// same subject before this one (0 if none), read before this message's own limits
    /// removed it, for the `Nats-Last-Sequence` header. Only a republishing stream (a feature
    /// older versions refused) produces it.
    StoredRepublished {
        seq: u64,
        removed: Vec<u64>,
        last_subject_seq: u64,
    },
    /// `stored` (`Stored` or `StoredRepublished`) on a counter stream (`counter.rs`): the
    /// counter's new value for the PubAck, and the headers stored with it (its body is
    /// `{"val":"<val>"}`), which may differ from the published ones.
    Counted {
        stored: Box<AppendOutcome>,
        val: String,
        headers: Bytes,
    },
}

impl AppendOutcome {
    /// The sequence the PubAck reports.
    pub fn seq(&self) -> u64 {
        match self {
            AppendOutcome::Stored { seq, .. }
            | AppendOutcome::StoredRepublished { seq, .. }
            | AppendOutcome::Duplicate { seq }
            | AppendOutcome::SkippedNoInterest { seq } => *seq,
            AppendOutcome::Counted { stored, .. } => stored.seq(),
        }
    }

    /// What was stored, without a counter's value (`Counted`'s `stored`).
    pub fn uncounted(&self) -> &AppendOutcome {
        match self {
            AppendOutcome::Counted { stored, .. } => stored,
            other => other,
        }
    }

    /// The sequence a message was stored at and what its limits removed, for either stored
    /// variant.
    pub fn stored(&self) -> Option<(u64, &[u64])> {
        match self {
            AppendOutcome::Stored { seq, removed }
            | AppendOutcome::StoredRepublished { seq, removed, .. } => Some((*seq, removed)),
            AppendOutcome::Counted { stored, .. } => stored.stored(),
            _ => None,
        }
    }
}

impl StreamState {
    /// Applies one publish. `has_interest` answers, for interest-retention streams, whether
    /// any consumer's filter selects the subject (the stream group knows its consumers);
    /// other retention policies ignore it.
    pub fn append(
        &mut self,
        request: AppendRequest,
        has_interest: &dyn Fn(&str) -> bool,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_counted(request, has_interest, None)
    }

    /// `append`, given on a counter stream the body of the last message on the request's
    /// subject (`counter_base_seq`; `None` when there is none): the message stored is the
    /// counter's new value (`counter.rs`).
    pub fn append_counted(
        &mut self,
        mut request: AppendRequest,
        has_interest: &dyn Fn(&str) -> bool,
        base: Option<&CounterBase>,
    ) -> Result<AppendOutcome, AppendError> {
        let counting = self.config.allow_msg_counter;
        if counting {
            // nats-server checks these before proposing, so before anything below.
            let block = request.headers.as_deref().unwrap_or_default();
            check_increment(block, Some(request.payload.len()), MsgCounters::Allowed)?;
        }
        if self.config.sealed {
            return Err(AppendError::Sealed);
        }
        let headers = PublishHeaders::parse(request.headers.as_deref());
        if let Some(expected) = &headers.expected_stream {
            if *expected != self.config.name {
                return Err(AppendError::StreamMismatch);
            }
        }

        self.dedup
            .expire(request.now_nanos, self.limits.duplicate_window_nanos);
        if let Some(original) = headers
            .msg_id
            .as_deref()
            .and_then(|id| self.dedup.lookup(id))
        {
            return Ok(AppendOutcome::Duplicate { seq: original });
        }

        let counted = match counting {
            true => Some(self.count(&request.subject, &request.headers, &request.payload, base)?),
            false => None,
        };
        if let Some(counted) = &counted {
            request.headers = Some(counted.headers.clone());
            request.payload = counted.payload.clone();
        }

        self.check_expectations(&request.subject, &headers)?;
        let rollup = self.check_rollup(&headers)?;
        let cancels = self.cancelled_schedule(request.headers.as_deref())?;

        let headers_len = request.headers.as_ref().map_or(0, Bytes::len);
        let size = (headers_len + request.payload.len()) as u64;
        if self.limits.max_msg_size.is_some_and(|max| size > max) {
            return Err(AppendError::MessageTooLarge);
        }
        if headers_len > MAX_HEADERS_LEN {
            return Err(AppendError::HeadersTooLarge);
        }

        let msg_id = headers.msg_id.clone().unwrap_or_default();
        if self.limits.retention == RetentionPolicy::Interest && !has_interest(&request.subject) {
            let seq = self.skip_next(request.now_nanos);
            self.record_msg_id(msg_id, seq, request.now_nanos);
            return Ok(AppendOutcome::SkippedNoInterest { seq });
        }

        self.check_discard_new(&request.subject, headers_len, request.payload.len())?;

        let subject = request.subject;
        let last_subject_seq = self
            .config
            .republish
            .is_some()
            .then(|| self.subjects.last_seq(&subject).unwrap_or(0));
        let size = stored_size(
            self.limits.storage,
            subject.len(),
            headers_len,
            request.payload.len(),
        );
        let seq = self.insert_next(
            &subject,
            request.now_nanos,
            size,
            request.headers.as_deref(),
        );
        self.record_msg_id(msg_id, seq, request.now_nanos);

        let mut removed = self.enforce_limits_after_store(&subject);
        match rollup {
            Some(Rollup::Subject) => removed.extend(self.remove_subject_except(&subject, seq)),
            Some(Rollup::All) => removed.extend(self.remove_all_except(seq)),
            None => {}
        }
        if let Some(scheduler) = cancels {
            removed.extend(self.remove_subject_except(&scheduler, seq));
        }
        let stored = match last_subject_seq {
            Some(last_subject_seq) => AppendOutcome::StoredRepublished {
                seq,
                removed,
                last_subject_seq,
            },
            None => AppendOutcome::Stored { seq, removed },
        };
        Ok(match counted {
            Some(counted) => AppendOutcome::Counted {
                stored: Box::new(stored),
                val: counted.value,
                headers: counted.headers,
            },
            None => stored,
        })
    }

    /// On a schedule stream, the subject whose schedule a message with
    /// `Nats-Schedule-Next: purge` and `Nats-Scheduler` cancels (a client's cancel, or the
    /// message a one-shot schedule produced): refused (10212) when that subject's last
    /// message is no schedule, as nats-server does; a subject without messages is fine.
    fn cancelled_schedule(&self, headers: Option<&[u8]>) -> Result<Option<String>, AppendError> {
        let Some(scheduler) = headers
            .filter(|_| self.config.allow_msg_schedules)
            .and_then(cancelled_schedule)
        else {
            return Ok(None);
        };
        match self.last_seq_for_subject(scheduler) {
            Some(last) if !self.schedules.contains(last) => Err(AppendError::SchedulerInvalid),
            _ => Ok(Some(scheduler.to_string())),
        }
    }

    /// On a counter stream, the sequence of the message whose body an increment on
    /// `subject` adds to (its last message); `None` on other streams or a new subject.
    pub fn counter_base_seq(&self, subject: &str) -> Option<u64> {
        self.config
            .allow_msg_counter
            .then(|| self.last_seq_for_subject(subject))
            .flatten()
    }

    /// The counter's new value on `subject`. `base` must be the body of the message
    /// `counter_base_seq` names: without it, a subject with messages counts as broken.
    pub(super) fn count(
        &self,
        subject: &str,
        headers: &Option<Bytes>,
        payload: &[u8],
        base: Option<&CounterBase>,
    ) -> Result<Counted, AppendError> {
        if base.is_none() && self.counter_base_seq(subject).is_some() {
            return Err(AppendError::CounterBroken);
        }
        count(subject, headers.as_deref(), payload, base)
    }

    fn check_expectations(
        &self,
        subject: &str,
        headers: &PublishHeaders,
    ) -> Result<(), AppendError> {
        match (
            headers.expected_last_subject_seq,
            &headers.expected_last_subject_seq_subject,
        ) {
            (Some(expected), override_subject) => {
                let checked_subject = override_subject.as_deref().unwrap_or(subject);
                // No message on the subject counts as sequence 0.
                let actual = self.last_seq_for_subject(checked_subject).unwrap_or(0);
                if actual != expected {
                    return Err(AppendError::WrongLastSequence { actual });
                }
            }
            (None, Some(_)) => return Err(AppendError::MissingLastSubjectSequence),
            (None, None) => {}
        }
        if let Some(expected) = headers.expected_last_seq {
            if expected != self.last_seq {
                return Err(AppendError::WrongLastSequence {
                    actual: self.last_seq,
                });
            }
        }
        if let Some(expected) = &headers.expected_last_msg_id {
            if *expected != self.last_msg_id {
                return Err(AppendError::WrongLastMsgId {
                    actual: self.last_msg_id.clone(),
                });
            }
        }
        Ok(())
    }

    pub(super) fn check_rollup(
        &self,
        headers: &PublishHeaders,
    ) -> Result<Option<Rollup>, AppendError> {
        if headers.rollup.is_none() {
            return Ok(None);
        }
        if !self.config.allow_rollup_hdrs || self.config.deny_purge {
            return Err(AppendError::RollupNotPermitted);
        }
        headers
            .rollup()
            .map_err(|value| AppendError::RollupInvalid(value.to_string()))
    }

    /// `discard: new` refusals. A subject already at `max_msgs_per_subject` will drop its
    /// own oldest message when this one is stored, so it does not grow the stream's message
    /// count, and only grows its bytes by the size difference.
    pub(super) fn check_discard_new(
        &self,
        subject: &str,
        headers_len: usize,
        payload_len: usize,
    ) -> Result<(), AppendError> {
        if !self.limits.discards_new() {
            return Ok(());
        }
        let subject_count = self.subjects.count(subject);
        let at_subject_limit = self
            .limits
            .max_msgs_per_subject
            .is_some_and(|max| subject_count >= max);
        if at_subject_limit && self.limits.discard_new_per_subject {
            return Err(AppendError::MaxMessagesPerSubject);
        }
        if !at_subject_limit
            && self
                .limits
                .max_msgs
                .is_some_and(|max| self.message_count() >= max)
        {
            return Err(AppendError::MaxMessages);
        }
        if let Some(max_bytes) = self.limits.max_bytes {
            let incoming =
                stored_size(self.limits.storage, subject.len(), headers_len, payload_len);
            let replaced = match (at_subject_limit, self.subjects.first_seq(subject)) {
                (true, Some(oldest)) => self
                    .messages
                    .get(oldest)
                    .map_or(0, |msg| u64::from(msg.size)),
                _ => 0,
            };
            // nats-server refuses when the stream would *reach* max_bytes (`>=`); we refuse
            // only when it would exceed it, matching the discard-old rule (`bytes > max`).
            if self.bytes - replaced + incoming > max_bytes {
                return Err(AppendError::MaxBytes);
            }
        }
        Ok(())
    }

    fn record_msg_id(&mut self, msg_id: String, seq: u64, now_nanos: i64) {
        if !msg_id.is_empty() {
            self.dedup.record(&msg_id, seq, now_nanos);
        }
        self.last_msg_id = msg_id;
    }
}
