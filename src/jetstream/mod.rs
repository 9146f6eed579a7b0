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
//! Map: `payload` (command kinds and the payload conventions the groups share), `meta` (the meta group's machine and
//! handle), `stream_machine/` (a stream group's machine: jscore over sled), `stream`
//! (`StreamHandle`: proposing to and reading a stream group), `publish` (stream subjects →
//! batched appends → PubAck), `api/` (the `$JS.API.*` handlers), `delivery/` (pull and push
//! consumers, acks), `expiry` (max_age), `offline` (streams whose group cannot run here),
//! `queue` (the bounded queue behind the API inbox and the ack batchers), `service` (start-up,
//! reconciliation, shutdown), `supervisor` (restarts the meta group and stream groups a
//! storage failure stopped).

mod advisories;
pub mod api;
pub mod delivery;
mod expiry;
mod leadership;
pub mod meta;
mod offline;
pub mod payload;
pub mod placement;
pub mod publish;
pub mod queue;
mod service;
pub mod stream;
pub mod stream_machine;
mod supervisor;

pub use leadership::ReplicaState;
pub use service::{JetStream, JetStreamError};

/// Nanoseconds since the Unix epoch: the timestamps the leader puts into commands.
pub fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}
