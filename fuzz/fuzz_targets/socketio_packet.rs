//! Fuzz target: `msgstorm::fuzzing::socketio_packet`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::socketio_packet(data));
