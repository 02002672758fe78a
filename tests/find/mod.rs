//! `msgstorm find` and `msgstorm size` end to end.

mod capacity;
mod sizing;
