//! `ack_policy: flow_control` (nats-server 2.14, ADR-60): a push consumer acknowledged by
//! the answers to its flow-control requests instead of `$JS.ACK` replies. The receiver (a
//! stream sourcing through a durable consumer, `jetstream::sourcing`) answers each request
//! with `Nats-Last-Stream` / `Nats-Last-Consumer`, the last message it has stored; the
//! answer to the latest request acknowledges everything up to that stream sequence as one
//! replicated `AckAll`.
//!
//! A request goes out after the usual window (`push.rs`), when the consumer reaches
//! `max_ack_pending` (delivery stops there until an answer), and after an idle heartbeat
//! while messages are pending, so an idle stream's last messages are acknowledged too.
//! Nothing is redelivered by timer (`jscore::consumer::policy`): what the receiver lost
//! comes back when it resets the consumer (`CONSUMER.RESET`).

use tokio::time::Instant;

use super::outbox;
use super::task::{ConsumerTask, Gone, RETRY_AFTER};
use crate::jsapi::{AckPolicy, ErrorKind};
use crate::jscore::consumer::ConsumerCommand;
use crate::jscore::group::StreamCommand;

impl ConsumerTask {
    pub(super) fn acks_by_flow_control(&self) -> bool {
        self.config.ack_policy == AckPolicy::FlowControl
    }

    /// Proposes the ack a flow-control answer carried, if any.
    pub(super) async fn propose_flow_control_ack(&mut self) -> Result<(), Gone> {
        let Some(stream_seq) = self.flow_control_ack.take() else {
            return Ok(());
        };
        let command = StreamCommand::Consumer {
            name: self.name.clone(),
            command: ConsumerCommand::AckAll { stream_seq },
        };
        match self.stream.propose_one(command).await {
            Ok(_) => {
                self.activity.last_acked_nanos.store(
                    crate::jetstream::now_nanos(),
                    std::sync::atomic::Ordering::Relaxed,
                );
                Ok(())
            }
            Err(error) if error.is(ErrorKind::ConsumerNotFound) => Err(Gone),
            Err(error) => {
                // Kept for the next step: the next answer acknowledges at least as much.
                tracing::warn!(consumer = %self.name, "flow-control ack failed: {error}");
                self.flow_control_ack = Some(stream_seq);
                self.retry_at = Some(Instant::now() + RETRY_AFTER);
                Ok(())
            }
        }
    }

    /// Whether a consumer acknowledged by flow control has as many messages pending as it
    /// may: a request must go out now, or delivery would wait for the next heartbeat.
    pub(super) fn at_ack_pending_limit(&self) -> bool {
        if !self.acks_by_flow_control() {
            return false;
        }
        self.stream.view().read(|group| {
            group.consumer(&self.name).is_some_and(|consumer| {
                consumer
                    .policy()
                    .max_ack_pending
                    .is_some_and(|max| consumer.num_ack_pending() >= max)
            })
        })
    }

    /// After an idle heartbeat: a consumer acknowledged by flow control with messages
    /// pending and no request outstanding asks again.
    pub(super) fn flow_control_after_heartbeat(&mut self) {
        if !self.acks_by_flow_control() {
            return;
        }
        let pending = self.stream.view().read(|group| {
            group
                .consumer(&self.name)
                .map_or(0, |consumer| consumer.num_ack_pending())
        });
        self.request_flow_control_if(pending > 0);
    }

    /// Sends a flow-control request to the deliver subject when `wanted` and none is
    /// outstanding.
    pub(super) fn request_flow_control_if(&mut self, wanted: bool) {
        let Some(push) = self.push.as_mut() else {
            return;
        };
        if !wanted || push.flow_control_outstanding() {
            return;
        }
        let reply = outbox::flow_control_subject(self.stream.name(), &self.name);
        self.outbox.status_with_reply(
            &push.deliver_subject,
            outbox::flow_control_request(),
            reply.clone(),
        );
        push.flow_control_sent(reply);
    }
}
