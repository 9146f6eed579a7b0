//! The `wal_recovery` fuzz target: `jetraft::fuzzing::targets::wal_recovery` (its module doc
//! says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::wal_recovery::run(data));
