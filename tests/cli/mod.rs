//! The `msgstorm` binary end to end against the reference server: verdicts, exit codes, blame, faults, shards, signals, reports.

mod blame;
mod delivery;
mod drivers;
mod exit_codes;
mod faults;
mod flow;
mod hostile;
mod new;
mod promise;
pub(crate) mod report;
mod scenario_schema;
mod shards;
pub(crate) mod signals;
mod verdict;
#[cfg(feature = "tls")]
mod wss;
