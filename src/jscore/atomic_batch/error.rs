//! Why a batch member or a batch was refused, with nats-server's err_codes and texts
//! (`server/errors.json`, checked against nats-server 2.15.1's answers).

use crate::jsapi::error::{ApiError, ErrorKind};
use crate::jscore::stream::AppendError;

/// A refused batch member or commit. Every refusal but `Member` drops the batch at once;
/// `Member` (a message the stream would refuse) is answered at the commit, as nats-server
/// checks the messages there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BatchError {
    /// `Nats-Batch-Id` longer than 64 bytes (10179).
    #[error("atomic publish batch ID is invalid")]
    InvalidId,
    /// No `Nats-Batch-Sequence`, or not a number (10175).
    #[error("atomic publish sequence is missing")]
    MissingSeq,
    /// Unknown batch, a gap, a restarted batch, a commit with nothing to store, or a batch
    /// abandoned or lost with its leader (10176).
    #[error("atomic publish batch is incomplete")]
    Incomplete,
    /// A header a batch member may not carry (10177).
    #[error("atomic publish unsupported header used: {0}")]
    UnsupportedHeader(&'static str),
    /// More members than the limit (10199; the text names the limit).
    #[error("atomic publish batch is too large: {max}")]
    TooLarge { max: usize },
    /// A `Nats-Batch-Commit` other than `1` or `eob` (10200).
    #[error("atomic publish batch commit is invalid")]
    InvalidCommit,
    /// A `Nats-Msg-Id` seen in the duplicate window or twice in the batch (10201).
    #[error("atomic publish batch contains duplicate message id")]
    DuplicateMsgId,
    /// Too many batches (or staged bytes) in flight on the stream (10210, 429).
    #[error("atomic publish too many inflight")]
    TooManyInflight,
    /// A member the stream refuses (wrong expected sequence, limits, TTL disabled, …).
    #[error(transparent)]
    Member(#[from] AppendError),
}

impl BatchError {
    /// The error nats-server puts in the PubAck.
    pub fn to_api_error(&self) -> ApiError {
        match self {
            BatchError::InvalidId => ApiError::new(ErrorKind::AtomicPublishInvalidBatchId),
            BatchError::MissingSeq => ApiError::new(ErrorKind::AtomicPublishMissingSeq),
            BatchError::Incomplete => ApiError::new(ErrorKind::AtomicPublishIncompleteBatch),
            BatchError::UnsupportedHeader(header) => {
                ApiError::with(ErrorKind::AtomicPublishUnsupportedHeader, &[header])
            }
            BatchError::TooLarge { max } => {
                ApiError::with(ErrorKind::AtomicPublishTooLargeBatch, &[max])
            }
            BatchError::InvalidCommit => ApiError::new(ErrorKind::AtomicPublishInvalidBatchCommit),
            BatchError::DuplicateMsgId => ApiError::new(ErrorKind::AtomicPublishDuplicateMsgId),
            BatchError::TooManyInflight => ApiError::new(ErrorKind::AtomicPublishTooManyInflight),
            BatchError::Member(error) => error.to_api_error(),
        }
    }
}

impl From<BatchError> for ApiError {
    fn from(error: BatchError) -> Self {
        error.to_api_error()
    }
}
