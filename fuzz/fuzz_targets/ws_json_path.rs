//! Fuzz target: `msgstorm::fuzzing::ws_json_path`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::ws_json_path(data));
