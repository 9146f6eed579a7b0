//! `StreamState`: the messages of one stream by sequence (their metadata: time, size,
//! interned subject; bodies live in the message store, see `message.rs`), with the
//! bookkeeping StreamInfo
//! reports (first/last sequence and time, bytes, subjects, interior deletes), and the
//! read-only queries the API and consumers use. The commands that change it live next door:
//! `append.rs`, `remove.rs` (purge, delete, limits, expiry) and `update.rs`.
//!
//! One per stream group on every replica; entirely replicated (every field is a function of
//! the applied command sequence).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::jsapi::stream_config::StreamConfig;
use crate::jscore::subject_filter::SubjectFilter;

use super::dedup::DedupWindow;
use super::limits::StreamLimits;
use super::message::{MsgInfo, MsgMeta};
use super::meta_map::MetaMap;
use super::meta_spill::{MetaSpill, RESIDENT_CHUNKS};
use super::schedule_index::ScheduleIndex;
use super::subject_index::SubjectIndex;
use super::ttl_index::TtlIndex;

/// The numbers StreamInfo's `state` object needs (minus `consumer_count`, which the stream
/// group adds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StreamSummary {
    pub messages: u64,
    pub bytes: u64,
    /// First sequence present; for an empty stream the next sequence to be used (0 for a
    /// stream that never stored anything), as nats-server reports it.
    pub first_seq: u64,
    /// 0 when the stream is empty.
    pub first_ts_nanos: i64,
    pub last_seq: u64,
    /// Time the last sequence was assigned (0 if never).
    pub last_ts_nanos: i64,
    pub num_subjects: u64,
    /// Interior deletes between first and last sequence.
    pub num_deleted: u64,
}

#[derive(Debug, Clone)]
pub struct StreamState {
    pub(super) config: StreamConfig,
    pub(super) limits: StreamLimits,
    pub(super) messages: MetaMap,
    pub(super) subjects: SubjectIndex,
    pub(super) first_seq: u64,
    pub(super) last_seq: u64,
    pub(super) last_ts_nanos: i64,
    pub(super) bytes: u64,
    pub(super) dedup: DedupWindow,
    /// `Nats-Msg-Id` of the last message that took a sequence ("" when it had none), for
    /// `Nats-Expected-Last-Msg-Id`.
    pub(super) last_msg_id: String,
    /// Messages with a `Nats-TTL` by deadline, and the `never` and tombstone sets
    /// (`ttl_index.rs`); derived from the stored headers.
    pub(super) ttls: TtlIndex,
    /// Schedule messages by due time (`schedule_index.rs`); derived from the stored headers.
    pub(super) schedules: ScheduleIndex,
    /// The `now` of the last `Expire` that fired a schedule: a repeating schedule is next due
    /// at its first time after it (`schedule_index.rs`). Persisted (`s/sched`), replicated.
    pub(super) schedule_clock: i64,
}

impl StreamState {
    /// A new, empty stream. The config is expected to be validated and normalised by the
    /// API layer; limits are read from it as they are.
    pub fn new(config: StreamConfig) -> Self {
        let limits = StreamLimits::from_config(&config);
        // A configured first sequence behaves like a purge up to it: nothing stored, the
        // next message gets `first_seq`.
        let (first_seq, last_seq) = match config.first_seq {
            0 => (0, 0),
            first => (first, first - 1),
        };
        Self {
            config,
            limits,
            messages: MetaMap::new(),
            subjects: SubjectIndex::default(),
            first_seq,
            last_seq,
            last_ts_nanos: 0,
            bytes: 0,
            dedup: DedupWindow::default(),
            last_msg_id: String::new(),
            ttls: TtlIndex::default(),
            schedules: ScheduleIndex::default(),
            schedule_clock: 0,
        }
    }

    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// Keeps the sealed metadata chunks beyond the [`RESIDENT_CHUNKS`] touched last in
    /// `file` (emptied first) instead of memory, from now on (ADR 0033). Local to this node:
    /// not replicated, not observable through any query.
    pub fn spill_metadata_to(&mut self, file: Arc<dyn MetaSpill>) {
        self.messages.spill_to(file, RESIDENT_CHUNKS);
    }

    /// Packs every metadata chunk in memory, the open tail too (the next append opens it
    /// again): for a stream left alone, whose tail would keep 16 bytes a message. Local to
    /// this node: not replicated, not observable through any query.
    pub fn seal_metadata(&mut self) {
        self.messages.seal_all();
    }

    pub fn limits(&self) -> &StreamLimits {
        &self.limits
    }

