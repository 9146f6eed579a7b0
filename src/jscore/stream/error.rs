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
    /// The publish headers of features jetraft refuses (`unsupported_headers`).
    #[error("per-message TTL is disabled")]
    TtlDisabled,
    #[error("invalid per-message TTL")]
    TtlInvalid,
    #[error("message counters is disabled")]
    CountersDisabled,
    #[error("message counter increment is invalid")]
    CounterIncrementInvalid,
    #[error("atomic publish is disabled")]
    AtomicPublishDisabled,
    #[error("message schedules is disabled")]
    SchedulesDisabled,
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
            AppendError::RollupNotPermitted | AppendError::RollupInvalid(_) => {
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
            AppendError::AtomicPublishDisabled => ApiError::new(ErrorKind::AtomicPublishDisabled),
            AppendError::SchedulesDisabled => ApiError::new(ErrorKind::MessageSchedulesDisabled),
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
