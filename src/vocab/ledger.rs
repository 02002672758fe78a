//! The ledger's settings, as the plan sets them.

use std::time::Duration;

/// Delivery verification settings.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerOpts {
    /// Fraction of streams tracked (1.0: all), chosen by a hash of the stream id.
    pub sample: f64,
    /// A delivery later than this after its due time counts as late.
    pub late_after: Duration,
    /// Examples kept per kind of delivery failure.
    pub examples: usize,
    /// Online users run a final sync after the drain so pushes the server lost but stored
    /// are reported as repaired.
    pub verify_sync: bool,
    /// The times, µs from traffic start, at which the chaos steps begin and end (sorted,
    /// distinct; empty without `[[chaos]]`): deliveries are also counted per span between
    /// them, by due time, for each step's figures.
    pub bounds_us: Vec<u64>,
    /// The login wave's bounds, µs from traffic start: where each run of its seconds
    /// begins and ends, in turn (sorted, distinct; empty without `[population.sessions]`).
    /// Lost messages are told by whether they were due in the wave.
    pub wave_us: Vec<u64>,
}
