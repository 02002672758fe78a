//! SLO checks: each scenario check evaluated against an artifact, with the measured value;
//! the built-in checks every run gets whether or not the scenario writes them (the run did
//! the work: [`BUILT_IN`]); and the pseudo-checks every run must pass (`run.shards`,
//! `run.logins`, `run.completed`, `run.engine`).

use serde::Serialize;

use crate::artifact::{Artifact, CheckMetric, CheckSpec, Op};
use crate::ledger::signals::{SignalDelivery, SignalRow};
use crate::ledger::Delivery;
use crate::metrics::{send_failures, Counter, ErrorKind, Hist};
use crate::vocab::SignalKind;
pub use crate::vocab::Unit;

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
    /// Where the check comes from.
    pub origin: Origin,
    /// The built-in bound, for a built-in check (set by the scenario or not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_bound: Option<f64>,
    /// Why it failed, in one line with an example (`None` when it passed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Where a check comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Written in the scenario's `[checks]` (for a built-in check: at least as strict as
    /// its default).
    Scenario,
    /// A built-in check the scenario did not write: applied with its default bound.
    BuiltIn,
    /// A built-in check the scenario relaxed: its bound is looser than the default.
    Relaxed,
    /// A pseudo-check of the run itself (`run.…`).
    Run,
}

/// A check every run gets: PASS means the run did the work the scenario asked (verified
/// deliveries, understood the server, got its sends accepted, measured only its own
/// traffic), not only that the written checks held. The scenario relaxes one by writing
/// its key in `[checks]` with a looser bound.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BuiltIn {
    /// The `[checks]` key.
    pub key: &'static str,
    /// What it measures.
    pub metric: CheckMetric,
    /// How the measured value must compare with the bound.
    pub op: Op,
    /// The bound unless the scenario sets one.
    pub default: f64,
}

/// The built-in checks, in report order: a failing adapter script first, since nothing
/// after it measured what the scenario meant; then the generator's own schedule (a run that
/// did not offer the asked load is no verdict on the target); then the users the plan put
/// online, and what every delivery owes — and, where the scenario asks for signals, every
/// read receipt, typing notice and presence change owed (bounds measured on the 2-core box the tests run
/// on so that every shipped scenario passes: `bench/results/2026-11-28-promise.md`).
pub const BUILT_IN: [BuiltIn; 19] = [
    BuiltIn {
        key: "checks.max_script_errors",
        metric: CheckMetric::ScriptErrors,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_send_lag",
        metric: CheckMetric::SendLag,
        op: Op::AtMost,
        default: MAX_SEND_LAG_US,
    },
    BuiltIn {
        key: "checks.min_offered",
        metric: CheckMetric::Offered,
        op: Op::AtLeast,
        default: 0.99,
    },
    BuiltIn {
        key: "checks.min_login_success",
        metric: CheckMetric::LoginSuccess,
        op: Op::AtLeast,
        default: 0.999,
    },
    BuiltIn {
        key: "checks.min_online",
        metric: CheckMetric::Online,
        op: Op::AtLeast,
        default: 0.99,
    },
    BuiltIn {
        key: "checks.max_lost",
        metric: CheckMetric::Lost,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_duplicated",
        metric: CheckMetric::Duplicated,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_reordered",
        metric: CheckMetric::Reordered,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_corrupted",
        metric: CheckMetric::Corrupted,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.min_verified",
        metric: CheckMetric::Verified,
        op: Op::AtLeast,
        default: 0.9,
    },
    BuiltIn {
        key: "checks.max_send_error_rate",
        metric: CheckMetric::SendErrorRate,
        op: Op::AtMost,
        default: 0.01,
    },
    BuiltIn {
        key: "checks.max_protocol_errors",
        metric: CheckMetric::ProtocolErrors,
        op: Op::AtMost,
        default: 10.0,
    },
    BuiltIn {
        key: "checks.max_repaired_rate",
        metric: CheckMetric::RepairedRate,
        op: Op::AtMost,
        default: 0.001,
    },
    BuiltIn {
        key: "checks.max_foreign",
        metric: CheckMetric::Foreign,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_join_failures",
        metric: CheckMetric::JoinFailures,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_receipts_lost",
        metric: CheckMetric::ReceiptsLost,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_receipts_duplicated",
        metric: CheckMetric::ReceiptsDuplicated,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_typing_missed",
        metric: CheckMetric::TypingMissed,
        op: Op::AtMost,
        default: 0.0,
    },
    BuiltIn {
        key: "checks.max_presence_missed",
        metric: CheckMetric::PresenceMissed,
        op: Op::AtMost,
        default: 0.0,
    },
];

