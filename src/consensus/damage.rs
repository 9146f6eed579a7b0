//! [`Damage`]: the groups of this node whose stored state was found damaged while the node
//! runs (a message block failing its checksum, a value that does not decode, a panic inside
//! sled while reading). One per state store, shared by every reader of it.
//!
//! The reader that finds the damage cannot repair it: it only records it here, answers its
//! own request without the damaged data, and wakes whoever acts on it (JetStream's supervisor,
//! which stops the group and rebuilds it from its peers, or takes a single-replica stream
//! offline: ADR 0015, ADR 0018). The register is not persisted: the damage is still on disk,
//! and the group's next `load` (which checks every block) finds it again.

use std::collections::BTreeMap;

use parking_lot::Mutex;
use tokio::sync::Notify;

use super::types::GroupId;

#[derive(Debug, Default)]
pub struct Damage {
    groups: Mutex<BTreeMap<GroupId, String>>,
    reported: Notify,
}

impl Damage {
    /// Records that `group`'s state is damaged; the first reason is kept (later readers of
    /// the same damage report it again). Logged at error level once per group.
    pub fn report(&self, group: GroupId, reason: impl std::fmt::Display) {
        let mut groups = self.groups.lock();
        if groups.contains_key(&group) {
            return;
        }
        let reason = reason.to_string();
        tracing::error!(group, "group state damaged here: {reason}");
        groups.insert(group, reason);
        drop(groups);
        self.reported.notify_waiters();
    }

    /// Why `group`'s state is damaged, if it is.
    pub fn reason(&self, group: GroupId) -> Option<String> {
        self.groups.lock().get(&group).cloned()
    }

    /// Every damaged group.
    pub fn groups(&self) -> Vec<GroupId> {
        self.groups.lock().keys().copied().collect()
    }

    /// The group's damaged state was set aside (or the group deleted): forget it.
    pub fn clear(&self, group: GroupId) {
        self.groups.lock().remove(&group);
    }

    /// Resolves at the next [`report`](Self::report).
    pub async fn reported(&self) {
        self.reported.notified().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_reason_is_kept_until_cleared() {
        let damage = Damage::default();
        assert_eq!(damage.reason(7), None);
        damage.report(7, "block 1: checksum");
        damage.report(7, "block 2: checksum");
        assert_eq!(damage.reason(7).as_deref(), Some("block 1: checksum"));
        assert_eq!(damage.groups(), vec![7]);
        damage.clear(7);
        assert_eq!(damage.reason(7), None);
    }
}
