//! jetraft: a message broker that speaks the NATS client protocol (and, as it grows, the
//! JetStream API), in which every stream is its own Raft group.
//!
//! See ARCHITECTURE.md for the code map. Layers, bottom up:
//! - `wire`, `subject`, `store`, `config`: the protocol codec, subject matching, the durable
//!   log, the command line and config file; none imports the rest of the crate;
//! - `jsapi` (JetStream's JSON), `consensus` (openraft groups over `store`), `server` (core
//!   NATS: listener, sessions, router);
//! - `jscore`: JetStream's pure state machines;
//! - `cluster` (peers, gRPC, core NATS routes), then `jetstream` (the JetStream front), then
//!   `monitor` (HTTP endpoints);
//! - `node`: the composition root, which starts them all and shuts them down as one tree.

pub mod cluster;
pub mod config;
pub mod consensus;
pub mod jetstream;
pub mod jsapi;
pub mod jscore;
pub mod monitor;
pub mod node;
pub mod server;
pub mod store;
pub mod subject;
pub mod wire;
