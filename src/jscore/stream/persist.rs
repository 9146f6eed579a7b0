//! Exporting and restoring a `StreamState`, for the stream group's state machine, which
//! keeps it in sled (`jetstream::stream_machine`): the few numbers that are not derivable
//! from the stored messages (`StreamScalars`), the duplicate window's entries, and
//! `StreamState::restore`, which rebuilds the derived parts (limits, subject index) from the
//! config and the messages' metadata (their bodies are not needed).
//!
//! No behaviour of the stream depends on this file: `restore(export(s)) == s`.

use std::sync::Arc;

use crate::jsapi::stream_config::StreamConfig;

use super::dedup::DedupWindow;
use super::limits::StreamLimits;
use super::message::{MsgInfo, MsgMeta};
use super::meta_map::MetaMap;
use super::meta_spill::{MetaSpill, RESIDENT_CHUNKS, RESTORE_RESIDENT_CHUNKS};
use super::schedule_index::ScheduleIndex;
use super::state::StreamState;
use super::subject_index::{SubjectId, SubjectIndex};
use super::ttl_index::TtlIndex;

/// The parts of a `StreamState` that its config and messages do not determine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamScalars {
    pub first_seq: u64,
    pub last_seq: u64,
    pub last_ts_nanos: i64,
    /// Kept rather than recomputed so a restore is exact whatever the accounting history.
    pub bytes: u64,
    pub last_msg_id: String,
}

/// One duplicate-window entry, oldest first (see `DedupWindow::entries`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupRecord {
    pub ts_nanos: i64,
    pub msg_id: String,
    pub seq: Option<u64>,
}

impl StreamState {
    pub fn scalars(&self) -> StreamScalars {
        StreamScalars {
            first_seq: self.first_seq,
            last_seq: self.last_seq,
            last_ts_nanos: self.last_ts_nanos,
            bytes: self.bytes,
            last_msg_id: self.last_msg_id.clone(),
        }
    }

    /// Stored sequences, ascending.
    pub fn seqs(&self) -> impl DoubleEndedIterator<Item = u64> + '_ {
        self.messages.keys()
    }

    /// Duplicate-window entries in recording order: (time, msg id, sequence).
    pub fn dedup_entries(&self) -> impl DoubleEndedIterator<Item = (i64, &str, Option<u64>)> + '_ {
        self.dedup.entries()
    }

    /// The schedule clock (`StreamState::schedule_clock`), persisted beside the scalars.
    pub fn schedule_clock(&self) -> i64 {
        self.schedule_clock
    }

    pub fn dedup_entry_count(&self) -> usize {
        self.dedup.entry_count()
    }

    /// Rebuilds a stream from its config, its scalars, its messages (metadata) and its
    /// duplicate-window entries (in recording order), as exported by the accessors above.
    pub fn restore<'a>(
        config: StreamConfig,
        scalars: StreamScalars,
        messages: impl IntoIterator<Item = (u64, MsgInfo<'a>)>,
        dedup: impl IntoIterator<Item = DedupRecord>,
    ) -> Self {
        let mut restoring = StreamState::restoring();
        for (seq, msg) in messages {
            restoring.push(seq, msg, None);
        }
        StreamState::restore_from(config, scalars, restoring, dedup)
    }

    /// Starts a restore that takes the messages one at a time (a caller reading them in
    /// place from stored blocks, which cannot lend them all at once).
    pub fn restoring() -> Restoring {
        Restoring::default()
    }

    /// [`restore`](Self::restore) with the messages gathered in `restoring`.
    pub fn restore_from(
        config: StreamConfig,
        scalars: StreamScalars,
        mut restoring: Restoring,
        dedup: impl IntoIterator<Item = DedupRecord>,
    ) -> Self {
        let limits = StreamLimits::from_config(&config);
        restoring.flush_run();
        let mut messages = restoring.messages;
        messages.seal_all();
        messages.keep_resident(RESIDENT_CHUNKS);
        messages.batch_spill_writes(false);
        let mut schedules = restoring.schedules;
        schedules.catch_up(restoring.schedule_clock);
        let mut window = DedupWindow::default();
        for record in dedup {
            window.restore_entry(record.ts_nanos, &record.msg_id, record.seq);
        }
        Self {
            config,
            limits,
            messages,
            subjects: restoring.subjects,
            first_seq: scalars.first_seq,
            last_seq: scalars.last_seq,
            last_ts_nanos: scalars.last_ts_nanos,
            bytes: scalars.bytes,
            dedup: window,
            last_msg_id: scalars.last_msg_id,
            ttls: restoring.ttls,
            schedules,
            schedule_clock: restoring.schedule_clock,
        }
    }
}

/// The messages of a stream being restored (see [`StreamState::restoring`]).
#[derive(Debug, Default)]
pub struct Restoring {
    messages: MetaMap,
    subjects: SubjectIndex,
    ttls: TtlIndex,
    schedules: ScheduleIndex,
    schedule_clock: i64,
    /// The subject of the message pushed last: a stream's neighbours often share one.
    last_subject: Option<SubjectId>,
    /// Sequences of `last_subject` pushed since its entry was last updated: added to it
    /// together ([`SubjectIndex::insert_all_at`]), a lookup per chunk rather than per message.
    run: Vec<u64>,
}

/// The most sequences [`Restoring::run`] gathers before they go to the subject's entry.
const RUN_MAX: usize = 4096;

