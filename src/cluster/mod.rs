//! The cluster: node identity, peers, and the gRPC protocol between nodes.
pub mod proto;
pub mod route;
