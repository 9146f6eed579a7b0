//! The JetStream front: one `JetStream` per node with `-js`. It owns the node's Raft storage
//! and group registry, the meta group (stream definitions and their group ids) and one
//! `StreamHandle` per stream, and it plugs into the router as internal subscribers:
//! `$JS.API.>` (the API, `api/`), each stream's subjects (`publish.rs`) and, on a stream's
//! leader, its `$JS.ACK.<stream>.>` (`delivery/`).
//!
//! One code path: a single node is a cluster of one. Every stream — and the meta state — is
//! an openraft group (here with one voter), every mutation a proposal that returns after its
//! entry was fsynced and applied. No handler asks whether the node is clustered.
//!
//! Map, bottom up (a part imports only what is below it, or beside it without a circle; the
//! same ladder is in ARCHITECTURE.md):
//! - formats: `payload` (command kinds and the envelope the groups share), `stream_machine/`
//!   (a stream group's machine: jscore over sled, its entry and response formats);
//! - ground: `meta` (the meta group's machine), `stream` (`StreamHandle`: proposing to and
//!   reading a stream group), `ingest_progress` (publishes queued and settled, so a later
//!   request sees them), `offline` (streams whose group cannot run here), `topology` (the
//!   nodes: a cluster of one without `--cluster`), `queue` (the bounded queue behind the API
//!   inbox and the ack batchers), `token`, `leader_clock`, `error`;
//! - front: `compat` (the few answers nats-server gives differently without a cluster, in one
//!   place), `advisories`, `info` (stream infos, `cluster` blocks), `delivery/` (pull and push
//!   consumers, acks), `publish` (stream subjects → batched appends → PubAck), `expiry`
//!   (max_age);
//! - `catalog` (`Catalog`: what this node holds, its `DeliveryRegistry` among it, and every
//!   read of it);
//! - over the catalog: `groups` (opening Raft groups), `placement` (where a new stream goes),
//!   `leadership` (serving a stream while leading it) and `leadership_watch` (the node's one
//!   task following every group's leadership, a `node_task`), `supervisor` (restarting groups a
//!   storage failure stopped);
//! - `lifecycle` (`JetStream`: start-up, reconciliation, shutdown; it starts the watchers, the
//!   supervisor and the API) and `api/` (the `$JS.API.*` handlers, which propose through it):
//!   the one import circle between parts, explained in `lifecycle`'s module doc.

mod advisories;
pub mod api;
mod atomic_publish;
pub mod catalog;
mod compat;
pub mod delivery;
mod error;
mod expiry;
mod groups;
pub mod info;
mod ingest_progress;
mod ingest_task;
pub mod leader_clock;
mod leadership;
mod leadership_watch;
mod lifecycle;
pub mod meta;
mod meta_subjects;
mod node_task;
mod offline;
pub mod payload;
pub mod placement;
pub mod publish;
pub mod queue;
mod replica_state;
mod republish;
mod source_status;
mod sourcing;
pub mod stream;
pub mod stream_machine;
mod supervisor;
pub mod token;
pub mod topology;

pub use catalog::Catalog;
pub use error::JetStreamError;
pub use lifecycle::JetStream;
pub use replica_state::ReplicaState;

/// Nanoseconds since the Unix epoch: the timestamps the leader puts into commands.
pub fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