impl Restoring {
    /// Keeps the sealed metadata chunks beyond the [`RESTORE_RESIDENT_CHUNKS`] touched last
    /// in `file` from now on, and the restored stream beyond its `RESIDENT_CHUNKS`
    /// (`StreamState::spill_metadata_to`, ADR 0033): a restore never holds a whole long
    /// stream's metadata in memory. Until the restore ends, the chunks it sends out go to
    /// the file in batches (`MetaMap::batch_spill_writes`).
    pub fn spill_metadata_to(&mut self, file: Arc<dyn MetaSpill>) {
        self.messages.spill_to(file, RESTORE_RESIDENT_CHUNKS);
        self.messages.batch_spill_writes(true);
    }

    /// The stored schedule clock (0 when none was stored: nothing fired yet).
    pub fn set_schedule_clock(&mut self, clock: i64) {
        self.schedule_clock = clock;
    }

    /// Adds stored message `seq` (in any order) with its header block, which the TTL and
    /// schedule indexes read as the apply did. Returns its subject's id, which
    /// [`push_as`](Self::push_as) takes for the next messages of the same subject.
    pub fn push(&mut self, seq: u64, msg: MsgInfo<'_>, headers: Option<&[u8]>) -> SubjectId {
        let subject = match self.last_subject {
            Some(id) if self.subjects.name(id) == msg.subject => id,
            _ => {
                self.flush_run();
                let id = self.subjects.insert(msg.subject, seq);
                self.last_subject = Some(id);
                self.add(seq, id, msg, headers, false);
                return id;
            }
        };
        self.push_as(seq, subject, msg, headers);
        subject
    }

    /// [`push`](Self::push) of a message whose subject `push` already returned the id of
    /// (a restore resolves a block's few subjects once, not each message's).
    pub fn push_as(
        &mut self,
        seq: u64,
        subject: SubjectId,
        msg: MsgInfo<'_>,
        headers: Option<&[u8]>,
    ) {
        debug_assert_eq!(self.subjects.name(subject), msg.subject);
        if self.last_subject != Some(subject) {
            self.flush_run();
            self.last_subject = Some(subject);
        }
        self.add(seq, subject, msg, headers, true);
    }

    /// The message's metadata, its TTL and schedule; its sequence to the subject's run when
    /// `run` (else the subject index has it already).
    fn add(
        &mut self,
        seq: u64,
        subject: SubjectId,
        msg: MsgInfo<'_>,
        headers: Option<&[u8]>,
        run: bool,
    ) {
        if let Some(headers) = headers {
            self.ttls.insert(seq, msg.ts_nanos, headers);
            // The clock is applied once all are in (`restore_from`).
            self.schedules.insert(seq, msg.ts_nanos, headers, i64::MIN);
        }
        if run {
            if self.run.len() == RUN_MAX {
                self.flush_run();
            }
            self.run.push(seq);
        }
        let meta = MsgMeta {
            ts_nanos: msg.ts_nanos,
            size: u32::try_from(msg.stored_size).unwrap_or(u32::MAX),
            subject,
        };
        self.messages.insert(seq, meta);
    }

    /// Adds the gathered run of sequences to their subject's entry.
    fn flush_run(&mut self) {
        if let Some(id) = self.last_subject {
            self.subjects.insert_all_at(id, &self.run);
        }
        self.run.clear();
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;
    use crate::jscore::stream::AppendRequest;

    fn publish(stream: &mut StreamState, subject: &str, msg_id: Option<&str>, now: i64) {
        let headers =
            msg_id.map(|id| Bytes::from(format!("NATS/1.0\r\nNats-Msg-Id: {id}\r\n\r\n")));
        let request = AppendRequest {
            subject: subject.into(),
            headers,
            payload: Bytes::from_static(b"data"),
            now_nanos: now,
        };
        stream.append(request, &|_| true).unwrap();
    }

    fn round_trip(stream: &StreamState) -> StreamState {
        let messages: Vec<(u64, MsgInfo<'_>)> = stream
            .seqs()
            .map(|seq| (seq, stream.get(seq).unwrap()))
            .collect();
        let dedup: Vec<DedupRecord> = stream
            .dedup_entries()
            .map(|(ts_nanos, id, seq)| DedupRecord {
                ts_nanos,
                msg_id: id.to_string(),
                seq,
            })
            .collect();
        StreamState::restore(stream.config().clone(), stream.scalars(), messages, dedup)
    }

    #[test]
    fn restore_of_the_export_is_the_same_stream() {
        let mut config = StreamConfig::new("S", &["s.>"]);
        config.max_msgs_per_subject = 2;
        // Short enough that some ids expire and are recorded again.
        config.duplicate_window = 25;
        let mut stream = StreamState::new(config);
        assert_eq!(round_trip(&stream), stream);
        for i in 0..10 {
            let id = format!("id-{}", i % 4);
            publish(&mut stream, &format!("s.{}", i % 3), Some(&id), i * 10);
        }
        publish(&mut stream, "s.x", None, 195);
        publish(&mut stream, "s.y", Some("late"), 200);
        stream.delete_msg(stream.first_seq()).unwrap();
        assert!(stream.dedup_entry_count() > 0);
        assert_eq!(round_trip(&stream), stream);
        stream.expire(10_000_000_000_000);
        assert_eq!(round_trip(&stream), stream);
    }
}
