//! jetraft: a message broker that speaks the NATS client protocol (and, as it grows, the
//! JetStream API), in which every stream is its own Raft group.
//!
//! See ARCHITECTURE.md for the code map. Layers, bottom up: `wire` and `subject` (pure
//! protocol and routing data structures), `server` (the async node: listener, sessions,
//! router), `monitor` (HTTP endpoints), `config` (command line and config file).

pub mod cluster;
pub mod config;
pub mod consensus;
pub mod jetstream;
pub mod jsapi;
pub mod jscore;
pub mod monitor;
pub mod server;
pub mod store;
pub mod subject;
pub mod wire;
