//! Fuzz target: `msgstorm::fuzzing::wire`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::wire(data));
