//! Pull-consumer priority groups (ADR-42, nats-server 2.11/2.12): which waiting request a
//! consumer with a `priority_policy` serves next, and the pin of `pinned_client` groups.
//!
//! * `overflow`: a request with `min_pending` / `min_ack_pending` is served only while the
//!   consumer has at least that many messages pending / awaiting ack (either suffices); one
//!   without both is served as usual.
//! * `pinned_client`: the first request without a pin `id` gets a fresh pin (a random id,
//!   the `PINNED` advisory); from then on only requests carrying that id are served, and
//!   each message they get carries it in `Nats-Pin-Id`. Requests without an id wait; a
//!   request with another id is refused at once (`423 Nats-Pin-Id mismatch`) or, once
//!   queued, when it comes up (`423 Nats-Wrong-Pin-Id`, with what it still wanted). The pin
//!   lapses after `priority_timeout` without a pull from the pinned client (`UNPINNED`,
//!   reason `timeout`), or by `$JS.API.CONSUMER.UNPIN` (reason `admin`).
//! * `prioritized` (2.12): requests queue by their `priority` (0 first), FIFO within one
//!   (`WaitingQueue::push_prioritized`).
//!
//! Leader memory only, as on nats-server (its pin lives in the consumer leader and is
//! dropped when leadership moves): a new leader starts unpinned, so the old pinned client's
//! next request gets `423 Nats-Wrong-Pin-Id` and the client takes the new pin. Only the
//! config (policy, groups, timeout) is replicated.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use super::outbox;
use super::waiting::{WaitingQueue, WaitingRequest};
use crate::jetstream::token::random_token;
use crate::jsapi::{ConsumerConfig, PriorityGroupState, PriorityPolicy, PullRequest, Timestamp};
use crate::wire::headers::status_block;

/// The header carrying the pin on each message delivered to the pinned client.
pub const PIN_ID_HEADER: &str = "Nats-Pin-Id";
/// Length of a pin id (nats-server uses a 22-character NUID).
const PIN_ID_LEN: usize = 22;

/// nats-server's checks of a pull request's priority fields against the consumer, made
/// before it is queued; the error is the `400` status to send back.
pub(super) fn check_request(config: &ConsumerConfig, request: &PullRequest) -> Result<(), Bytes> {
    let policy = config.priority_policy;
    let overflow_fields = request.min_pending != 0 || request.min_ack_pending != 0;
    if overflow_fields && policy != PriorityPolicy::Overflow {
        return Err(outbox::bad_request("Not a Overflow Priority consumer"));
    }
    if !request.id.is_empty() && policy != PriorityPolicy::PinnedClient {
        return Err(outbox::bad_request("Not a Pinned Client Priority consumer"));
    }
    if !(0..=9).contains(&request.priority) {
        return Err(outbox::bad_request("Priority must be between 0 and 9"));
    }
    if policy == PriorityPolicy::None {
        return Ok(());
    }
    if request.group.is_empty() {
        return Err(outbox::bad_request("Priority Group missing"));
    }
    if !config.priority_groups.contains(&request.group) {
        return Err(outbox::bad_request("Invalid Priority Group"));
    }
    Ok(())
}

/// `423 Nats-Pin-Id mismatch`: a request arrived with a pin that is not the current one.
pub fn pin_mismatch() -> Bytes {
    status_block(423, Some("Nats-Pin-Id mismatch"), &[])
}

/// `423 Nats-Wrong-Pin-Id` for a queued request whose pin is not (or no longer) the one.
pub fn wrong_pin(request: &WaitingRequest) -> Bytes {
    let messages = request.batch_left.to_string();
    let bytes = request.pending_bytes().to_string();
    status_block(
        423,
        Some("Nats-Wrong-Pin-Id"),
        &[
            (outbox::PENDING_MESSAGES, &messages),
            (outbox::PENDING_BYTES, &bytes),
        ],
    )
}

/// The current pin of a `pinned_client` consumer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub id: String,
    pub group: String,
    pub pinned_at: Timestamp,
    /// When it lapses unless the pinned client pulls again.
    pub lapses_at: Instant,
}

/// What choosing the next request did besides choosing.
#[derive(Debug, Default)]
pub struct Selection {
    /// The index in the waiting queue of the request to serve now.
    pub serve: Option<usize>,
    /// Requests removed for holding a wrong pin: each gets `wrong_pin`.
    pub wrong_pin: Vec<WaitingRequest>,
    /// The request served needs the pin first (`pin_request`), once there is a message
    /// to deliver: nats-server pins a client only when it delivers to it.
    pub pin_wanted: bool,
}

/// A consumer's priority-group state in its delivery task.
#[derive(Debug)]
pub struct PriorityState {
    policy: PriorityPolicy,
    groups: Vec<String>,
    timeout: Duration,
    pin: Option<Pin>,
}

impl PriorityState {
    pub fn new(config: &ConsumerConfig) -> Self {
        PriorityState {
            policy: config.priority_policy,
            groups: config.priority_groups.clone(),
            timeout: Duration::from_nanos(config.priority_timeout.max(0) as u64),
            pin: None,
        }
    }

    /// Takes an updated config; a pin survives only while the policy stays `pinned_client`
    /// and its group stays configured. Returns the pin dropped, if any.
    pub fn update(&mut self, config: &ConsumerConfig) -> Option<Pin> {
        let pin = self.pin.take();
        *self = PriorityState::new(config);
        match pin {
            Some(pin)
                if self.policy == PriorityPolicy::PinnedClient
                    && self.groups.contains(&pin.group) =>
            {
                self.pin = Some(pin);
                None
            }
            dropped => dropped,
        }
    }

