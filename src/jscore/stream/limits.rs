//! The stream limits the state machine enforces, read once from a `StreamConfig` into
//! plain options (`None` = unlimited) so the apply code never re-interprets `-1`/`0`
//! sentinels, and the discard-old enforcement that runs after every store.
//!
//! Replicated: the limits come from the replicated config, and enforcement only runs while
//! applying commands.

use crate::jsapi::stream_config::{DiscardPolicy, RetentionPolicy, StorageType, StreamConfig};

/// nats-server's default duplicate window (2 minutes) when the config leaves it at 0.
pub const DEFAULT_DUPLICATE_WINDOW_NANOS: i64 = 120 * 1_000_000_000;

/// Largest header block nats-server stores (its record format keeps a u16 length).
pub const MAX_HEADERS_LEN: usize = u16::MAX as usize;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamLimits {
    pub max_msgs: Option<u64>,
    pub max_bytes: Option<u64>,
    pub max_msgs_per_subject: Option<u64>,
    pub max_age_nanos: Option<i64>,
    /// Limit on headers + payload of one message.
    pub max_msg_size: Option<u64>,
    pub discard: DiscardPolicy,
    pub discard_new_per_subject: bool,
    pub duplicate_window_nanos: i64,
    pub retention: RetentionPolicy,
    pub storage: StorageType,
}

impl StreamLimits {
    pub fn from_config(config: &StreamConfig) -> Self {
        let positive = |value: i64| (value > 0).then_some(value as u64);
        let max_age_nanos = (config.max_age > 0).then_some(config.max_age);
        // Same defaulting as nats-server: 2 minutes, but never longer than max_age.
        let duplicate_window_nanos = match (config.duplicate_window, max_age_nanos) {
            (window, _) if window > 0 => window,
            (_, Some(max_age)) => max_age.min(DEFAULT_DUPLICATE_WINDOW_NANOS),
            (_, None) => DEFAULT_DUPLICATE_WINDOW_NANOS,
        };
        Self {
            max_msgs: positive(config.max_msgs),
            max_bytes: positive(config.max_bytes),
            max_msgs_per_subject: positive(config.max_msgs_per_subject),
            max_age_nanos,
            max_msg_size: positive(i64::from(config.max_msg_size)),
            discard: config.discard,
            discard_new_per_subject: config.discard_new_per_subject,
            duplicate_window_nanos,
            retention: config.retention,
            storage: config.storage,
        }
    }

    pub fn discards_new(&self) -> bool {
        self.discard == DiscardPolicy::New
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinels_become_unlimited_and_window_defaults() {
        let mut config = StreamConfig::new("S", &["s.>"]);
        config.max_msgs = -1;
        config.max_bytes = 0;
        config.max_msg_size = -1;
        let limits = StreamLimits::from_config(&config);
        assert_eq!(limits.max_msgs, None);
        assert_eq!(limits.max_bytes, None);
        assert_eq!(limits.max_msg_size, None);
        assert_eq!(
            limits.duplicate_window_nanos,
            DEFAULT_DUPLICATE_WINDOW_NANOS
        );

        config.max_age = 1_000_000_000;
        config.max_msgs_per_subject = 3;
        let limits = StreamLimits::from_config(&config);
        assert_eq!(limits.duplicate_window_nanos, 1_000_000_000);
        assert_eq!(limits.max_msgs_per_subject, Some(3));
    }
}
