//! Fuzz target: `msgstorm::fuzzing::envelope`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::envelope(data));
