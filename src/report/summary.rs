//! The machine-readable summary of a result (`msgstorm report --json`): the numbers of the
//! terminal report — verdict, checks, delivery, latency percentiles, counters, processes —
//! for CI jobs and scripts that should not parse tables or the raw histograms.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checks::CheckResult;
use crate::artifact::Artifact;
use crate::ledger::Delivery;
use crate::metrics::{Counter, Hist};
use crate::monitor::ProcUsage;

/// Latency percentiles of one histogram, µs.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Highest value.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// One check as judged.
#[derive(Debug, Clone, Serialize)]
pub struct CheckLine {
    /// Scenario key.
    pub key: String,
    /// The bound, with its unit.
    pub bound: String,
    /// What was measured, with its unit.
    pub measured: String,
    /// Whether it passed.
    pub passed: bool,
}

/// The summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// `pass`, `fail` or `interrupted`.
    pub verdict: &'static str,
    /// Scenario name.
    pub scenario: String,
    /// Run id.
    pub run_id: String,
    /// Length of the run, s.
    pub duration_s: f64,
    /// The checks.
    pub checks: Vec<CheckLine>,
    /// Delivery accounting (examples included).
    pub delivery: Delivery,
    /// Latency by histogram name (`end_to_end`, `send_ack`, …), µs; empty ones left out.
    pub latency_us: BTreeMap<&'static str, Latency>,
    /// Counters by name.
    pub counters: BTreeMap<&'static str, u64>,
    /// Errors by kind.
    pub errors: BTreeMap<&'static str, u64>,
    /// CPU and memory of the generator and watched processes.
    pub processes: Vec<ProcUsage>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// Builds the summary of `a`.
pub fn summarize(a: &Artifact, delivery: &Delivery, checks: &[CheckResult]) -> Summary {
    let m = &a.metrics;
    let passed = checks.iter().all(|c| c.passed);
    Summary {
        verdict: match (a.interrupted, passed) {
            (true, _) => "interrupted",
            (false, true) => "pass",
            (false, false) => "fail",
        },
        scenario: a.scenario.clone(),
        run_id: a.run_id.clone(),
        duration_s: a.duration_s,
        checks: checks
            .iter()
            .map(|c| CheckLine {
                key: c.key.clone(),
                bound: c.bound.clone(),
                measured: c.measured.clone(),
                passed: c.passed,
            })
            .collect(),
        delivery: delivery.clone(),
        latency_us: Hist::ALL
            .iter()
            .filter(|h| !m.hist(**h).is_empty())
            .map(|&h| {
                let x = m.hist(h);
                let q = |p| x.value_at_quantile(p);
                (
                    h.name(),
                    Latency {
                        count: x.len(),
                        p50: q(0.5),
                        p95: q(0.95),
                        p99: q(0.99),
                        p999: q(0.999),
                        max: x.max(),
                        mean: x.mean(),
                    },
                )
            })
            .collect(),
        counters: Counter::ALL
            .iter()
            .map(|&c| (c.name(), m.count(c)))
            .collect(),
        errors: m.errors().map(|(k, n, _)| (k.name(), n)).collect(),
        processes: a.processes.clone(),
        notes: a.notes.clone(),
    }
}
