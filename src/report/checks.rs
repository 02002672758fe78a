//! SLO checks: each scenario check evaluated against an artifact, with the measured value,
//! plus the pseudo-checks every run must pass (`run.shards`, `run.logins`, `run.completed`,
//! `run.engine`).

use serde::Serialize;

use crate::artifact::{Artifact, CheckMetric, CheckSpec, Op};
use crate::ledger::Delivery;
use crate::metrics::{Counter, ErrorKind, Hist};

/// One evaluated check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckOutcome {
    /// The scenario key, e.g. `checks.max_lost`, or `run.…` for a pseudo-check.
    pub key: String,
    /// What was measured.
    pub metric: Measure,
    /// How `value` must compare with `bound`.
    pub op: Op,
    /// The bound, in `unit`.
    pub bound: f64,
    /// The unit of `bound` and `value`.
    pub unit: Unit,
    /// What was measured, in `unit`; `None` when it could not be (see `not_measured`).
    pub value: Option<f64>,
    /// Why nothing could be measured, when `value` is `None`.
    pub not_measured: Option<NotMeasured>,
    /// Whether it passed.
    pub passed: bool,
}

/// The metric of a check: a scenario check's, or one of the run's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Measure {
    /// A metric a scenario check names.
    Check(CheckMetric),
    /// A metric of a pseudo-check.
    Run(RunMetric),
}

/// The metrics of the pseudo-checks, which appear only when they fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RunMetric {
    /// `run.shards`: shards of the run present in the result (all of them must be: a
    /// partial result cannot judge delivery, nor pass).
    Shards,
    /// `run.logins`: successful logins, when there were attempts (at least one must succeed).
    Logins,
    /// `run.completed`: 1 when a signal stopped the run (it must end on its own).
    Interrupted,
    /// `run.engine`: user tasks of the generator that failed (there must be none).
    EngineErrors,
}

/// The unit of a check's bound and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// A count.
    Count,
    /// Microseconds.
    #[serde(rename = "us")]
    Micros,
    /// A ratio, 0..1.
    Ratio,
}

/// Why a check's metric could not be measured (the check then fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotMeasured {
    /// Nothing was recorded for it.
    NoSamples,
    /// Send → acceptance latency, and the protocol has no acceptance.
    NoAcceptance,
}

/// Evaluates every check of `a`, then the pseudo-checks that failed.
pub fn evaluate(a: &Artifact, delivery: &Delivery) -> Vec<CheckOutcome> {
    let mut out: Vec<CheckOutcome> = a.checks.iter().map(|c| one(a, delivery, c)).collect();
    let m = &a.metrics;
    let failed = |metric, op, bound, value| CheckOutcome {
        key: match metric {
            RunMetric::Shards => "run.shards",
            RunMetric::Logins => "run.logins",
            RunMetric::Interrupted => "run.completed",
            RunMetric::EngineErrors => "run.engine",
        }
        .to_owned(),
        metric: Measure::Run(metric),
        op,
        bound,
        unit: Unit::Count,
        value: Some(value),
        not_measured: None,
        passed: false,
    };
    let count = a.shard_count();
    let missing = a.missing_shards().len() as u32;
    if missing > 0 {
        out.push(failed(
            RunMetric::Shards,
            Op::AtLeast,
            f64::from(count),
            f64::from(count - missing),
        ));
    }
    if m.count(Counter::LoginOk) == 0 && m.count(Counter::ConnectAttempts) > 0 {
        out.push(failed(RunMetric::Logins, Op::AtLeast, 1.0, 0.0));
    }
    if a.interrupted {
        out.push(failed(RunMetric::Interrupted, Op::AtMost, 0.0, 1.0));
    }
    let engine = m
        .errors()
        .find(|(k, _, _)| *k == ErrorKind::Engine)
        .map_or(0, |(_, n, _)| n);
    if engine > 0 {
        out.push(failed(
            RunMetric::EngineErrors,
            Op::AtMost,
            0.0,
            engine as f64,
        ));
    }
    out
}

fn one(a: &Artifact, d: &Delivery, c: &CheckSpec) -> CheckOutcome {
    let m = &a.metrics;
    let latency = |h: Hist| -> Option<f64> {
        let hist = m.hist(h);
        (!hist.is_empty()).then(|| hist.value_at_quantile(0.99) as f64)
    };
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let count = |n: u64| Some(n as f64);
    let (value, unit) = match c.metric {
        CheckMetric::Lost => (count(d.lost), Unit::Count),
        CheckMetric::Duplicated => (count(d.duplicated), Unit::Count),
        CheckMetric::Reordered => (count(d.reordered), Unit::Count),
        CheckMetric::Corrupted => (count(d.corrupted), Unit::Count),
        CheckMetric::Late => (count(d.late), Unit::Count),
        CheckMetric::E2eP99 => (latency(Hist::EndToEnd), Unit::Micros),
        CheckMetric::AckP99 if !a.acceptance => (None, Unit::Micros),
        CheckMetric::AckP99 => (latency(Hist::SendAck), Unit::Micros),
        CheckMetric::RequestP99 => (latency(Hist::Request), Unit::Micros),
        CheckMetric::LoginSuccess => (
            ratio(m.count(Counter::LoginOk), m.count(Counter::ConnectAttempts)),
            Unit::Ratio,
        ),
        CheckMetric::SendErrorRate => {
            let failed = m.count(Counter::Refused) + m.count(Counter::SendErrors);
            let tried = m.count(Counter::Sent) + m.count(Counter::SendErrors);
            (ratio(failed, tried), Unit::Ratio)
        }
    };
    let not_measured = match value {
        Some(_) => None,
        None if c.metric == CheckMetric::AckP99 && !a.acceptance => Some(NotMeasured::NoAcceptance),
        None => Some(NotMeasured::NoSamples),
    };
    CheckOutcome {
        key: c.key.clone(),
        metric: Measure::Check(c.metric),
        op: c.op,
        bound: c.value,
        unit,
        value,
        not_measured,
        // Messages whose recipients were never reached can't be shown delivered: a loss
        // bound can't pass while any are unverified.
        passed: value.is_some_and(|v| c.op.holds(v, c.value))
            && !(c.metric == CheckMetric::Lost && d.unverified > 0),
    }
}
