//! The fuzz targets' bodies, one module per target of `fuzz/fuzz_targets/` (which only call
//! `run`): what each target feeds, its input layout and what it checks are in the module's doc.

pub mod cluster_messages;
pub mod jsapi_requests;
pub mod segment_summary;
pub mod snapshot;
pub mod stream_state;
pub mod wal_recovery;
pub mod wire_decoder;
