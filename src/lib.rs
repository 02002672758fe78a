//! msgstorm: load, capacity and delivery-reliability testing for IM and long-connection
//! servers.
//!
//! # Layout
//!
//! The modules follow the data flow of a run:
//!
//! ```text
//! scenario.toml ─▶ scenario ─▶ Plan ─▶ engine ─▶ driver Session ◀──wire──▶ target
//!                                        │            └─ bodies ─▶ envelope ─▶ ledger
//!                                        └─ due times, outcomes ─────────────▶ metrics
//!                          ledger + metrics + monitor ─▶ artifact (result.json, mergeable)
//!                                                             artifact(s) ─▶ report
//! ```
//!
//! - [`scenario`] parses and validates a scenario file and lowers it into a [`scenario::Plan`].
//! - [`wire`] holds the reference server's frame types, shared by `serve` and the native driver.
//! - [`error`] is the crate error and the exit-code contract.

pub mod cli;
pub mod error;
pub mod scenario;
#[cfg(feature = "serve")]
pub mod serve;
pub mod wire;

pub use error::{Error, Result};
