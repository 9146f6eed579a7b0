//! The `segment_summary` fuzz target: `jetraft::fuzzing::targets::segment_summary` (its
//! module doc says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::segment_summary::run(data));
