//! jetraft: a message broker that speaks the NATS client protocol and the JetStream API, in
//! which every stream is its own Raft group, durable before it is acknowledged.
//!
//! # Module map, bottom up
//!
//! A module may import only modules below it; `tests/layers.rs` holds the same table as
//! ARCHITECTURE.md's code map and fails when an import breaks it.
//!
//! | layer | modules | what lives there |
//! |---|---|---|
//! | ground floor | [`config`], [`wire`], [`subject`] | command line and config file; the NATS protocol codec (pure); subject validation, matching and the subscription trie (pure) |
//! | storage | [`store`] | the node-wide write-ahead log of every Raft group |
//! | pure JetStream | [`jsapi`], then [`jscore`] | the JetStream API's JSON types, subjects and errors; the deterministic stream and consumer state machines |
//! | consensus | [`consensus`] | openraft glue: Raft groups over the log and sled, batching, snapshots, the peer transport trait |
//! | core NATS | [`server`] | listener, client sessions, router, dispatch; knows the layers above only through the traits it owns (subscribers, interest listener, cluster advertisement) |
//! | cluster | [`cluster`] | the gRPC node: peers, Raft transport, routes carrying core NATS between nodes |
//! | JetStream | [`jetstream`] | the front: API handlers, publish, delivery, the stream and meta group machines, their catalog and lifecycle |
//! | monitoring | [`monitor`] | the HTTP endpoints (`/healthz`, `/varz`, `/jsz`, `/routez`, `/metrics`) |
//! | fuzzing | `fuzzing` (hidden) | the fuzz targets' doors to crate-private decoders and their seed inputs; nothing imports it |
//! | composition root | [`node`] | starts and wires the server, the cluster, JetStream and monitoring and orders their shutdown; nothing imports it |
//!
//! # Where new code goes
//!
//! - Parsing or encoding of the client protocol: `wire`. A new JetStream request or reply
//!   type: `jsapi`. A rule about what a stream or consumer does with a command: `jscore`
//!   (pure: time and randomness arrive inside the command).
//! - A new replicated operation: a command in `jscore::group`, its format in
//!   `jetstream::stream_machine` (append-only tags, see ARCHITECTURE.md "Formats"), the
//!   handler that proposes it in `jetstream::api`.
//! - Every change of durable state is a command applied by a Raft group's state machine
//!   (`consensus`); nothing above it writes sled or the log on its own.
//! - An answer that must differ on a standalone node (because nats-server's does):
//!   `jetstream::compat`, the one place that asks; everywhere else a single node is a cluster
//!   of one.
//! - Core NATS behaviour: `server` (it reaches the layers above only through the traits it
//!   owns). Anything that connects nodes: `cluster`. Wiring a new top-level service: `node`,
//!   on the one shutdown tree.
//!
//! # Reading order
//!
//! This file → [`node`] → [`wire`] → `server::session` → `jetstream/publish.rs` →
//! [`consensus`] → [`jscore`]; ARCHITECTURE.md has the map, `docs/adr/` the reasons.

pub mod cluster;
pub mod config;
pub mod consensus;
#[doc(hidden)]
pub mod fuzzing;
pub mod jetstream;
pub mod jsapi;
pub mod jscore;
pub mod monitor;
pub mod node;
pub mod server;
pub mod store;
pub mod subject;
pub mod wire;
