//! The `stream_state` fuzz target: `jetraft::fuzzing::targets::stream_state` (its module doc
//! says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::stream_state::run(data));