/// The built-in bound on the generator's send lag p99, µs: a generator that sends 1% of
/// its messages more than a second after they were due did not offer the asked load.
pub const MAX_SEND_LAG_US: f64 = 1_000_000.0;

/// The checks on the generator's own schedule: when one fails, the run did not offer what
/// the scenario asked (`run.generator`).
pub const GENERATOR_CHECKS: [CheckMetric; 2] = [CheckMetric::SendLag, CheckMetric::Offered];

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
    /// `run.chaos`: chaos steps that did not do what they were to do (there must be none:
    /// a run whose fault did not happen measured nothing of it).
    Chaos,
    /// `run.generator`: the generator's schedule checks that failed (there must be none: a
    /// run that did not offer the asked load is no verdict on the target). Listed first.
    Generator,
}

/// Why a check's metric could not be measured (the check then fails).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotMeasured {
    /// Nothing was recorded for it.
    NoSamples,
    /// Send → acceptance latency, and the protocol has no acceptance.
    NoAcceptance,
    /// A signal the scenario asked for of which no recipient was owed one: the run
    /// verified none (no such sends, or no recipient online `within` around them).
    NothingOwed,
}

/// Evaluates every check of `a`, then the built-in checks it does not write (those that
/// apply to what the run did), then the pseudo-checks that failed.
pub fn evaluate(a: &Artifact, delivery: &Delivery, signals: &Signals) -> Vec<CheckOutcome> {
    let m = Measured { delivery, signals };
    let mut out = written(a, &m);
    out.extend(built_ins(a, &m));
    run_checks(a, &mut out);
    out
}

/// The checks `a` writes, each marked relaxed when it loosens a built-in one.
/// What happened to a run's deliveries and signals: what checks measure besides metrics.
struct Measured<'a> {
    delivery: &'a Delivery,
    signals: &'a Signals,
}

/// What happened to each kind of signal asked for (see `SignalRecord::summary`).
pub type Signals = [SignalRow];

fn written(a: &Artifact, delivery: &Measured<'_>) -> Vec<CheckOutcome> {
    a.checks
        .iter()
        .map(|c| {
            let mut o = one(a, delivery, c);
            if let Some(b) = BUILT_IN.iter().find(|b| b.metric == c.metric) {
                o.default_bound = Some(b.default);
                if !b.op.holds(c.value, b.default) {
                    o.origin = Origin::Relaxed;
                }
            }
            o
        })
        .collect()
}

/// The built-in checks `a` does not write that apply to what the run did.
fn built_ins(a: &Artifact, delivery: &Measured<'_>) -> Vec<CheckOutcome> {
    BUILT_IN
        .iter()
        .filter(|b| {
            !a.checks.iter().any(|c| c.metric == b.metric) && applies(a, delivery, b.metric)
        })
        .map(|b| {
            let spec = CheckSpec {
                key: b.key.to_owned(),
                metric: b.metric,
                op: b.op,
                value: b.default,
            };
            let mut o = one(a, delivery, &spec);
            o.origin = Origin::BuiltIn;
            o.default_bound = Some(b.default);
            o
        })
        .collect()
}

impl RunMetric {
    /// The pseudo-check's key.
    fn key(self) -> &'static str {
        match self {
            RunMetric::Shards => "run.shards",
            RunMetric::Logins => "run.logins",
            RunMetric::Interrupted => "run.completed",
            RunMetric::EngineErrors => "run.engine",
            RunMetric::Chaos => "run.chaos",
            RunMetric::Generator => "run.generator",
        }
    }
}

/// A pseudo-check that failed: `value` measured against `bound`.
fn failed(metric: RunMetric, op: Op, bound: f64, value: f64) -> CheckOutcome {
    CheckOutcome {
        key: metric.key().to_owned(),
        metric: Measure::Run(metric),
        op,
        bound,
        unit: Unit::Count,
        value: Some(value),
        not_measured: None,
        passed: false,
        origin: Origin::Run,
        default_bound: None,
        reason: None,
    }
}

