//! The `jsapi_requests` fuzz target: `jetraft::fuzzing::targets::jsapi_requests` (its module doc
//! says what it feeds, the input layout and what it checks).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| jetraft::fuzzing::targets::jsapi_requests::run(data));
