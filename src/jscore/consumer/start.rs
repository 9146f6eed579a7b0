//! Where a new consumer starts reading, from its deliver policy and the stream as it is at
//! creation (nats-server `selectStartingSeqNo`): `all` (first sequence), `last` (newest
//! matching message), `new` (after the last sequence), `by_start_sequence`,
//! `by_start_time`, and `last_per_subject` (the newest message of every matching subject,
//! then everything after the stream's current end).
//!
//! Replicated: computed while applying the consumer-create command, so every replica starts
//! the consumer at the same place.

use std::collections::VecDeque;

use crate::jsapi::consumer_config::{ConsumerConfig, DeliverPolicy};
use crate::jscore::stream::StreamState;
use crate::jscore::subject_filter::SubjectFilter;

/// The `last_per_subject` start: specific sequences to deliver first, then resume with
/// ordinary delivery after `resume_after`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastPerSubjectPlan {
    pub seqs: VecDeque<u64>,
    /// The stream's last sequence at creation; new messages start after it.
    pub resume_after: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartPosition {
    /// First stream sequence to consider for delivery.
    pub next_stream_seq: u64,
    pub last_per_subject: Option<LastPerSubjectPlan>,
}

impl StartPosition {
    pub fn select(config: &ConsumerConfig, filter: &SubjectFilter, stream: &StreamState) -> Self {
        let first = stream.first_seq();
        let last = stream.last_seq();
        let explicit_start = config.opt_start_seq > 0;
        let mut last_per_subject = None;
        let mut start = match config.deliver_policy {
            DeliverPolicy::ByStartSequence if explicit_start => config.opt_start_seq,
            DeliverPolicy::All | DeliverPolicy::ByStartSequence => first,
            DeliverPolicy::Last => stream.last_seq_matching(filter).unwrap_or(0),
            DeliverPolicy::New => last + 1,
            DeliverPolicy::ByStartTime => {
                match config.opt_start_time.and_then(|t| t.unix_nanos()) {
                    Some(nanos) => stream.first_seq_at_or_after(nanos),
                    None => last + 1,
                }
            }
            DeliverPolicy::LastPerSubject => {
                let seqs: VecDeque<u64> = stream.last_seq_per_subject(filter).into();
                let start = seqs.front().copied().unwrap_or(last);
                if !seqs.is_empty() {
                    last_per_subject = Some(LastPerSubjectPlan {
                        seqs,
                        resume_after: last,
                    });
                }
                start
            }
        };
        // Clamp into the stream, as nats-server does; an explicit start sequence beyond the
        // end is respected (the consumer waits for it).
        if first == 0 && !explicit_start {
            start = 1;
        } else if start > last && !explicit_start {
            start = last + 1;
        } else if start < first {
            start = first;
        }
        Self {
            next_stream_seq: start.max(1),
            last_per_subject,
        }
    }
}
