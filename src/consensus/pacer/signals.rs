//! [`GroupSignals`]: what the hot paths of one group tell the pacer, and what they read of it,
//! without taking the pacer's lock: a proposal or an RPC wakes a quiet group, an append from
//! the leader counts as hearing it, and the group's [`Mode`] is mirrored here for readers (the
//! leadership watcher, the vote check). The pacer's task is the only writer of the mode.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use tokio::sync::{watch, Notify};

use super::decide::{Mode, Wake};
use crate::consensus::types::GroupId;

/// Groups woken since the pacer's last round, with what woke them.
#[derive(Debug, Default)]
pub(super) struct Wakes {
    queue: Mutex<Vec<(GroupId, Wake)>>,
    pub(super) notify: Notify,
}

impl Wakes {
    pub(super) fn push(&self, group: GroupId, wake: Wake) {
        self.queue.lock().push((group, wake));
        self.notify.notify_one();
    }

    pub(super) fn take(&self) -> Vec<(GroupId, Wake)> {
        std::mem::take(&mut *self.queue.lock())
    }
}

/// See the module docs. One per running group, shared by the group and the pacer.
#[derive(Debug)]
pub struct GroupSignals {
    group: GroupId,
    mode: AtomicU8,
    modes: watch::Sender<Mode>,
    leader_contact: Mutex<Option<Instant>>,
    /// While false the pacer starts no election of the group here (a leader handing over).
    campaigns: AtomicBool,
    /// While true the replica lost its log and vote here (`consensus::amnesia`): it neither
    /// campaigns nor grants votes until it caught up with a leader.
    amnesiac: AtomicBool,
    wakes: Arc<Wakes>,
}

impl GroupSignals {
    pub(super) fn new(group: GroupId, wakes: Arc<Wakes>) -> GroupSignals {
        GroupSignals {
            group,
            mode: AtomicU8::new(encode(Mode::Active)),
            modes: watch::channel(Mode::Active).0,
            leader_contact: Mutex::new(None),
            campaigns: AtomicBool::new(true),
            amnesiac: AtomicBool::new(false),
            wakes,
        }
    }

    pub fn mode(&self) -> Mode {
        decode(self.mode.load(Ordering::Acquire))
    }

    /// Notified when the mode changes.
    pub fn modes(&self) -> watch::Receiver<Mode> {
        self.modes.subscribe()
    }

    /// Something happened in the group (an RPC, a stepdown): a quiet group wakes.
    pub fn touch(&self) {
        self.woken(Wake::Event);
    }

    /// A proposal arrived: a quiet group wakes, and its leader's append is its first
    /// contact with the followers (no heartbeat beside it).
    pub fn proposed(&self) {
        self.woken(Wake::Proposal);
    }

    fn woken(&self, wake: Wake) {
        if self.mode() == Mode::Quiet {
            self.wakes.push(self.group, wake);
        }
    }

    /// An append or snapshot from the group's leader arrived at `now`.
    pub fn heard_leader(&self, now: Instant) {
        *self.leader_contact.lock() = Some(now);
        self.touch();
    }

    /// Whether the pacer may start an election of the group on this node. A leader stepping
    /// down turns it off until another node leads, so that its own election timer does not
    /// win the group back from the candidate it handed over to.
    pub fn set_campaigns(&self, allowed: bool) {
        self.campaigns.store(allowed, Ordering::Release);
    }

    pub(super) fn campaigns(&self) -> bool {
        self.campaigns.load(Ordering::Acquire) && !self.is_amnesiac()
    }

    /// Marks the replica amnesiac (or caught up again): see the field's docs.
    pub fn set_amnesiac(&self, amnesiac: bool) {
        self.amnesiac.store(amnesiac, Ordering::Release);
    }

    /// Whether the replica may neither campaign nor vote yet (`consensus::amnesia`).
    pub fn is_amnesiac(&self) -> bool {
        self.amnesiac.load(Ordering::Acquire)
    }

    pub(super) fn leader_contact(&self) -> Option<Instant> {
        *self.leader_contact.lock()
    }

    pub(super) fn set_mode(&self, mode: Mode) {
        let previous = self.mode.swap(encode(mode), Ordering::AcqRel);
        if previous != encode(mode) {
            self.modes.send_replace(mode);
        }
    }
}

fn encode(mode: Mode) -> u8 {
    match mode {
        Mode::Active => 0,
        Mode::Quiet => 1,
        Mode::Waking => 2,
    }
}

fn decode(byte: u8) -> Mode {
    match byte {
        1 => Mode::Quiet,
        2 => Mode::Waking,
        _ => Mode::Active,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_amnesiac_replica_never_campaigns_whatever_a_stepdown_says() {
        let signals = GroupSignals::new(7, Arc::new(Wakes::default()));
        assert!(signals.campaigns());
        signals.set_amnesiac(true);
        signals.set_campaigns(true);
        assert!(!signals.campaigns() && signals.is_amnesiac());
        signals.set_amnesiac(false);
        assert!(signals.campaigns());
    }
}
