//! SLO checks: each scenario check evaluated against an artifact, with the measured value.

use crate::artifact::{Artifact, CheckSpec};
use crate::ledger::Delivery;
use crate::metrics::{Counter, Hist};

/// One evaluated check.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckResult {
    /// The scenario key, e.g. `checks.max_lost`.
    pub key: String,
    /// The bound as written, with its unit, e.g. `<= 0` or `<= 200.0 ms`.
    pub bound: String,
    /// What was measured, with its unit, or why nothing could be.
    pub measured: String,
    /// Whether it passed.
    pub passed: bool,
}

/// Evaluates every check of `a` (plus an `interrupted` pseudo-check for a stopped run).
pub fn evaluate(a: &Artifact, delivery: &Delivery) -> Vec<CheckResult> {
    let mut out: Vec<CheckResult> = a.checks.iter().map(|c| one(a, delivery, c)).collect();
    let m = &a.metrics;
    if m.count(Counter::LoginOk) == 0 && m.count(Counter::ConnectAttempts) > 0 {
        let first = m.errors().next().map_or_else(String::new, |(k, _, ex)| {
            format!(": {} ({})", k.name(), ex.first().map_or("", String::as_str))
        });
        out.push(CheckResult {
            key: "run.logins".to_owned(),
            bound: "at least one user logs in".to_owned(),
            measured: format!(
                "none of {} attempts{first}",
                m.count(Counter::ConnectAttempts)
            ),
            passed: false,
        });
    }
    if a.interrupted {
        out.push(CheckResult {
            key: "run.completed".to_owned(),
            bound: "the run ends on its own".to_owned(),
            measured: "interrupted by a signal".to_owned(),
            passed: false,
        });
    }
    out
}

fn one(a: &Artifact, d: &Delivery, c: &CheckSpec) -> CheckResult {
    let m = &a.metrics;
    let latency = |h: Hist| -> Option<f64> {
        let hist = m.hist(h);
        (!hist.is_empty()).then(|| hist.value_at_quantile(0.99) as f64)
    };
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let (value, unit): (Option<f64>, Unit) = match c.metric.as_str() {
        "lost" => (Some(d.lost as f64), Unit::Count),
        "duplicated" => (Some(d.duplicated as f64), Unit::Count),
        "reordered" => (Some(d.reordered as f64), Unit::Count),
        "corrupted" => (Some(d.corrupted as f64), Unit::Count),
        "late" => (Some(d.late as f64), Unit::Count),
        "e2e_p99_us" => (latency(Hist::EndToEnd), Unit::Micros),
        "ack_p99_us" if !a.acceptance => (None, Unit::Micros),
        "ack_p99_us" => (latency(Hist::SendAck), Unit::Micros),
        "request_p99_us" => (latency(Hist::Request), Unit::Micros),
        "login_success" => (
            ratio(m.count(Counter::LoginOk), m.count(Counter::ConnectAttempts)),
            Unit::Ratio,
        ),
        "send_error_rate" => {
            let failed = m.count(Counter::Refused) + m.count(Counter::SendErrors);
            (
                ratio(
                    failed,
                    m.count(Counter::Sent) + m.count(Counter::SendErrors),
                ),
                Unit::Ratio,
            )
        }
        other => {
            return CheckResult {
                key: c.key.clone(),
                bound: format!("{} {}", c.op, c.value),
                measured: format!("unknown metric `{other}`"),
                passed: false,
            }
        }
    };
    let passed = value.is_some_and(|v| match c.op.as_str() {
        "<=" => v <= c.value,
        ">=" => v >= c.value,
        _ => false,
    });
    let measured = match value {
        Some(v) => unit.show(v),
        None if c.metric == "ack_p99_us" && !a.acceptance => {
            "not measured: the protocol has no acceptance".to_owned()
        }
        None => "not measured: no samples".to_owned(),
    };
    CheckResult {
        key: c.key.clone(),
        bound: format!("{} {}", c.op, unit.show(c.value)),
        measured,
        passed,
    }
}

#[derive(Debug, Clone, Copy)]
enum Unit {
    Count,
    Micros,
    Ratio,
}

impl Unit {
    fn show(self, v: f64) -> String {
        match self {
            Unit::Count => format!("{v:.0}"),
            Unit::Micros => format!("{:.2} ms", v / 1000.0),
            Unit::Ratio => format!("{:.3}%", v * 100.0),
        }
    }
}
