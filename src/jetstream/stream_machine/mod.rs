//! A stream group's state machine: `jscore::group::StreamGroup` applied to committed
//! entries, persisted in the group's sled keys, shared with the front through `StreamView`.
//!
//! - `wire.rs`: [`StreamCommandWire`], the Raft-entry form of a `GroupCommand`.
//! - `machine.rs`: [`StreamMachine`], the `consensus::GroupMachine` (apply, load).
//! - `stage.rs`: which keys an applied command changed, staged into the `MachineTxn`.
//! - `keys.rs`: the key layout and the records stored under it.
//! - `view.rs`: [`StreamView`], the in-memory state the front reads.
//!
//! ## Persistence
//!
//! The in-memory `StreamGroup` is the working state; sled holds enough to rebuild it
//! exactly (`load`), and each apply rewrites only the keys it changed, so a large stream is
//! never rewritten and an ack touches O(1) keys. Keys (consensus strips the group prefix):
//!
//! | key | value |
//! |---|---|
//! | `v` | layout version: `[1]` |
//! | `s/config` | 1 ++ the stream config as JSON |
//! | `s/state` | 1 ++ `StreamRecordV1`: first/last seq, last time, bytes, last msg id, first dedup ordinal |
//! | `d/` ++ ordinal (u64 BE) | 1 ++ `DedupEntryV1`: one duplicate-window entry (time, msg id, seq) |
//! | `m/` ++ seq (u64 BE) | 1 ++ `StoredMsgV1`: subject, headers, payload, time |
//! | `c/` ++ name len (u32 BE) ++ name ++ `c` | 1 ++ `ConsumerConfigV1`: the config as JSON |
//! | `c/` ++ … ++ `s` | 1 ++ `ConsumerStateV1`: positions, ack floor, exhausted, last-per-subject plan |
//! | `c/` ++ … ++ `p` ++ seq (u64 BE) | 1 ++ `PendingV1`: one delivered, unacknowledged message |
//!
//! Values are postcard after a version byte; configs JSON (postcard cannot honour their
//! JSON-tuned serde attributes). Both are append-only formats: a changed record is a new
//! version byte, a changed key scheme a new layout version. What is not stored is derived
//! on load: the limits (from the config), the subject index (from the messages), the
//! delivery policy (from the consumer config) and the redelivery queue (from the pending
//! entries).
//!
//! Costs per apply: an append writes its message, `s/state`, and a `d/` key when it had a
//! msg id (plus deletes for whatever limits removed and the ids that aged out); an ack
//! writes or deletes one pending key and the consumer's state record; a delivery writes one
//! pending key per delivered message. Purge, consumer deletion, expiry and config updates
//! compare each consumer's pending set before and after (they are rare). A
//! `last_per_subject` plan sits in the consumer's state record and is rewritten with it
//! until its messages were delivered once.
//!
//! The duplicate window is a queue (expiry at the front, new ids at the back), stored one
//! entry per ordinal so an apply only deletes the expired ordinals and adds the new one.
//! Restoring replays the entries in order, which is exact because `DedupWindow` records an id
//! only when it is not already in the window.

mod keys;
mod machine;
mod stage;
mod view;
pub mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_load;

pub use machine::StreamMachine;
pub use view::{StreamView, StreamViewWriter};
pub use wire::{ConsumerCommandWire, StreamCommandWire};
