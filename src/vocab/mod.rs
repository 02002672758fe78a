//! The words the whole house shares: user and stream numbers, the traffic kinds, the
//! ledger's settings, a search's precision and the metric catalog. A leaf: it imports
//! nothing of the crate, so that the scenario, the drivers, the ledger, the envelope,
//! `metrics`, the artifact, `find` and the report can all name these without importing
//! each other.

pub mod kind;
mod ledger;
pub mod metric;
pub mod offered;
mod precision;
pub mod signal;

pub use kind::TrafficKind;
pub use ledger::LedgerOpts;
pub use metric::{Better, CheckMetric, Hist, Unit};
pub use offered::Offered;
pub use precision::{num, Precision};
pub use signal::SignalKind;

/// A user is numbered `0..population.users` inside a plan; its wire id is
/// `format!("{}{}", population.prefix, population.first_id + index)`.
pub type UserIx = u32;

/// A stream is one sender's sequence of messages into one conversation; the ledger tracks
/// delivery per stream × recipient. Ids are dense from 0 and unique across a plan.
pub type StreamId = u32;
