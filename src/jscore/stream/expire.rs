//! `Expire { now }`: the messages whose time has come, by `max_age` or by their own
//! `Nats-TTL` (ADR-43), and the subject delete markers (ADR-48 "limit markers") a stream
//! with `subject_delete_marker_ttl` leaves behind, as nats-server's store does
//! (`expireMsgs` with `handleRemovalOrSdm`).
//!
//! - `max_age` removes, oldest first, every message with `ts <= now - max_age`, skipping
//!   those marked `Nats-TTL: never`.
//! - A message with a TTL goes once `ts + ttl <= now` (when `allow_msg_ttl` is on; a
//!   stream without it never stored one from a publish). The deadline index
//!   (`ttl_index.rs`) yields them without a walk. On a stream that leaves markers and keeps
//!   more than one message per subject, a TTL shorter than the marker TTL counts as the
//!   marker TTL, as nats-server raises it when storing (so a marker cannot be missed): the
//!   rule is applied when the entry comes due, with the config of that moment, and the
//!   entry waits in the index's raised set.
//! - When either removal takes the last message of a subject, and that message was not
//!   itself a tombstone (a marker or a key-value purge), the stream stores a marker on the
//!   subject at `now`: headers `Nats-Marker-Reason: MaxAge`, `Nats-TTL: <marker ttl>`,
//!   `Nats-Rollup: sub`, no payload, subject to the stream's limits like any message. The
//!   marker expires by its own TTL and leaves none. nats-server proposes its markers
//!   through the leader's publish path; here they are stored by the same replicated apply
//!   that removed the message, so a leader change cannot lose one (ADR 0019).
//!
//! Replicated: `now` comes from the command; every replica removes and stores the same.

use super::message::stored_size;
use super::state::StreamState;
use super::ttl::marker_headers;

/// What an `Expire` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Expired {
    /// Sequences removed (expired, or pushed out by a marker's limits), oldest first.
    pub removed: Vec<u64>,
    /// Delete markers stored, in sequence order.
    pub markers: Vec<u64>,
}

impl StreamState {
    /// Removes what is due at `now_nanos` (a message is expired once `ts <= now - max_age`,
    /// as in nats-server, or once its TTL deadline is reached), stores the delete markers,
    /// and ages out the duplicate window.
    pub fn expire(&mut self, now_nanos: i64) -> Expired {
        let (mut expired, emptied) = self.remove_due(now_nanos);
        for subject in emptied {
            self.store_marker(&subject, now_nanos, &mut expired);
        }
        expired.removed.sort_unstable();
        expired
    }

    /// The removals of [`expire`](Self::expire) without its markers, for a config update
    /// that enforces a new `max_age` at once: its command answers with the removals only,
    /// so it stores no message (jetraft's choice; the next `Expire` leaves markers again).
    pub(super) fn expire_without_markers(&mut self, now_nanos: i64) -> Vec<u64> {
        self.remove_due(now_nanos).0.removed
    }

