//! Consumer pause (nats-server 2.11): a consumer whose config carries `pause_until` delivers
//! nothing before that instant. The instant is part of the replicated config (set by a
//! create, an update or `$JS.API.CONSUMER.PAUSE`, which is an update of `pause_until` only);
//! whether it has passed is decided against the `now` a command carries, so every replica
//! applies a `DeliverNext` the same way. The leader's delivery task (`jetstream::delivery`)
//! holds its requests while paused and wakes when the pause ends.

use super::state::ConsumerState;

impl ConsumerState {
    /// When the pause ends (Unix nanoseconds), if the config sets one (passed or not).
    pub fn pause_until_nanos(&self) -> Option<i64> {
        pause_until_nanos(&self.config)
    }

    /// True while `now_nanos` is before the configured pause end.
    pub fn is_paused_at(&self, now_nanos: i64) -> bool {
        self.pause_until_nanos()
            .is_some_and(|until| now_nanos < until)
    }
}

/// A config's pause end in Unix nanoseconds. A time past what i64 nanoseconds hold (after
/// 2262) counts as the largest one: paused for as long as anyone will care.
pub fn pause_until_nanos(config: &crate::jsapi::consumer_config::ConsumerConfig) -> Option<i64> {
    let until = config.pause_until.as_ref()?;
    if until.is_zero() {
        return None;
    }
    Some(until.unix_nanos().unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use crate::jsapi::consumer_config::ConsumerConfig;
    use crate::jsapi::time::Timestamp;

    use super::super::tests_deliver::stream_with;
    use super::*;

    #[test]
    fn a_paused_consumer_delivers_nothing_until_the_pause_ends() {
        let stream = stream_with(&["s.a", "s.b"]);
        let config = ConsumerConfig {
            pause_until: Some(Timestamp::from_unix_nanos(1_000)),
            ..Default::default()
        };
        let mut consumer = ConsumerState::new(config, &stream);
        assert!(consumer.is_paused_at(999));
        assert!(consumer.deliver_next(&stream, 10, 999).is_empty());
        assert_eq!(consumer.delivered().consumer_seq, 0);
        assert!(!consumer.is_paused_at(1_000));
        assert_eq!(consumer.deliver_next(&stream, 10, 1_000).len(), 2);
    }

    #[test]
    fn zero_time_is_not_a_pause() {
        let config = ConsumerConfig {
            pause_until: Some(Timestamp::ZERO),
            ..Default::default()
        };
        assert_eq!(pause_until_nanos(&config), None);
        assert_eq!(pause_until_nanos(&ConsumerConfig::default()), None);
    }
}
