//! Fuzz target: `msgstorm::fuzzing::artifact`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::artifact(data));
