//! Fuzz target: `msgstorm::fuzzing::ws_frames`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::ws_frames(data));
