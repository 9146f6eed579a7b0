//! The delivery task's view of its consumer's pause (leader memory): whether delivery is
//! held now, when to wake because the pause ends, and which pause advisories to send. As
//! nats-server: a change of `pause_until` (create/update or `CONSUMER.PAUSE`) is advised at
//! once by the leader, and the end of a pause is advised when it passes (also by a new
//! leader that took over during the pause); a pause that had already ended when the task
//! started is not advised again. The replicated half is `jscore::consumer::pause`.

use std::time::Duration;

use tokio::time::Instant;

use crate::jsapi::{ConsumerConfig, Timestamp};
use crate::jscore::consumer::pause_until_nanos;

#[derive(Debug)]
pub struct PauseState {
    /// The configured end of the pause (Unix nanoseconds), passed or not.
    until: Option<i64>,
    /// The end of `until` still has to be advised.
    end_unadvised: bool,
}

/// What a config change means for the pause advisories.
#[derive(Debug, PartialEq, Eq)]
pub enum PauseChange {
    Unchanged,
    /// Advise the new pause end (`Timestamp::ZERO` when lifted) and whether it is paused.
    Changed {
        until: Timestamp,
        paused: bool,
    },
}

impl PauseState {
    pub fn new(config: &ConsumerConfig, now_nanos: i64) -> Self {
        let until = pause_until_nanos(config);
        PauseState {
            until,
            end_unadvised: until.is_some_and(|until| now_nanos < until),
        }
    }

    pub fn is_paused(&self, now_nanos: i64) -> bool {
        self.until.is_some_and(|until| now_nanos < until)
    }

    /// Takes the new config; says whether the pause changed (the leader advises it).
    pub fn update(&mut self, config: &ConsumerConfig, now_nanos: i64) -> PauseChange {
        let until = pause_until_nanos(config);
        if until == self.until {
            return PauseChange::Unchanged;
        }
        *self = PauseState::new(config, now_nanos);
        PauseChange::Changed {
            until: config
                .pause_until
                .filter(|until| !until.is_zero())
                .unwrap_or(Timestamp::ZERO),
            paused: self.is_paused(now_nanos),
        }
    }

    /// True once, when the pause has just ended: the caller advises it (`paused: false`,
    /// `pause_until` the end) and delivers again.
    pub fn take_ended(&mut self, now_nanos: i64) -> Option<Timestamp> {
        let until = self.until?;
        if !self.end_unadvised || now_nanos < until {
            return None;
        }
        self.end_unadvised = false;
        Some(Timestamp::from_unix_nanos(until))
    }

    /// When the task must wake to end the pause, on the monotonic clock.
    pub fn wake_at(&self, now: Instant, now_nanos: i64) -> Option<Instant> {
        let until = self.until.filter(|_| self.end_unadvised)?;
        let left = until.saturating_sub(now_nanos).max(0) as u64;
        Some(now + Duration::from_nanos(left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paused_until(nanos: i64) -> ConsumerConfig {
        ConsumerConfig {
            pause_until: Some(Timestamp::from_unix_nanos(nanos)),
            ..ConsumerConfig::default()
        }
    }

    #[test]
    fn a_pause_ends_once() {
        let mut pause = PauseState::new(&paused_until(1_000), 0);
        assert!(pause.is_paused(999));
        assert_eq!(pause.take_ended(999), None);
        let now = Instant::now();
        assert_eq!(
            pause.wake_at(now, 400),
            Some(now + Duration::from_nanos(600))
        );
        assert_eq!(
            pause.take_ended(1_000),
            Some(Timestamp::from_unix_nanos(1_000))
        );
        assert_eq!(pause.take_ended(2_000), None);
        assert!(!pause.is_paused(1_000));
        assert_eq!(pause.wake_at(now, 2_000), None);
    }

    #[test]
    fn a_pause_already_over_is_not_advised() {
        let mut pause = PauseState::new(&paused_until(1_000), 5_000);
        assert_eq!(pause.take_ended(5_000), None);
        assert_eq!(pause.wake_at(Instant::now(), 5_000), None);
    }

    #[test]
    fn changes_are_reported() {
        let mut pause = PauseState::new(&ConsumerConfig::default(), 0);
        assert_eq!(
            pause.update(&ConsumerConfig::default(), 0),
            PauseChange::Unchanged
        );
        assert_eq!(
            pause.update(&paused_until(1_000), 0),
            PauseChange::Changed {
                until: Timestamp::from_unix_nanos(1_000),
                paused: true
            }
        );
        assert_eq!(
            pause.update(&ConsumerConfig::default(), 10),
            PauseChange::Changed {
                until: Timestamp::ZERO,
                paused: false
            }
        );
        assert!(!pause.is_paused(10));
    }
}
