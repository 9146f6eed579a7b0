//! A consumer's delivery rules, read once from its `ConsumerConfig` into plain values:
//! ack policy, how long to wait before redelivering (ack_wait or the backoff schedule),
//! max_deliver, max_ack_pending and the subject filter.
//!
//! Ack policy `flow_control` (nats-server 2.14): the consumer is acknowledged only by the
//! answers to its flow-control requests (the delivery layer proposes them as `AckAll`), never
//! by `$JS.ACK` replies, and nothing is redelivered by timer: its wait is [`NEVER_DUE`].
//!
//! Replicated: derived from the replicated config.

use crate::jsapi::consumer_config::{AckPolicy, ConsumerConfig};
use crate::jscore::subject_filter::SubjectFilter;

/// nats-server's default `ack_wait` (30 s).
pub const DEFAULT_ACK_WAIT_NANOS: i64 = 30 * 1_000_000_000;
/// nats-server's default `max_ack_pending` for consumers that take acks.
pub const DEFAULT_MAX_ACK_PENDING: u64 = 1000;
/// The wait of a consumer that never redelivers by timer (ack policy `flow_control`): due
/// times are computed with a saturating add, so its pending messages are due at `i64::MAX`,
/// a `now` no command carries.
pub const NEVER_DUE: i64 = i64::MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryPolicy {
    pub ack_policy: AckPolicy,
    pub ack_wait_nanos: i64,
    pub backoff_nanos: Vec<i64>,
    /// `None` = unlimited.
    pub max_deliver: Option<u64>,
    /// `None` = unlimited.
    pub max_ack_pending: Option<u64>,
    pub filter: SubjectFilter,
}

impl DeliveryPolicy {
    pub fn from_config(config: &ConsumerConfig) -> Self {
        let backoff_nanos: Vec<i64> = config.backoff.iter().copied().filter(|d| *d > 0).collect();
        // With a backoff list, nats-server forces ack_wait to its first value.
        let ack_wait_nanos = match (backoff_nanos.first(), config.ack_wait) {
            (Some(first), _) => *first,
            (None, wait) if wait > 0 => wait,
            (None, _) => DEFAULT_ACK_WAIT_NANOS,
        };
        let takes_acks = config.ack_policy != AckPolicy::None;
        let max_ack_pending = match config.max_ack_pending {
            n if n > 0 && takes_acks => Some(n as u64),
            0 if takes_acks => Some(DEFAULT_MAX_ACK_PENDING),
            _ => None,
        };
        let max_deliver = match config.ack_policy {
            // Without acks nothing is ever redelivered.
            AckPolicy::None => Some(1),
            _ => (config.max_deliver > 0).then_some(config.max_deliver as u64),
        };
        Self {
            ack_policy: config.ack_policy,
            ack_wait_nanos,
            backoff_nanos,
            max_deliver,
            max_ack_pending,
            filter: SubjectFilter::new(config.filters().into_iter().map(str::to_string)),
        }
    }

    pub fn takes_acks(&self) -> bool {
        self.ack_policy != AckPolicy::None
    }

    /// Whether `+ACK`, `-NAK`, `+TERM` and `+WPI` from `$JS.ACK` replies count: not for ack
    /// policy `none`, nor for `flow_control`, which is acknowledged by its flow-control
    /// answers alone (as `AckAll`; nats-server does not even subscribe its ack subject).
    pub fn takes_client_acks(&self) -> bool {
        self.takes_acks() && self.ack_policy != AckPolicy::FlowControl
    }

    /// Whether an unacknowledged message falls due again after its wait: not for ack policy
    /// `flow_control`, whose receiver resets the consumer to get back what it lost.
    pub fn redelivers_on_timeout(&self) -> bool {
        self.ack_policy != AckPolicy::FlowControl
    }

    /// Ack policy `all` (and `flow_control`, whose `AckAll` acks the same way; its client acks
    /// are refused before this is asked): acking one sequence acknowledges everything
    /// delivered before it.
    pub fn acks_cumulatively(&self) -> bool {
        matches!(self.ack_policy, AckPolicy::All | AckPolicy::FlowControl)
    }

    /// How long after its `deliveries`-th delivery an unacknowledged message becomes due
    /// again: `backoff[deliveries - 1]` (the last value repeating), else `ack_wait`;
    /// [`NEVER_DUE`] for a consumer that does not redeliver on timeout. Add it to a time
    /// with `saturating_add`.
    pub fn wait_after_delivery(&self, deliveries: u64) -> i64 {
        if !self.redelivers_on_timeout() {
            return NEVER_DUE;
        }
        if self.backoff_nanos.is_empty() {
            return self.ack_wait_nanos;
        }
        let index = (deliveries.saturating_sub(1) as usize).min(self.backoff_nanos.len() - 1);
        self.backoff_nanos[index]
    }

    /// True once a message delivered `deliveries` times may not be delivered again.
    pub fn is_exhausted(&self, deliveries: u64) -> bool {
        self.max_deliver.is_some_and(|max| deliveries >= max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_backoff_schedule() {
        let mut config = ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..Default::default()
        };
        let policy = DeliveryPolicy::from_config(&config);
        assert_eq!(policy.ack_wait_nanos, DEFAULT_ACK_WAIT_NANOS);
        assert_eq!(policy.max_ack_pending, Some(DEFAULT_MAX_ACK_PENDING));
        assert_eq!(policy.max_deliver, None);
        assert!(policy.filter.is_all());

        config.backoff = vec![1, 5, 10];
        config.max_deliver = 5;
        config.max_ack_pending = -1;
        let policy = DeliveryPolicy::from_config(&config);
        assert_eq!(policy.ack_wait_nanos, 1);
        let waits: Vec<i64> = (1..=5).map(|d| policy.wait_after_delivery(d)).collect();
        assert_eq!(waits, vec![1, 5, 10, 10, 10]);
        assert_eq!(policy.max_ack_pending, None);
        assert!(policy.is_exhausted(5));
        assert!(!policy.is_exhausted(4));
    }

    #[test]
    fn flow_control_takes_no_client_acks_and_never_falls_due() {
        let config = ConsumerConfig {
            ack_policy: AckPolicy::FlowControl,
            ack_wait: 5,
            ..Default::default()
        };
        let policy = DeliveryPolicy::from_config(&config);
        assert!(policy.takes_acks());
        assert!(!policy.takes_client_acks());
        assert!(!policy.redelivers_on_timeout());
        assert_eq!(policy.wait_after_delivery(1), NEVER_DUE);
        let explicit = DeliveryPolicy::from_config(&ConsumerConfig {
            ack_policy: AckPolicy::Explicit,
            ..config
        });
        assert!(explicit.takes_client_acks() && explicit.redelivers_on_timeout());
        assert_eq!(explicit.wait_after_delivery(1), 5);
    }

    #[test]
    fn ack_none_never_redelivers() {
        let policy = DeliveryPolicy::from_config(&ConsumerConfig::default());
        assert_eq!(policy.max_deliver, Some(1));
        assert_eq!(policy.max_ack_pending, None);
    }
}
