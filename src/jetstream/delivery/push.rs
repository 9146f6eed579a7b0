//! Push consumers: the per-consumer state of delivering to `deliver_subject` (queue group
//! `deliver_group` is the router's business) — how many messages the next proposal may
//! deliver, flow control (`100 FlowControl Request` with a `$JS.FC…` reply; delivery stalls
//! while a request goes unanswered for too long), and `100 Idle Heartbeat` after
//! `idle_heartbeat` without a delivery. The delivery task (`task.rs`) delivers only while
//! someone subscribes the deliver subject (`push_bound`).
//!
//! Leader memory only; pure bookkeeping over `tokio::time::Instant`.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;

use crate::jsapi::ConsumerConfig;

/// Most messages one `DeliverNext` proposal of a push consumer delivers.
pub const PUSH_BATCH: usize = 256;
/// A flow-control request goes out after this many messages or bytes since the last answer…
const FLOW_CONTROL_MESSAGES: u64 = 1024;
const FLOW_CONTROL_BYTES: u64 = 1 << 20;
/// …and delivery stalls at this multiple of the window while it is unanswered.
const STALL_FACTOR: u64 = 2;

#[derive(Debug)]
pub struct PushState {
    pub deliver_subject: Bytes,
    heartbeat: Option<Duration>,
    next_heartbeat: Option<Instant>,
    flow_control: bool,
    /// The flow-control reply subject we wait for.
    outstanding: Option<String>,
    messages_since_answer: u64,
    bytes_since_answer: u64,
}

impl PushState {
    /// `None` for pull consumers.
    pub fn new(config: &ConsumerConfig, now: Instant) -> Option<Self> {
        if config.is_pull() {
            return None;
        }
        let heartbeat =
            (config.idle_heartbeat > 0).then(|| Duration::from_nanos(config.idle_heartbeat as u64));
        Some(PushState {
            deliver_subject: Bytes::copy_from_slice(config.deliver_subject.as_bytes()),
            heartbeat,
            next_heartbeat: heartbeat.map(|every| now + every),
            flow_control: config.flow_control,
            outstanding: None,
            messages_since_answer: 0,
            bytes_since_answer: 0,
        })
    }

    /// Takes an updated config (the deliver subject may change; heartbeat and flow control
    /// cannot).
    pub fn update(&mut self, config: &ConsumerConfig) {
        self.deliver_subject = Bytes::copy_from_slice(config.deliver_subject.as_bytes());
    }

    /// Waiting for a flow-control answer that is overdue: deliver nothing until it comes.
    pub fn is_stalled(&self) -> bool {
        self.outstanding.is_some()
            && (self.messages_since_answer >= STALL_FACTOR * FLOW_CONTROL_MESSAGES
                || self.bytes_since_answer >= STALL_FACTOR * FLOW_CONTROL_BYTES)
    }

    /// How many messages the next proposal may deliver.
    pub fn window(&self) -> usize {
        if self.is_stalled() {
            0
        } else {
            PUSH_BATCH
        }
    }

    /// Counts delivered messages; true when a flow-control request should go out now.
    pub fn record_delivery(&mut self, messages: u64, bytes: u64, now: Instant) -> bool {
        self.messages_since_answer += messages;
        self.bytes_since_answer += bytes;
        self.next_heartbeat = self.heartbeat.map(|every| now + every);
        self.flow_control
            && self.outstanding.is_none()
            && (self.messages_since_answer >= FLOW_CONTROL_MESSAGES
                || self.bytes_since_answer >= FLOW_CONTROL_BYTES)
    }

    /// Whether a flow-control request is waiting for its answer.
    pub fn flow_control_outstanding(&self) -> bool {
        self.outstanding.is_some()
    }

    pub fn flow_control_sent(&mut self, reply_subject: String) {
        self.outstanding = Some(reply_subject);
    }

    /// A reply arrived on `subject`; true if it answered the outstanding request.
    pub fn flow_control_answered(&mut self, subject: &str) -> bool {
        if self.outstanding.as_deref() != Some(subject) {
            return false;
        }
        self.outstanding = None;
        self.messages_since_answer = 0;
        self.bytes_since_answer = 0;
        true
    }

    /// `Some(stalled_on)` when an idle heartbeat is due at `now` (its clock restarts);
    /// `stalled_on` is the unanswered flow-control subject, if any.
    pub fn heartbeat_due(&mut self, now: Instant) -> Option<Option<String>> {
        let (at, every) = (self.next_heartbeat?, self.heartbeat?);
        if at > now {
            return None;
        }
        self.next_heartbeat = Some(now + every);
        Some(self.outstanding.clone())
    }

    pub fn next_heartbeat(&self) -> Option<Instant> {
        self.next_heartbeat
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(flow_control: bool) -> ConsumerConfig {
        ConsumerConfig {
            deliver_subject: "deliver.me".into(),
            idle_heartbeat: 5_000_000_000,
            flow_control,
            ..ConsumerConfig::default()
        }
    }

    #[test]
    fn pull_consumers_have_no_push_state() {
        assert!(PushState::new(&ConsumerConfig::default(), Instant::now()).is_none());
    }

    #[test]
    fn heartbeats_follow_idleness() {
        let now = Instant::now();
        let five = Duration::from_secs(5);
        let mut state = PushState::new(&push(false), now).unwrap();
        assert_eq!(state.heartbeat_due(now + Duration::from_secs(4)), None);
        assert_eq!(state.heartbeat_due(now + five), Some(None));
        assert_eq!(state.next_heartbeat(), Some(now + 2 * five));
        assert!(!state.record_delivery(1, 10, now + 2 * five - Duration::from_secs(1)));
        assert_eq!(
            state.next_heartbeat(),
            Some(now + 3 * five - Duration::from_secs(1))
        );
    }

    #[test]
    fn flow_control_requests_and_stalls() {
        let now = Instant::now();
        let mut state = PushState::new(&push(true), now).unwrap();
        assert_eq!(state.window(), PUSH_BATCH);
        assert!(!state.record_delivery(FLOW_CONTROL_MESSAGES - 1, 10, now));
        assert!(state.record_delivery(1, 10, now), "window reached");
        state.flow_control_sent("$JS.FC.S.C.abcd".into());
        assert!(!state.record_delivery(1, 10, now), "one request at a time");
        assert!(!state.is_stalled());
        state.record_delivery(FLOW_CONTROL_MESSAGES, 10, now);
        assert!(state.is_stalled());
        assert_eq!(state.window(), 0);
        let due = state.heartbeat_due(now + Duration::from_secs(5));
        assert_eq!(due, Some(Some("$JS.FC.S.C.abcd".to_string())));
        assert!(!state.flow_control_answered("$JS.FC.S.C.zzzz"));
        assert!(state.flow_control_answered("$JS.FC.S.C.abcd"));
        assert!(!state.is_stalled());
        assert_eq!(state.window(), PUSH_BATCH);
    }

    #[test]
    fn without_flow_control_nothing_stalls() {
        let now = Instant::now();
        let mut state = PushState::new(&push(false), now).unwrap();
        assert!(!state.record_delivery(10 * FLOW_CONTROL_MESSAGES, 1 << 30, now));
        assert!(!state.is_stalled());
    }
}