/// Adds the pseudo-checks of the run itself that failed, and the chaos steps' bounds, to
/// the checks in `out`: `run.generator` first, as it says the rest is no verdict.
fn run_checks(a: &Artifact, out: &mut Vec<CheckOutcome>) {
    let m = &a.metrics;
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
    out.extend(step_checks(a));
    let undone = a.chaos.iter().filter(|s| !s.ok).count();
    if undone > 0 {
        out.push(failed(RunMetric::Chaos, Op::AtMost, 0.0, undone as f64));
    }
    let behind = out
        .iter()
        .filter(|c| {
            !c.passed && matches!(c.metric, Measure::Check(m) if GENERATOR_CHECKS.contains(&m))
        })
        .count();
    if behind > 0 && !a.interrupted && generator_was_the_limit(a) {
        out.insert(
            0,
            failed(RunMetric::Generator, Op::AtMost, 0.0, behind as f64),
        );
    }
    let engine = errors_of(a, ErrorKind::Engine);
    if engine > 0 {
        out.push(failed(
            RunMetric::EngineErrors,
            Op::AtMost,
            0.0,
            engine as f64,
        ));
    }
}

/// Whether a built-in check the scenario does not write says anything about this run: the
/// delivery checks only when the run planned deliveries or requests (and, for the verified
/// share, when no shard is missing), the send check only when something was sent.
fn applies(a: &Artifact, measured: &Measured<'_>, metric: CheckMetric) -> bool {
    let (m, d) = (&a.metrics, measured.delivery);
    let asked = |k: SignalKind| measured.signals.iter().any(|s| s.kind == k);
    match metric {
        // A shard alone holds the deliveries to its own users only, of senders anywhere.
        CheckMetric::Verified => {
            a.missing_shards().is_empty() && (d.planned > 0 || work_due(a) > 0)
        }
        CheckMetric::SendErrorRate => m.count(Counter::Sent) + m.count(Counter::SendErrors) > 0,
        CheckMetric::RepairedRate => d.expected > 0,
        CheckMetric::Lost | CheckMetric::Duplicated | CheckMetric::Reordered => {
            (d.planned > 0 || d.expected > 0) && !a.unpromised.contains(&metric)
        }
        CheckMetric::Corrupted => d.planned > 0 || d.expected > 0,
        // A chaos step holds writes back by design (a restarted target takes none): its
        // run's send lag is the step's, shown in its row, not a built-in verdict.
        CheckMetric::SendLag => !m.hist(Hist::SendLag).is_empty() && a.chaos.is_empty(),
        // A run stopped by a signal did not make what was due after it, by design.
        CheckMetric::Offered => m.count(Counter::Due) > 0 && !a.interrupted,
        // A run in which nobody logged in fails `run.logins`, which says it better.
        CheckMetric::LoginSuccess => m.count(Counter::LoginOk) > 0,
        CheckMetric::Online => m.count(Counter::PlannedUserMs) > 0 && m.count(Counter::LoginOk) > 0,
        // Only adapter scripts fail this way: other runs' reports stay as they were.
        CheckMetric::ScriptErrors => a.driver == "script" || errors_of(a, ErrorKind::Script) > 0,
        m => m.signal().is_none_or(asked),
    }
}

/// Sends and requests that were due: sent, refused before the wire, or not sent because
/// their sender was offline.
fn work_due(a: &Artifact) -> u64 {
    let m = &a.metrics;
    m.count(Counter::Sent) + m.count(Counter::Dropped) + m.count(Counter::Requests)
}

/// The count of errors of `kind`.
fn errors_of(a: &Artifact, kind: ErrorKind) -> u64 {
    a.metrics
        .errors()
        .find(|(k, _, _)| *k == kind)
        .map_or(0, |(_, n, _)| n)
}

/// (verified, planned) work: deliveries shown delivered or lost plus replies, of the
/// deliveries planned plus requests. One definition for the check and its reason.
pub fn verified_work(d: &Delivery, requests: u64, replies: u64) -> (u64, u64) {
    (
        d.expected.saturating_sub(d.unverified) + replies,
        d.planned + requests,
    )
}

/// Verified ÷ planned work: deliveries shown delivered or lost (not those refused, never
/// confirmed, or to recipients never reached), and replies to requests. 0 when work was
/// due but none was planned on a tracked stream; `None` when no work was due at all.
pub fn verified_share(a: &Artifact, d: &Delivery) -> Option<f64> {
    let m = &a.metrics;
    let (verified, planned) =
        verified_work(d, m.count(Counter::Requests), m.count(Counter::Replies));
    if planned > 0 {
        Some(verified.min(planned) as f64 / planned as f64)
    } else {
        (work_due(a) > 0).then_some(0.0)
    }
}

