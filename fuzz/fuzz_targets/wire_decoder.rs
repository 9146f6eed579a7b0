//! The `wire_decoder` fuzz target: `jetraft::fuzzing::targets::wire_decoder` (its module doc
//! says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::wire_decoder::run(data));
