//! Fuzz target: `msgstorm::fuzzing::scenario`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::scenario(data));