    /// Removes what is due; returns it and the subjects left empty that get a marker.
    fn remove_due(&mut self, now_nanos: i64) -> (Expired, Vec<String>) {
        self.dedup
            .expire(now_nanos, self.limits.duplicate_window_nanos);
        let mut doomed: Vec<u64> = Vec::new();
        if let Some(max_age) = self.limits.max_age_nanos {
            let oldest_kept = now_nanos.saturating_sub(max_age);
            doomed.extend(
                self.messages
                    .iter()
                    .take_while(|(_, msg)| msg.ts_nanos <= oldest_kept)
                    .map(|(seq, _)| seq)
                    .filter(|seq| !self.ttls.is_never(*seq)),
            );
        }
        if self.config.allow_msg_ttl {
            let minimum = self.minimum_ttl_nanos();
            for (seq, own_deadline) in self.ttls.take_due(now_nanos) {
                let Some(ts_nanos) = self.messages.get(seq).map(|msg| msg.ts_nanos) else {
                    continue;
                };
                let deadline = own_deadline.max(ts_nanos.saturating_add(minimum));
                if deadline > now_nanos {
                    self.ttls.raise(seq, own_deadline, deadline);
                } else {
                    doomed.push(seq);
                }
            }
        }
        let mut expired = Expired::default();
        let mut emptied: Vec<String> = Vec::new();
        let markers_on = self.marker_ttl_seconds().is_some();
        for seq in doomed {
            let Some(subject_id) = self.messages.get(seq).map(|msg| msg.subject) else {
                continue;
            };
            // The subject's name, read before the removal may retire its interned id.
            let marked = (markers_on && !self.ttls.is_tombstone(seq))
                .then(|| self.subjects.name(subject_id).to_string());
            self.remove_seq(seq);
            expired.removed.push(seq);
            if let Some(subject) = marked {
                if self.subjects.count(&subject) == 0 {
                    emptied.push(subject);
                }
            }
        }
        (expired, emptied)
    }

    /// When the next message is due (for the leader's expiry timer): the oldest message
    /// `max_age` applies to, the earliest TTL deadline, or the earliest schedule
    /// (`fire.rs`). A TTL deadline may belong to a
    /// message already removed another way; its `Expire` then just drops the entry.
    pub fn next_expiry_at(&self) -> Option<i64> {
        let by_age = self.limits.max_age_nanos.and_then(|max_age| {
            let oldest = if self.ttls.has_never() {
                self.messages
                    .iter()
                    .find(|(seq, _)| !self.ttls.is_never(*seq))
            } else {
                self.messages.first()
            };
            oldest.map(|(_, msg)| msg.ts_nanos.saturating_add(max_age))
        });
        let by_ttl = self
            .config
            .allow_msg_ttl
            .then(|| self.ttls.next_deadline())
            .flatten();
        let by_schedule = (self.config.allow_msg_schedules && !self.config.sealed)
            .then(|| self.schedules.next_due())
            .flatten();
        [by_age, by_ttl, by_schedule].into_iter().flatten().min()
    }

    /// The shortest TTL the stream lets a message have: on a stream that leaves markers
    /// (but keeps more than one message per subject), the marker TTL, so that no marker is
    /// missed while one is still on the subject (nats-server's rule in
    /// `processJetStreamMsg`); else 0.
    fn minimum_ttl_nanos(&self) -> i64 {
        match self.marker_ttl_seconds() {
            Some(seconds) if self.config.max_msgs_per_subject != 1 => {
                (seconds as i64).saturating_mul(1_000_000_000)
            }
            _ => 0,
        }
    }

    /// The marker TTL in whole seconds, when the stream leaves markers.
    fn marker_ttl_seconds(&self) -> Option<u64> {
        let nanos = self.config.subject_delete_marker_ttl;
        (nanos >= 1_000_000_000).then_some((nanos / 1_000_000_000) as u64)
    }

    /// Stores a delete marker on `subject` (now empty) at `now_nanos`, then the stream's
    /// limits, as a publish of it would.
    fn store_marker(&mut self, subject: &str, now_nanos: i64, expired: &mut Expired) {
        let Some(marker_ttl) = self.marker_ttl_seconds() else {
            return;
        };
        if self.subjects.count(subject) > 0 {
            return;
        }
        let headers = marker_headers(marker_ttl);
        let size = stored_size(self.limits.storage, subject.len(), headers.len(), 0);
        let seq = self.insert_next(subject, now_nanos, size, Some(&headers));
        self.last_msg_id = String::new();
        expired.markers.push(seq);
        expired
            .removed
            .extend(self.enforce_limits_after_store(subject));
    }

    /// The header block of the markers this stream stores (their payload is empty), for
    /// the state machine that writes bodies: no command carries a marker's.
    pub fn marker_headers(&self) -> Option<Vec<u8>> {
        self.marker_ttl_seconds().map(marker_headers)
    }
}
