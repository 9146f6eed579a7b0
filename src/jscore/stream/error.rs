//! Why a stream command was refused, as a typed error that maps onto nats-server's
//! `ApiError` (same `code`/`err_code`/description) for the PubAck or API reply.
//!
//! A refusal is itself a deterministic outcome: every replica refuses the same command the
//! same way, and nothing in the stream changes.

use crate::jsapi::error::{ApiError, ErrorKind};

/// A refused Append (publish).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AppendError {
    #[error("invalid operation on sealed stream")]
    Sealed,
    #[error("expected stream does not match")]
    StreamMismatch,
    #[error("wrong last sequence: {actual}")]
    WrongLastSequence { actual: u64 },
    #[error("missing sequence for expected last sequence per subject")]
    MissingLastSubjectSequence,
    #[error("wrong last msg ID: {actual}")]
    WrongLastMsgId { actual: String },
    #[error("rollup not permitted")]
    RollupNotPermitted,
    #[error("rollup value invalid: {0:?}")]
    RollupInvalid(String),
    /// In an atomic batch, `Nats-Rollup: sub` on a subject an earlier member wrote.
    #[error("batch rollup sub invalid")]
    BatchRollupSubInvalid,
    /// In an atomic batch, `Nats-Rollup: all` on any member but the first.
    #[error("batch rollup all invalid")]
    BatchRollupAllInvalid,
    #[error("message size exceeds maximum allowed")]
    MessageTooLarge,
    #[error("header size exceeds maximum allowed of 64k")]
    HeadersTooLarge,
    #[error("maximum messages exceeded")]
    MaxMessages,
    #[error("maximum bytes exceeded")]
    MaxBytes,
    #[error("maximum messages per subject exceeded")]
    MaxMessagesPerSubject,
    /// The publish headers of features a stream refuses (`unsupported_headers`), and
    /// counters (`counter.rs`).
    #[error("per-message TTL is disabled")]
    TtlDisabled,
    #[error("invalid per-message TTL")]
    TtlInvalid,
    #[error("message counters is disabled")]
    CountersDisabled,
    #[error("message counter increment is invalid")]
    CounterIncrementInvalid,
    #[error("message counter increment is missing")]
    CounterIncrementMissing,
    #[error("message counter has payload")]
    CounterHasPayload,
    #[error("message counter is broken")]
    CounterBroken,
    #[error("atomic publish is disabled")]
    AtomicPublishDisabled,
    #[error("message schedules is disabled")]
    SchedulesDisabled,
    /// Message schedules (`schedule.rs`).
    #[error("message schedules pattern is invalid")]
    SchedulePatternInvalid,
    /// Also every zone but `UTC`, which jetraft cannot load (`schedule.rs`).
    #[error("message schedules time zone is invalid")]
    ScheduleTimeZoneInvalid,
    #[error("message schedules target is invalid")]
    ScheduleTargetInvalid,
    #[error("message schedules invalid per-message TTL")]
    ScheduleTtlInvalid,
    #[error("message schedules invalid rollup")]
    ScheduleRollupInvalid,
    #[error("message schedules source is invalid")]
    ScheduleSourceInvalid,
    #[error("message schedules invalid scheduler")]
    SchedulerInvalid,
}

impl AppendError {
    /// The error nats-server would put in the PubAck.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            AppendError::Sealed => ApiError::new(ErrorKind::StreamSealed),
            AppendError::StreamMismatch => ApiError::new(ErrorKind::StreamNotMatch),
            AppendError::WrongLastSequence { actual } => {
                ApiError::with(ErrorKind::StreamWrongLastSequence, &[actual])
            }
            AppendError::MissingLastSubjectSequence => {
                ApiError::new(ErrorKind::StreamExpectedLastSeqPerSubjectInvalid)
            }
            AppendError::WrongLastMsgId { actual } => {
                ApiError::with(ErrorKind::StreamWrongLastMsgId, &[actual])
            }
            AppendError::RollupNotPermitted
            | AppendError::RollupInvalid(_)
            | AppendError::BatchRollupSubInvalid
            | AppendError::BatchRollupAllInvalid => {
                ApiError::with_detail(ErrorKind::StreamRollupFailed, self)
            }
            AppendError::MessageTooLarge => ApiError::new(ErrorKind::StreamMessageExceedsMaximum),
            AppendError::HeadersTooLarge => ApiError::new(ErrorKind::StreamHeaderExceedsMaximum),
            AppendError::MaxMessages
            | AppendError::MaxBytes
            | AppendError::MaxMessagesPerSubject => {
                ApiError::with_detail(ErrorKind::StreamStoreFailed, self)
            }
            AppendError::TtlDisabled => ApiError::new(ErrorKind::MessageTtlDisabled),
            AppendError::TtlInvalid => ApiError::new(ErrorKind::MessageTtlInvalid),
            AppendError::CountersDisabled => ApiError::new(ErrorKind::MessageIncrDisabled),
            AppendError::CounterIncrementInvalid => ApiError::new(ErrorKind::MessageIncrInvalid),
            AppendError::CounterIncrementMissing => ApiError::new(ErrorKind::MessageIncrMissing),
            AppendError::CounterHasPayload => ApiError::new(ErrorKind::MessageIncrPayload),
            AppendError::CounterBroken => ApiError::new(ErrorKind::MessageCounterBroken),
            AppendError::AtomicPublishDisabled => ApiError::new(ErrorKind::AtomicPublishDisabled),
            AppendError::SchedulesDisabled => ApiError::new(ErrorKind::MessageSchedulesDisabled),
            AppendError::SchedulePatternInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesPatternInvalid)
            }
            AppendError::ScheduleTimeZoneInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesTimeZoneInvalid)
            }
            AppendError::ScheduleTargetInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesTargetInvalid)
            }
            AppendError::ScheduleTtlInvalid => ApiError::new(ErrorKind::MessageSchedulesTtlInvalid),
            AppendError::ScheduleRollupInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesRollupInvalid)
            }
            AppendError::ScheduleSourceInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesSourceInvalid)
            }
            AppendError::SchedulerInvalid => {
                ApiError::new(ErrorKind::MessageSchedulesSchedulerInvalid)
            }
        }
    }
}

impl From<AppendError> for ApiError {
    fn from(error: AppendError) -> Self {
        error.to_api_error()
    }
}

/// A refused purge or message delete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoveError {
    #[error("stream purge not permitted")]
    PurgeDenied,
    #[error("message delete not permitted")]
    DeleteDenied,
    #[error("invalid operation on sealed stream")]
    Sealed,
    /// `seq` and `keep` together (nats-server answers 10003 bad request).
    #[error("bad request")]
    SeqAndKeep,
    #[error("sequence {seq} not found")]
    SequenceNotFound { seq: u64 },
}

impl RemoveError {
    pub fn to_api_error(&self) -> ApiError {
        match self {
            RemoveError::PurgeDenied => ApiError::with_detail(ErrorKind::StreamPurgeFailed, self),
            RemoveError::DeleteDenied => {
                ApiError::with_detail(ErrorKind::StreamMsgDeleteFailed, self)
            }
            RemoveError::Sealed => ApiError::new(ErrorKind::StreamSealed),
            RemoveError::SeqAndKeep => ApiError::new(ErrorKind::BadRequest),
            RemoveError::SequenceNotFound { seq } => {
                ApiError::with(ErrorKind::SequenceNotFound, &[seq])
            }
        }
    }
}

impl From<RemoveError> for ApiError {
    fn from(error: RemoveError) -> Self {
        error.to_api_error()
    }
}
