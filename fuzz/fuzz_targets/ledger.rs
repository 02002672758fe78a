//! Fuzz target: `msgstorm::fuzzing::ledger`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| msgstorm::fuzzing::ledger(data));
