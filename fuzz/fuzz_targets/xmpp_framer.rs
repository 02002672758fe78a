//! Fuzz target: `msgstorm::fuzzing::xmpp_framer`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::xmpp_framer(data));
