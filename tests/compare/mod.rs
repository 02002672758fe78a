//! `msgstorm compare` on real runs' results.

mod cli;
