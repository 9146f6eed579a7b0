//! Everything that takes messages out of a stream: discard-old limit enforcement after a
//! store, purge (whole stream, by subject filter, up
//! to a sequence, or keeping the newest N), single-message delete, and the rollup purge.
//! Retention-driven removal (work queue, interest) uses `remove_acked`. Expiry (`max_age`
//! and per-message TTLs) is `expire.rs`.
//!
//! Replicated: all of these run only while applying commands, with times from the
//! commands, so every replica removes the same sequences.

use crate::jscore::subject_filter::SubjectFilter;

use super::error::RemoveError;
use super::state::StreamState;

/// A purge request (`$JS.API.STREAM.PURGE`). `seq` and `keep` are exclusive; 0 = unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurgeRequest {
    /// Only messages on subjects this pattern selects (None or `>` = all).
    pub filter: Option<String>,
    /// Remove messages with a sequence below this one.
    pub seq: u64,
    /// Keep this many of the newest (matching) messages.
    pub keep: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purged {
    /// Number of messages removed (the API's `purged`).
    pub count: u64,
}

impl StreamState {
    /// Purges messages. A full purge keeps `last_seq` (the next message continues the
    /// sequence) and moves `first_seq` past it.
    pub fn purge(&mut self, request: &PurgeRequest) -> Result<Purged, RemoveError> {
        if self.config.sealed {
            return Err(RemoveError::Sealed);
        }
        if self.config.deny_purge {
            return Err(RemoveError::PurgeDenied);
        }
        if request.seq > 0 && request.keep > 0 {
            return Err(RemoveError::SeqAndKeep);
        }
        let filter = SubjectFilter::new(request.filter.iter().cloned());
        let count = if filter.is_all() {
            self.purge_all_subjects(request.seq, request.keep)
        } else {
            self.purge_filtered(&filter, request.seq, request.keep)
        };
        Ok(Purged { count })
    }

    /// Deletes one message (`$JS.API.STREAM.MSG.DELETE`).
    pub fn delete_msg(&mut self, seq: u64) -> Result<(), RemoveError> {
        if self.config.sealed {
            return Err(RemoveError::Sealed);
        }
        if self.config.deny_delete {
            return Err(RemoveError::DeleteDenied);
        }
        self.remove_seq(seq)
            .map(|_| ())
            .ok_or(RemoveError::SequenceNotFound { seq })
    }

    /// Removes the given sequences because retention no longer needs them (acked on a work
    /// queue, acked by every interested consumer). Missing sequences are ignored. Returns
    /// the sequences actually removed.
    pub fn remove_acked(&mut self, seqs: impl IntoIterator<Item = u64>) -> Vec<u64> {
        seqs.into_iter()
            .filter(|seq| self.remove_seq(*seq).is_some())
            .collect()
    }

    /// Discard-old enforcement after storing on `subject`: per-subject limit first (it
    /// applies whatever the discard policy, `discard_new_per_subject` having already
    /// refused), then `max_msgs` and `max_bytes` for `discard: old`.
    pub(super) fn enforce_limits_after_store(&mut self, subject: &str) -> Vec<u64> {
        let mut removed = Vec::new();
        if let Some(max_per_subject) = self.limits.max_msgs_per_subject {
            while self.subjects.count(subject) > max_per_subject {
                let Some(oldest) = self.subjects.first_seq(subject) else {
                    break;
                };
                self.remove_seq(oldest);
                removed.push(oldest);
            }
        }
        removed.extend(self.enforce_stream_limits());
        removed
    }

    /// `max_msgs` and `max_bytes` with `discard: old`: drop the oldest until within limits.
    pub(super) fn enforce_stream_limits(&mut self) -> Vec<u64> {
        let mut removed = Vec::new();
        if self.limits.discards_new() {
            return removed;
        }
        loop {
            let over_msgs = self
                .limits
                .max_msgs
                .is_some_and(|max| self.message_count() > max);
            let over_bytes = self.limits.max_bytes.is_some_and(|max| self.bytes > max);
            if !(over_msgs || over_bytes) {
                break;
            }
            let Some((oldest, _)) = self.messages.first() else {
                break;
            };
            self.remove_seq(oldest);
            removed.push(oldest);
        }
        removed
    }

    /// Enforces a (possibly lowered) per-subject limit on every subject, after a config
    /// update.
    pub(super) fn enforce_per_subject_limit_everywhere(&mut self) -> Vec<u64> {
        let Some(max_per_subject) = self.limits.max_msgs_per_subject else {
            return Vec::new();
        };
        let over = self.subjects.oldest_beyond(max_per_subject);
        self.remove_acked(over)
    }

    /// Rollup `sub`: keep only `keep_seq` on `subject` (a publish subject, or a cancelled
    /// schedule's, checked literal at ingest). A literal subject is looked up, not matched
    /// against every subject: a stream of many subjects (a schedule each) rolls up in
    /// O(log n).
    pub(super) fn remove_subject_except(&mut self, subject: &str, keep_seq: u64) -> Vec<u64> {
        // A subject with wildcard tokens (`$KV.B.a.*`, stored as published) rolls up every
        // subject it matches: nats-server purges by it as a filter (nats-py's `kv.purge`).
        let wildcard = subject.split('.').any(|token| token == "*" || token == ">");
        let seqs = match wildcard {
            true => self.subjects.seqs_matching(&SubjectFilter::new([subject])),
            false => self.subjects.seqs_of(subject),
        };
        let others: Vec<u64> = seqs.into_iter().filter(|seq| *seq != keep_seq).collect();
        self.remove_acked(others)
    }

    /// Rollup `all`: keep only `keep_seq` in the stream.
    pub(super) fn remove_all_except(&mut self, keep_seq: u64) -> Vec<u64> {
        let others: Vec<u64> = self
            .messages
            .keys()
            .filter(|seq| *seq != keep_seq)
            .collect();
        self.remove_acked(others)
    }

    fn purge_all_subjects(&mut self, below_seq: u64, keep: u64) -> u64 {
        if below_seq > 0 {
            if below_seq > self.last_seq + 1 {
                // Compacting past the end moves the sequence forward, as nats-server does:
                // the next message gets `below_seq`.
                let count = self.message_count();
                self.clear_messages();
                self.last_seq = below_seq - 1;
                self.first_seq = below_seq;
                return count;
            }
            let doomed: Vec<u64> = self.messages.range(..below_seq).map(|(s, _)| s).collect();
            return self.remove_acked(doomed).len() as u64;
        }
        if keep > 0 {
            let excess = self.message_count().saturating_sub(keep) as usize;
            let doomed: Vec<u64> = self.messages.keys().take(excess).collect();
            return self.remove_acked(doomed).len() as u64;
        }
        let count = self.message_count();
        self.clear_messages();
        count
    }

    fn purge_filtered(&mut self, filter: &SubjectFilter, below_seq: u64, keep: u64) -> u64 {
        let mut matching = self.subjects.seqs_matching(filter);
        if below_seq > 0 {
            matching.retain(|seq| *seq < below_seq);
        } else if keep > 0 {
            let excess = matching.len().saturating_sub(keep as usize);
            matching.truncate(excess);
        }
        self.remove_acked(matching).len() as u64
    }

    fn clear_messages(&mut self) {
        self.messages.clear();
        self.ttls.clear();
        self.schedules.clear();
        self.subjects.clear();
        self.bytes = 0;
        self.first_seq = self.last_seq + 1;
    }
}
