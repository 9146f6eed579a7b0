//! Tests of the consensus module over a real [`LogEngine`](crate::store::log::LogEngine) and
//! sled in temp directories: openraft's storage conformance suite, group life cycle, recovery,
//! many groups sharing one log.

mod bench;
mod bootstrap;
mod compaction;
mod drop;
mod group;
mod many_groups;
mod recovery;
mod shutdown;
mod suite;
mod support;
