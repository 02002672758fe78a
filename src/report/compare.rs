//! `msgstorm compare BASE NEW`: every headline metric of two runs side by side, with the
//! absolute and relative change and a verdict per metric (better, worse, within noise),
//! and regression gates (`--fail-on 'e2e_p99>+10%'`) for CI.
//!
//! "Within noise" is a change smaller than what two runs of one build on one host
//! typically differ by: a per-kind relative band ([`Kind::noise`]) plus, for latencies, an
//! absolute floor of [`LATENCY_FLOOR_US`] (scheduler and timer jitter). Counts that should
//! be zero (lost, duplicated, errors …) have no noise: any change is a verdict.

pub mod gate;
pub mod render;
mod rows;

use serde::Serialize;

use super::model::Report;
pub use crate::vocab::Better;

/// Latency changes below this many µs are within noise whatever their relative size.
pub const LATENCY_FLOOR_US: f64 = 100.0;

/// What a metric measures, which sets its unit and its noise band.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A latency percentile below the tail (p50, p95, mean), µs.
    Latency,
    /// A tail percentile (p99, p99.9), µs.
    Tail,
    /// The highest latency (one sample), µs.
    Max,
    /// Events per second.
    Rate,
    /// A count that scales with the load (logins, online users, deliveries).
    Volume,
    /// A count that should be zero (lost, duplicated, errors …): no noise.
    Problem,
    /// A ratio 0..1.
    Ratio,
    /// CPU, % of one core.
    Cpu,
    /// CPU seconds.
    CpuSeconds,
    /// Bytes of memory.
    Bytes,
}

impl Kind {
    /// The relative change within which two runs of one build typically differ.
    pub fn noise(self) -> f64 {
        match self {
            Kind::Latency => 0.05,
            Kind::Tail => 0.10,
            Kind::Max => 0.25,
            Kind::Rate | Kind::Volume => 0.02,
            Kind::Problem => 0.0,
            Kind::Ratio => 0.0,
            Kind::Cpu | Kind::CpuSeconds | Kind::Bytes => 0.05,
        }
    }

    /// Whether values are µs.
    pub fn is_latency(self) -> bool {
        matches!(self, Kind::Latency | Kind::Tail | Kind::Max)
    }
}

/// The verdict on one metric's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Improved beyond noise.
    Better,
    /// Regressed beyond noise.
    Worse,
    /// Exactly the same value.
    Unchanged,
    /// Changed less than the noise band.
    WithinNoise,
    /// Measured in only one of the runs.
    NotComparable,
}

impl Change {
    /// `better`, `worse`, `within noise`, `–`.
    pub fn word(self) -> &'static str {
        match self {
            Change::Better => "better",
            Change::Worse => "worse",
            Change::Unchanged => "unchanged",
            Change::WithinNoise => "within noise",
            Change::NotComparable => "–",
        }
    }
}

/// One metric of both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Its name in gates, e.g. `e2e_p99`.
    pub key: String,
    /// What it is, for people.
    pub label: String,
    /// What it measures.
    pub kind: Kind,
    /// Which direction is an improvement.
    pub better: Better,
    /// The base run's value.
    pub base: Option<f64>,
    /// The new run's value.
    pub new: Option<f64>,
    /// The verdict.
    pub change: Change,
}

impl Row {
    /// new − base, when both were measured.
    pub fn delta(&self) -> Option<f64> {
        Some(self.new? - self.base?)
    }

    /// (new − base) ÷ base: `None` when either is missing, infinite when only base is 0.
    pub fn relative(&self) -> Option<f64> {
        let (b, n) = (self.base?, self.new?);
        Some(if b == 0.0 {
            if n == 0.0 {
                0.0
            } else {
                f64::INFINITY.copysign(n)
            }
        } else {
            (n - b) / b.abs()
        })
    }
}

/// Two runs compared.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The base run's report.
    pub base: Report,
    /// The new run's report.
    pub new: Report,
    /// Every metric, in report order.
    pub rows: Vec<Row>,
}

impl Comparison {
    /// Compares `new` against `base`.
    pub fn new(base: Report, new: Report) -> Comparison {
        let rows = rows::all(&base, &new);
        Comparison { base, new, rows }
    }

    /// The row of a gate's metric.
    pub fn row(&self, key: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.key == key)
    }
}

/// The verdict on a change from `base` to `new` of a metric of `kind`.
pub fn verdict(kind: Kind, better: Better, base: Option<f64>, new: Option<f64>) -> Change {
    let (Some(b), Some(n)) = (base, new) else {
        return Change::NotComparable;
    };
    let delta = n - b;
    if delta == 0.0 {
        return Change::Unchanged;
    }
    let band = kind.noise() * b.abs();
    let floor = if kind.is_latency() {
        LATENCY_FLOOR_US
    } else {
        0.0
    };
    if delta.abs() <= band.max(floor) {
        return Change::WithinNoise;
    }
    match (delta > 0.0, better) {
        (true, Better::Higher) | (false, Better::Lower) => Change::Better,
        _ => Change::Worse,
    }
}

#[cfg(test)]
mod tests;