    pub fn name(&self) -> &str {
        &self.config.name
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    pub fn message_count(&self) -> u64 {
        self.messages.len() as u64
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn first_seq(&self) -> u64 {
        self.first_seq
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    pub fn contains(&self, seq: u64) -> bool {
        self.messages.contains(seq)
    }

    /// The stored message `seq` (without its body).
    pub fn get(&self, seq: u64) -> Option<MsgInfo<'_>> {
        self.messages.get(seq).map(|meta| self.info(meta))
    }

    pub(super) fn info(&self, meta: MsgMeta) -> MsgInfo<'_> {
        MsgInfo {
            subject: self.subjects.name(meta.subject),
            ts_nanos: meta.ts_nanos,
            stored_size: u64::from(meta.size),
        }
    }

    /// Number of `Nats-Msg-Id`s currently inside the duplicate window.
    pub fn tracked_msg_ids(&self) -> usize {
        self.dedup.len()
    }

    /// The newest message on a subject, which may contain wildcards (`last_by_subj`).
    pub fn last_by_subject(&self, subject: &str) -> Option<(u64, MsgInfo<'_>)> {
        let seq = self.last_seq_for_subject(subject)?;
        self.get(seq).map(|msg| (seq, msg))
    }

    /// The first message at or after `from_seq` whose subject the filter selects
    /// (`next_by_subj`, and consumers looking for their next message).
    pub fn next_matching(
        &self,
        filter: &SubjectFilter,
        from_seq: u64,
    ) -> Option<(u64, MsgInfo<'_>)> {
        if filter.is_all() {
            return self
                .messages
                .range(from_seq..)
                .next()
                .map(|(seq, meta)| (seq, self.info(meta)));
        }
        self.messages
            .range(from_seq..)
            .map(|(seq, meta)| (seq, self.info(meta)))
            .find(|(_, msg)| filter.matches(msg.subject))
    }

    /// The sequences at or after `from_seq` whose subject the filter selects, in order: one
    /// walk for a run of deliveries, where `next_matching` per message would search the
    /// map each time. Without a filter on a stream with no gaps (a limits stream) they are
    /// just the numbers up to the last sequence, and the map is not touched at all: walking
    /// it costs a cache miss per node, measured at over 1 µs a message in a busy server.
    pub fn matching_from<'a>(
        &'a self,
        filter: &'a SubjectFilter,
        from_seq: u64,
    ) -> impl Iterator<Item = u64> + 'a {
        let all = filter.is_all();
        let dense = match (self.messages.first(), self.messages.last()) {
            (Some((first, _)), Some((last, _)))
                if all && last - first + 1 == self.message_count() =>
            {
                Some(from_seq.max(first)..=last)
            }
            _ => None,
        };
        let walk = dense.is_none().then(|| {
            self.messages
                .range(from_seq..)
                .filter(move |(_, meta)| all || filter.matches(self.subjects.name(meta.subject)))
                .map(|(seq, _)| seq)
        });
        dense
            .into_iter()
            .flatten()
            .chain(walk.into_iter().flatten())
    }

    /// Messages with sequence > `after_seq` that the filter selects (consumer `num_pending`).
    pub fn count_matching_after(&self, filter: &SubjectFilter, after_seq: u64) -> u64 {
        if filter.is_all() {
            return self.messages.count_after(after_seq);
        }
        self.subjects.count_after(filter, after_seq)
    }

    /// The newest sequence of every subject the filter selects, ascending.
    pub fn last_seq_per_subject(&self, filter: &SubjectFilter) -> Vec<u64> {
        self.subjects.last_seq_per_subject(filter)
    }

    /// For every subject any of the filters selects, its newest sequence at or below
    /// `up_to`, ascending and without repeats (direct get's `multi_last`).
    pub fn last_seqs_up_to(&self, filters: &[SubjectFilter], up_to: u64) -> Vec<u64> {
        let mut seqs: Vec<u64> = filters
            .iter()
            .flat_map(|filter| self.subjects.last_seqs_up_to(filter, up_to))
            .collect();
        seqs.sort_unstable();
        seqs.dedup();
        seqs
    }

    /// The newest sequence among subjects the filter selects.
    pub fn last_seq_matching(&self, filter: &SubjectFilter) -> Option<u64> {
        if filter.is_all() {
            return self.messages.last().map(|(seq, _)| seq);
        }
        self.subjects.last_seq_matching(filter)
    }

    /// First sequence whose message was stored at or after `ts_nanos`; `last_seq + 1` when
    /// there is none (deliver policy `by_start_time`).
    pub fn first_seq_at_or_after(&self, ts_nanos: i64) -> u64 {
        self.messages
            .iter()
            .find(|(_, msg)| msg.ts_nanos >= ts_nanos)
            .map_or(self.last_seq + 1, |(seq, _)| seq)
    }

    /// Per-subject counts for StreamInfo's `subjects_filter`.
    pub fn subject_counts(&self, filter: &SubjectFilter) -> BTreeMap<String, u64> {
        self.subjects.counts_matching(filter)
    }

    /// Interior deleted sequences (StreamInfo `deleted_details`), ascending.
    pub fn deleted_seqs(&self) -> Vec<u64> {
        if self.messages.is_empty() {
            return Vec::new();
        }
        (self.first_seq..=self.last_seq)
            .filter(|seq| !self.messages.contains(*seq))
            .collect()
    }

    pub fn summary(&self) -> StreamSummary {
        let messages = self.message_count();
        let num_deleted = if messages == 0 {
            0
        } else {
            (self.last_seq - self.first_seq + 1) - messages
        };
        StreamSummary {
            messages,
            bytes: self.bytes,
            first_seq: self.first_seq,
            first_ts_nanos: self.messages.first().map_or(0, |(_, msg)| msg.ts_nanos),
            last_seq: self.last_seq,
            last_ts_nanos: self.last_ts_nanos,
            num_subjects: self.subjects.num_subjects() as u64,
            num_deleted,
        }
    }

    pub(super) fn last_seq_for_subject(&self, subject: &str) -> Option<u64> {
        if is_literal(subject) {
            self.subjects.last_seq(subject)
        } else {
            self.last_seq_matching(&SubjectFilter::new([subject]))
        }
    }

    /// Stores a message at the next sequence (its metadata: the body is the message
    /// store's; its header block only feeds the TTL index). `size` is its `stored_size`.
    /// Limits are the caller's business.
    pub(super) fn insert_next(
        &mut self,
        subject: &str,
        ts_nanos: i64,
        size: u64,
        headers: Option<&[u8]>,
    ) -> u64 {
        let seq = self.last_seq + 1;
        if self.messages.is_empty() {
            self.first_seq = seq;
        }
        self.last_seq = seq;
        self.last_ts_nanos = ts_nanos;
        self.bytes += size;
        let subject = self.subjects.insert(subject, seq);
        let size = u32::try_from(size).unwrap_or(u32::MAX);
        let meta = MsgMeta {
            ts_nanos,
            size,
            subject,
        };
        self.messages.insert(seq, meta);
        if let Some(headers) = headers {
            self.ttls.insert(seq, ts_nanos, headers);
            self.schedules
                .insert(seq, ts_nanos, headers, self.schedule_clock);
        }
        seq
    }

    /// Uses up the next sequence without storing anything (interest stream with no
    /// interested consumer), as nats-server's `SkipMsg` does.
    pub(super) fn skip_next(&mut self, ts_nanos: i64) -> u64 {
        self.last_seq += 1;
        self.last_ts_nanos = ts_nanos;
        if self.messages.is_empty() {
            self.first_seq = self.last_seq + 1;
        }
        self.last_seq
    }

    /// Removes one message, keeping bytes, the subject index and `first_seq` right.
    pub(super) fn remove_seq(&mut self, seq: u64) -> Option<MsgMeta> {
        let msg = self.messages.remove(seq)?;
        self.ttls.forget(seq);
        self.schedules.forget(seq);
        self.bytes = self.bytes.saturating_sub(u64::from(msg.size));
        self.subjects.remove(msg.subject, seq);
        if seq == self.first_seq || self.messages.is_empty() {
            self.first_seq = self
                .messages
                .first()
                .map_or(self.last_seq + 1, |(first, _)| first);
        }
        Some(msg)
    }
}

/// Equal when the same messages (sequence, subject, time, size) and bookkeeping: subject
/// ids are local numbering and do not count.
impl PartialEq for StreamState {
    fn eq(&self, other: &Self) -> bool {
        fn messages(state: &StreamState) -> Vec<(u64, MsgInfo<'_>)> {
            state
                .messages
                .iter()
                .map(|(seq, meta)| (seq, state.info(meta)))
                .collect()
        }
        self.config == other.config
            && self.limits == other.limits
            && self.subjects == other.subjects
            && self.first_seq == other.first_seq
            && self.last_seq == other.last_seq
            && self.last_ts_nanos == other.last_ts_nanos
            && self.bytes == other.bytes
            && self.dedup == other.dedup
            && self.last_msg_id == other.last_msg_id
            && messages(self) == messages(other)
            && self.ttls.live(|seq| self.contains(seq))
                == other.ttls.live(|seq| other.contains(seq))
            && self.schedules == other.schedules
            && self.schedule_clock == other.schedule_clock
    }
}

impl Eq for StreamState {}

fn is_literal(subject: &str) -> bool {
    !subject.split('.').any(|token| token == "*" || token == ">")
}
