//! The generated gRPC types and stubs of `proto/cluster.proto`.
#![allow(clippy::all, clippy::pedantic, missing_docs)]

tonic::include_proto!("jetraft.cluster.v1");