fn one(a: &Artifact, measured: &Measured<'_>, c: &CheckSpec) -> CheckOutcome {
    let (m, d) = (&a.metrics, measured.delivery);
    // A kind asked for that owed nothing verified nothing: not measured, so not a pass.
    let owed = |k: SignalKind| {
        measured
            .signals
            .iter()
            .find(|s| s.kind == k && s.delivery.expected > 0)
    };
    let signal =
        |k: SignalKind, f: fn(&SignalDelivery) -> u64| owed(k).map(|s| f(&s.delivery) as f64);
    let latency = |h: Hist| -> Option<f64> {
        let hist = m.hist(h);
        (!hist.is_empty()).then(|| hist.value_at_quantile(0.99) as f64)
    };
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let count = |n: u64| Some(n as f64);
    let value = match c.metric {
        CheckMetric::Lost => count(d.lost),
        CheckMetric::Duplicated => count(d.duplicated),
        CheckMetric::Reordered => count(d.reordered),
        CheckMetric::Corrupted => count(d.corrupted),
        CheckMetric::Late => count(d.late),
        CheckMetric::AckP99 if !a.acceptance => None,
        CheckMetric::E2eP99
        | CheckMetric::AckP99
        | CheckMetric::RequestP99
        | CheckMetric::SendLag
        | CheckMetric::ReceiptP99
        | CheckMetric::TypingP99
        | CheckMetric::PresenceP99 => c.metric.entry().p99_of.and_then(latency),
        // A receipt the server refused (or never confirmed) did not reach its sender either.
        CheckMetric::ReceiptsLost => signal(SignalKind::Read, |s| s.missing + s.refused),
        CheckMetric::ReceiptsDuplicated => signal(SignalKind::Read, |s| s.duplicated),
        CheckMetric::TypingMissed => signal(SignalKind::Typing, |s| s.missing),
        CheckMetric::PresenceMissed => signal(SignalKind::Presence, |s| s.missing),
        CheckMetric::LoginSuccess => {
            let (ok, tried) = outside_chaos(a, Counter::LoginOk, Counter::ConnectAttempts);
            ratio(ok, tried)
        }
        CheckMetric::Online => {
            let (online, planned) = outside_chaos(a, Counter::OnlineUserMs, Counter::PlannedUserMs);
            ratio(online, planned)
        }
        CheckMetric::Offered => offered(m),
        CheckMetric::SendErrorRate => {
            let (failed, tried) = send_failures(|c| m.count(c));
            ratio(failed, tried)
        }
        CheckMetric::Verified => verified_share(a, d),
        CheckMetric::ProtocolErrors => count(errors_of(a, ErrorKind::Protocol)),
        CheckMetric::RepairedRate => ratio(d.repaired, d.expected),
        CheckMetric::Foreign => count(errors_of(a, ErrorKind::Foreign) + d.unexpected),
        CheckMetric::JoinFailures => count(errors_of(a, ErrorKind::JoinFailed)),
        CheckMetric::ScriptErrors => count(errors_of(a, ErrorKind::Script)),
        CheckMetric::Recovery => recovery_us(a),
    };
    let not_measured = match value {
        Some(_) => None,
        None if c.metric == CheckMetric::AckP99 && !a.acceptance => Some(NotMeasured::NoAcceptance),
        None if c.metric.signal().is_some() => Some(NotMeasured::NothingOwed),
        None => Some(NotMeasured::NoSamples),
    };
    CheckOutcome {
        key: c.key.clone(),
        metric: Measure::Check(c.metric),
        op: c.op,
        bound: c.value,
        unit: c.metric.unit(),
        value,
        not_measured,
        // Messages whose recipients were never reached can't be shown delivered: a loss
        // bound can't pass while any are unverified.
        passed: value.is_some_and(|v| c.op.holds(v, c.value))
            && !(c.metric == CheckMetric::Lost && d.unverified > 0),
        origin: Origin::Scenario,
        default_bound: None,
        reason: None,
    }
}

/// The share of all its cores from which a generator process is taken to have been the
/// limit of its own schedule.
pub const GENERATOR_BUSY_SHARE: f64 = 0.8;

