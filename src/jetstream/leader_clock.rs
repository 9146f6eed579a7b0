//! `LeaderClock`: whether a replica of a group knows a leader and since when it knows none —
//! what decides when it answers for a group without a leader (`api::leaderless`). Written by
//! the node's leadership watcher (`leadership_watch`, or the meta group's), kept with the group in the `catalog`.

use std::time::{Duration, Instant};

/// Whether a replica of a group (a stream's, or the meta group) knows a leader, since when it
/// knows none, and whether it has known one since the group started here: what decides when
/// it answers for a group without a leader (`api::leaderless`). One per group on each node,
/// written by the node's leadership watcher.
#[derive(Debug, Clone, Copy)]
pub struct LeaderClock {
    /// `None` while a leader is known.
    no_leader_since: Option<Instant>,
    knew_leader: bool,
}

/// How a replica has been without a leader (see [`LeaderClock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leaderless {
    /// How long it has known no leader (since the group started here, if it never knew one).
    pub lasted: Duration,
    /// Whether it knew a leader at some point since the group started here.
    pub knew_leader: bool,
}

impl LeaderClock {
    /// A group just started here: no leader known yet.
    pub fn started() -> LeaderClock {
        LeaderClock {
            no_leader_since: Some(Instant::now()),
            knew_leader: false,
        }
    }

    /// Records whether a leader is known now.
    pub fn note(&mut self, knows_leader: bool) {
        match (knows_leader, self.no_leader_since) {
            (true, Some(_)) => {
                self.no_leader_since = None;
                self.knew_leader = true;
            }
            (false, None) => self.no_leader_since = Some(Instant::now()),
            _ => {}
        }
    }

    /// `None` while a leader is known.
    pub fn leaderless(&self) -> Option<Leaderless> {
        self.no_leader_since.map(|since| Leaderless {
            lasted: since.elapsed(),
            knew_leader: self.knew_leader,
        })
    }

    pub fn knows_leader(&self) -> bool {
        self.no_leader_since.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_remembers_a_leader_it_knew() {
        let mut clock = LeaderClock::started();
        let started = clock.leaderless().expect("no leader at start");
        assert!(!started.knew_leader);
        clock.note(true);
        assert!(clock.knows_leader());
        assert_eq!(clock.leaderless(), None);
        clock.note(false);
        let lost = clock.leaderless().expect("leader lost");
        assert!(lost.knew_leader);
        assert!(lost.lasted < Duration::from_secs(1));
    }

    #[test]
    fn no_leader_is_timed_from_when_it_was_first_missed() {
        let mut clock = LeaderClock::started();
        clock.note(true);
        clock.note(false);
        let first = clock.no_leader_since;
        clock.note(false);
        assert_eq!(clock.no_leader_since, first);
    }
}