    pub fn is_prioritized(&self) -> bool {
        self.policy == PriorityPolicy::Prioritized
    }

    /// A request passed `check_request`: for `pinned_client`, one carrying the current pin
    /// keeps the pin alive; one carrying another pin is refused (`pin_mismatch`).
    pub fn admit(&mut self, request: &WaitingRequest, now: Instant) -> Result<(), Bytes> {
        let Some(pin) = self.pin.as_mut() else {
            return Ok(());
        };
        if request.pin_id == pin.id {
            pin.lapses_at = now + self.timeout;
            Ok(())
        } else if request.pin_id.is_empty() {
            Ok(())
        } else {
            Err(pin_mismatch())
        }
    }

    /// The pin id to put on messages delivered now, if any.
    pub fn pin_id(&self) -> Option<&str> {
        self.pin.as_ref().map(|pin| pin.id.as_str())
    }

    /// Drops a pin whose time has come; returns it (advise `UNPINNED`, reason `timeout`).
    pub fn lapse(&mut self, now: Instant) -> Option<Pin> {
        if self.pin.as_ref().is_some_and(|pin| pin.lapses_at <= now) {
            return self.pin.take();
        }
        None
    }

    /// `CONSUMER.UNPIN`: drops the pin (advise `UNPINNED`, reason `admin`, either way).
    pub fn unpin(&mut self) -> Option<Pin> {
        self.pin.take()
    }

    /// The pin's id and when it was given, if there is one.
    pub fn current_pin(&self) -> Option<(String, Timestamp)> {
        self.pin.as_ref().map(|pin| (pin.id.clone(), pin.pinned_at))
    }

    /// True when choosing a request needs the consumer's pending counts (`overflow`).
    pub fn needs_counts(&self) -> bool {
        self.policy == PriorityPolicy::Overflow
    }

    /// When the pin lapses.
    pub fn wake_at(&self) -> Option<Instant> {
        self.pin.as_ref().map(|pin| pin.lapses_at)
    }

    /// Pins the request at `index` (a `Selection` with `pin_wanted`); returns the pin
    /// (advise `PINNED`).
    pub fn pin_request(
        &mut self,
        waiting: &mut WaitingQueue,
        index: usize,
        now: Instant,
    ) -> Option<Pin> {
        let request = waiting.get_mut(index)?;
        let pin = Pin {
            id: random_token(PIN_ID_LEN),
            group: request.group.clone(),
            pinned_at: Timestamp::now(),
            lapses_at: now + self.timeout,
        };
        request.pin_id = pin.id.clone();
        self.pin = Some(pin.clone());
        Some(pin)
    }

    /// The waiting request to serve next, given the consumer's messages `pending` (not yet
    /// delivered) and `ack_pending`. Requests nobody listens to any more are dropped on the
    /// way (`has_interest`), as the plain FIFO drops them.
    pub fn select(
        &mut self,
        waiting: &mut WaitingQueue,
        pending: u64,
        ack_pending: u64,
        mut has_interest: impl FnMut(&Bytes) -> bool,
    ) -> Selection {
        let mut selection = Selection::default();
        let mut index = 0;
        while let Some(request) = waiting.get(index) {
            if !has_interest(&request.reply) {
                waiting.remove(index);
                continue;
            }
            match self.policy {
                PriorityPolicy::PinnedClient => match &self.pin {
                    None if request.pin_id.is_empty() => {
                        selection.pin_wanted = true;
                        selection.serve = Some(index);
                        return selection;
                    }
                    Some(pin) if request.pin_id == pin.id => {
                        selection.serve = Some(index);
                        return selection;
                    }
                    Some(_) if request.pin_id.is_empty() => index += 1,
                    _ => selection.wrong_pin.extend(waiting.remove(index)),
                },
                PriorityPolicy::Overflow if !overflows(request, pending, ack_pending) => index += 1,
                _ => {
                    selection.serve = Some(index);
                    return selection;
                }
            }
        }
        selection
    }
}

/// ConsumerInfo's `priority_groups`: the first configured group (nats-server supports one)
/// with the pin, if any (`pinned_ts` is Go's zero time without one, as Go encodes it).
/// Empty without groups.
pub fn group_states(
    config: &ConsumerConfig,
    pin: Option<(String, Timestamp)>,
) -> Vec<PriorityGroupState> {
    let Some(group) = config.priority_groups.first() else {
        return Vec::new();
    };
    let (pinned_client_id, pinned_at) = pin.unwrap_or_default();
    vec![PriorityGroupState {
        group: group.clone(),
        pinned_client_id,
        pinned_ts: Some(pinned_at),
    }]
}

/// An `overflow` request is served when it sets no threshold, or when the consumer has at
/// least `min_pending` messages pending or `min_ack_pending` awaiting ack.
fn overflows(request: &WaitingRequest, pending: u64, ack_pending: u64) -> bool {
    let (min_pending, min_ack_pending) = (request.min_pending, request.min_ack_pending);
    if min_pending <= 0 && min_ack_pending <= 0 {
        return true;
    }
    (min_pending > 0 && min_pending as u64 <= pending)
        || (min_ack_pending > 0 && min_ack_pending as u64 <= ack_pending)
}

#[cfg(test)]
#[path = "priority_tests.rs"]
mod tests;