/// Whether a generator that fell behind was itself the limit, rather than a target that
/// did not take its writes: the target ran inside the generator's process (the embedded
/// server, the loopback hub), or a generator process used [`GENERATOR_BUSY_SHARE`] of its
/// cores, or its CPU was not watched (then nothing says the target held it back).
pub fn generator_was_the_limit(a: &Artifact) -> bool {
    if a.driver == "loopback"
        || a.notes
            .iter()
            .any(|n| n == super::findings::EMBEDDED_IN_GENERATOR)
    {
        return true;
    }
    let mut watched = false;
    for p in a.processes.iter().filter(|p| p.generator) {
        watched = true;
        let cores = a
            .shards
            .iter()
            .find(|s| s.index == p.shard)
            .map_or(1, |s| s.cores.max(1));
        if p.cpu_peak_pct >= GENERATOR_BUSY_SHARE * 100.0 * f64::from(cores) {
            return true;
        }
    }
    !watched
}

/// Sends made (sent, failed, or due while their sender was offline) ÷ sends the schedule
/// made due, at most 1; `None` when nothing was due.
pub fn offered(m: &crate::metrics::Metrics) -> Option<f64> {
    let due = m.count(Counter::Due);
    let made = offered_count(|c| m.count(c));
    (due > 0).then(|| (made as f64 / due as f64).min(1.0))
}

/// Sends made, from counter totals: sent, failed, or due while their sender was offline.
pub fn offered_count(count: impl Fn(Counter) -> u64) -> u64 {
    count(Counter::Sent) + count(Counter::SendErrors) + count(Counter::Dropped)
}

/// The totals of `num` and `den` over the run's seconds, leaving out those in which a chaos
/// step had users away: from the second its window began until the end of its window or,
/// when users went offline, until the second after they were all back. A step after which
/// they never came back leaves out only its window: the seconds after it count.
fn outside_chaos(a: &Artifact, num: Counter, den: Counter) -> (u64, u64) {
    let m = &a.metrics;
    if a.chaos.is_empty() {
        return (m.count(num), m.count(den));
    }
    let series = super::series::of(m);
    let away: Vec<(f64, f64)> = super::effect::chaos_rows(a, &series)
        .iter()
        .map(|c| {
            let e = &c.effect;
            let back = e.back_online_s.map_or(e.to_s, |s| e.from_s + s + 1.0);
            (e.from_s.floor(), back.max(e.to_s).ceil())
        })
        .collect();
    m.seconds()
        .filter(|s| {
            let t = f64::from(s.sec);
            !away.iter().any(|&(from, to)| t >= from && t < to)
        })
        .fold((0, 0), |(n, d), s| (n + s.count(num), d + s.count(den)))
}

/// The longest recovery after a chaos step, µs: a step not recovered by the end of the
/// run counts as the rest of the run; `None` when the run had no step.
fn recovery_us(a: &Artifact) -> Option<f64> {
    let series = super::series::of(&a.metrics);
    let rows = super::effect::chaos_rows(a, &series);
    rows.iter()
        .map(|c| match c.effect.recovery_s {
            Some(s) => s,
            None => (a.duration_s - c.effect.to_s).max(0.0),
        })
        .map(|s| s * 1e6)
        .reduce(f64::max)
}

/// The per-step bounds of the chaos steps (`chaos[i].max_lost`, `chaos[i].max_duplicated`):
/// the messages due in the step's window and after it, until the next step, and those it
/// found on their way.
fn step_checks(a: &Artifact) -> Vec<CheckOutcome> {
    let spans = super::effect::step_charged_spans(a);
    let mut out = Vec::new();
    for step in &a.chaos {
        let (during, after) = super::effect::step_spans(a.ledger.bounds_us(), &spans, step);
        let both = during + after;
        for (key, bound, value, metric) in [
            ("max_lost", step.max_lost, both.lost, CheckMetric::Lost),
            (
                "max_duplicated",
                step.max_duplicated,
                both.duplicated,
                CheckMetric::Duplicated,
            ),
        ] {
            let Some(bound) = bound else { continue };
            out.push(CheckOutcome {
                key: format!("{}.{key}", step.key),
                metric: Measure::Check(metric),
                op: Op::AtMost,
                bound: bound as f64,
                unit: Unit::Count,
                value: Some(value as f64),
                not_measured: None,
                passed: value <= bound,
                origin: Origin::Scenario,
                default_bound: None,
                reason: None,
            });
        }
    }
    out
}
