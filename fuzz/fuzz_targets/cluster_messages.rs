//! The `cluster_messages` fuzz target: `jetraft::fuzzing::targets::cluster_messages` (its module doc
//! says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::cluster_messages::run(data));
