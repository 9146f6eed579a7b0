//! A stream group's state machine: `jscore::group::StreamGroup` applied to committed
//! entries, persisted in the group's sled keys, shared with the front through `StreamView`.
//!
//! - `entry.rs`: the entries' format — command kinds, [`StreamCommandWire`] (the Raft-entry
//!   form of a `StreamCommand`), appends in a raw form of their own, the mirror policy.
//! - `response.rs`: the responses' format (a `StreamOutcome` or the API error).
//! - `tests_formats.rs`: golden bytes of every command and response kind; `tests_spill.rs`: a
//!   file stream with its metadata out of memory (ADR 0033); `tests_load.rs`:
//!   random command sequences applied and reloaded, and what an apply writes;
//!   `tests_layouts.rs`: state written by earlier layouts and record versions still loads;
//!   `tests_damage.rs`: a block failing its checksum is refused, never served.
//! - `machine.rs`: [`StreamMachine`], the `consensus::GroupMachine` (apply, finish, load).
//! - `stage.rs` (consumer keys: `stage_consumers.rs`): which keys an applied command
//!   changed, staged into the `MachineTxn`; what is
//!   batched per apply call (message blocks, pending chunks, state records) is written by
//!   `finish`.
//! - `keys.rs`: the key layout and the records stored under it.
//! - `view.rs`: [`StreamView`], the in-memory state the front reads.
//! - `bodies.rs`, `cache.rs`, `block.rs`, `segments.rs`: message bodies (ADR 0016, ADR 0022).
//!   The state keeps each message's metadata only; the front reads headers and payloads
//!   through the group's [`MessageStore`]: blocks written by `finish` stay pinned until
//!   sled holds their locators, then live in the node's [`BlockCache`] (a byte budget) or
//!   only in the group's segment files. `tests_segments.rs`: locators, when segments go,
//!   summaries.
//! - `summary.rs`, `load_blocks.rs`: a complete segment's summary of its messages' metadata
//!   (ADR 0028; its records shaped, `summary_shaped.rs`, ADR 0037), which `load` reads
//!   instead of the segment's blocks, a thread reading them ahead (`read_ahead.rs`). `compact.rs`: a segment
//!   left mostly empty by interior removals is rewritten and goes (ADR 0029;
//!   `tests_compact.rs`). `extend.rs`: a call of a few messages extends the last block by a
//!   frame instead of starting one (ADR 0031).
//!
//! ## Persistence
//!
//! The in-memory `StreamGroup` (metadata, consumers) is the working state (a file stream's
//! sealed metadata chunks beyond the few touched last in `meta_file.rs`'s spill, ADR 0033,
//! rebuilt at every load like the rest); sled holds
//! enough to rebuild it exactly (`load`, which reads the messages' metadata from the segment
//! summaries, or from the blocks in place, and copies no body), and each apply call (one or more Raft entries, many commands) rewrites
//! only the keys it changed, so a large stream is never rewritten and sled sees a few keys per
//! call rather than per message. Keys (consensus strips the group prefix):
//!
//! | key | value |
//! |---|---|
//! | `v` | layout version: `[4]` (`[3]`: every located block one frame; `[2]`: blocks only in sled; `[1]`: before blocks and chunks; all still loaded) |
//! | `s/config` | 1 ++ the stream config as JSON |
//! | `s/state` | 1 ++ `StreamRecordV1`: first/last seq, last time, bytes, last msg id, first dedup ordinal |
//! | `s/sched` | 1 ++ postcard i64: the schedule clock, the `now` of the last `Expire` that fired a schedule (absent: none fired; ADR 0025) |
//! | `d/` ++ ordinal (u64 BE) | 1 ++ `DedupEntryV1`: one duplicate-window entry (time, msg id, seq) |
//! | `b/` ++ first seq (u64 BE) | 3 ++ segment (u32 LE) ++ offset (u64 LE) ++ length (u32 LE): where the block is in the group's segment files (`segments.rs`): one or more block values back to back (layout 4, `extend.rs`); or the block itself (2 ++ crc32c ++ postcard list of (seq, subject, headers, payload, time); 1: no crc), as layout 2 kept it (a snapshot carries blocks; an install writes them to segments) |
//! | `x/` ++ seq (u64 BE) | empty: a tombstone, the message was removed from its block |
//! | `m/` ++ seq (u64 BE) | layout 1 only: 1 ++ `StoredMsgV1`: subject, headers, payload, time |
//! | `c/` ++ name len (u32 BE) ++ name ++ `c` | 1 ++ `ConsumerConfigV1`: the config and creation time as JSON (`entry::ConsumerDefinition`) |
//! | `c/` ++ … ++ `s` | 1 ++ `ConsumerStateV1`: positions, ack floor, exhausted, last-per-subject plan |
//! | `c/` ++ … ++ `q` ++ chunk (u64 BE) | 1 ++ postcard list of (stream seq, `PendingV1`): the pending entries of stream seqs `chunk << 10 ..= chunk << 10 \| 1023` |
//! | `c/` ++ … ++ `p` ++ seq (u64 BE) | layout 1 only: 1 ++ `PendingV1`: one delivered, unacknowledged message |
//! | `o/` ++ origin key (UTF-8) | 1 ++ postcard u64: the last origin sequence a mirror or source copied (`sources.rs`, ADR 0017) |
//!
//! Values are postcard after a version byte; configs JSON (postcard cannot honour their
//! JSON-tuned serde attributes). Both are append-only formats: a changed record is a new
//! version byte, a changed key scheme a new layout version. What is not stored is derived
//! on load: the limits (from the config), the subject index (from the messages), the
//! delivery policy (from the consumer config) and the redelivery queue (from the pending
//! entries).
//!
//! **Message blocks.** The messages an apply call stored go into one block (a new one every
//! 64 KiB), appended to the group's active segment file, its locator keyed by the first
//! sequence (ADR 0022); while the stream's last block is under 64 KiB and 512 messages, in
//! memory and the last thing in the active segment, they go after it as a frame of their
//! own and its locator grows instead (`extend.rs`, ADR 0031); messages removed by
//! the same call never reach a block. A message later removed from a written block is
//! settled by `finish`: if its block has no message left the block key goes (with its
//! tombstones); otherwise, if it is at or above the stream's first sequence, it gets an `x/`
//! tombstone. Load skips block messages below `s/state`'s first sequence (which never goes
//! back) and tombstoned ones, so limits and expiry, which remove from the front, write no
//! tombstones. Each block's live count is exact (load counts the same), so a replica drops
//! a block at the apply that removes its last message. Layout-1 `m/` keys are still read, and deleted when their
//! message goes.
//!
//! **Pending chunks.** A consumer's pending entries live in chunks of 1024 stream sequences;
//! an apply call rewrites (or deletes, when empty) each chunk whose entries it changed, from
//! the in-memory pending set. A delivery of a batch and the acks of a batch thus write a chunk
//! or two per call. Layout-1 `p` keys are read, and dropped once their chunk is written.
//!
//! Costs per apply call: the stored messages' blocks, `s/state` once, a `d/` key per new msg
//! id (plus deletes for the ids that aged out), tombstones for interior removals, each changed
//! pending chunk and each changed consumer state record once. Purge, consumer deletion,
//! expiry and config updates compare each consumer's pending set before and after (they are
//! rare). A `last_per_subject` plan sits in the consumer's state record and is rewritten with
//! it until its messages were delivered once.
//!
//! The duplicate window is a queue (expiry at the front, new ids at the back), stored one
//! entry per ordinal so an apply only deletes the expired ordinals and adds the new one.
//! Restoring replays the entries in order, which is exact because `DedupWindow` records an id
//! only when it is not already in the window.

mod block;
mod block_format;
mod bodies;
pub mod cache;
mod chunked;
mod compact;
pub mod entry;
mod extend;
mod keys;
mod load_blocks;
mod machine;
mod meta_file;
mod page_buf;
mod read_ahead;
pub mod response;
mod segments;
mod sources;
mod stage;
mod stage_consumers;
mod summary;
mod summary_decode;
/// For `crate::fuzzing` only: segment summaries over bytes in memory.
#[doc(hidden)]
pub mod summary_fuzz;
mod summary_shaped;
mod view;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_compact;
#[cfg(test)]
mod tests_damage;
#[cfg(test)]
mod tests_formats;
#[cfg(test)]
mod tests_layouts;
#[cfg(test)]
mod tests_load;
#[cfg(test)]
mod tests_segments;
#[cfg(test)]
mod tests_sources;
#[cfg(test)]
mod tests_spill;

pub use block::Body;
pub use bodies::{MessageStore, PinnedStats};
pub use cache::{BlockCache, CacheStats, DEFAULT_CACHE_BYTES};
pub use entry::StreamCommandWire;
pub use machine::StreamMachine;
pub use view::{StreamView, StreamViewWriter};
