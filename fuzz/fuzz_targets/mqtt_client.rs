//! Fuzz target: `msgstorm::fuzzing::mqtt_client`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::mqtt_client(data));
