//! The consumer commands a stream group's log carries, and `apply`, which dispatches them.
//! Every variant carries the time it needs, chosen by the leader when proposing.

use crate::jscore::stream::StreamState;

use super::ack::AckOutcome;
use super::deliver::Delivery;
use super::state::ConsumerState;

/// Serde (postcard, inside a stream entry) encodes the variant index: the variant order is a
/// log format, append only (pinned in `jetstream/stream_machine/tests_formats.rs`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConsumerCommand {
    /// Deliver up to `max_messages` (a pull request's batch, or a push consumer's window).
    /// postcard writes a `usize` as the same varint as a `u64`, so the width of the platform
    /// that wrote an entry does not matter.
    DeliverNext {
        max_messages: usize,
        now_nanos: i64,
    },
    Ack {
        stream_seq: u64,
    },
    AckAll {
        stream_seq: u64,
    },
    Nak {
        stream_seq: u64,
        delay_nanos: Option<i64>,
        now_nanos: i64,
    },
    Term {
        stream_seq: u64,
    },
    InProgress {
        stream_seq: u64,
        now_nanos: i64,
    },
    /// `CONSUMER.RESET` (nats-server 2.14, `reset.rs`): start over from stream sequence
    /// `seq`, or from just above the ack floor when `seq` is 0. The API layer has checked it.
    Reset {
        seq: u64,
    },
}

/// What a consumer command did.
/// Serde (postcard) encodes the variant index: the variant order is a wire format, append only.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ConsumerOutcome {
    Delivered(Vec<Delivery>),
    Ack(AckOutcome),
    /// A reset: the stream sequence the consumer starts from again.
    Reset {
        reset_seq: u64,
    },
}

impl ConsumerState {
    pub fn apply(&mut self, stream: &StreamState, command: ConsumerCommand) -> ConsumerOutcome {
        match command {
            ConsumerCommand::DeliverNext {
                max_messages,
                now_nanos,
            } => ConsumerOutcome::Delivered(self.deliver_next(stream, max_messages, now_nanos)),
            ConsumerCommand::Ack { stream_seq } => ConsumerOutcome::Ack(self.ack(stream_seq)),
            ConsumerCommand::AckAll { stream_seq } => {
                ConsumerOutcome::Ack(self.ack_all(stream_seq))
            }
            ConsumerCommand::Nak {
                stream_seq,
                delay_nanos,
                now_nanos,
            } => ConsumerOutcome::Ack(self.nak(stream_seq, delay_nanos, now_nanos)),
            ConsumerCommand::Term { stream_seq } => ConsumerOutcome::Ack(self.term(stream_seq)),
            ConsumerCommand::InProgress {
                stream_seq,
                now_nanos,
            } => ConsumerOutcome::Ack(self.in_progress(stream_seq, now_nanos)),
            ConsumerCommand::Reset { seq } => ConsumerOutcome::Reset {
                reset_seq: self.reset(seq),
            },
        }
    }
}
