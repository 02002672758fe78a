//! Computing a run's [`Report`] from its artifact: every number once, the checks with
//! their one-line reasons. Above the model and the words (`reason`, `present`), so that
//! neither imports the other's caller.

use super::checks::{self, CheckOutcome};
use super::findings;
use super::model::{
    Accounts, Connections, ErrorCount, Generator, Latency, Rates, Report, TransportUse, Verdict,
};
use super::series::{self, SecondPoint};
use super::sweep::Sweep;
use crate::artifact::Artifact;
use crate::ledger::Delivery;
use crate::metrics::wires::Wire;
use crate::metrics::{Counter, ErrorKind, Hist, Metrics};
use hdrhistogram::Histogram;

impl Report {
    /// Computes the report of `a`.
    pub fn new(a: &Artifact) -> Report {
        let mut clocks = super::clocks::of(a);
        let trimmed = clocks.as_mut().and_then(|c| c.exclude(a));
        let a = trimmed.as_ref().unwrap_or(a);
        Report::of(a, a.ledger.summary(), clocks)
    }

    /// The report of `a` with `delivery` as its delivery accounting (a finished run's is
    /// its ledger's summary; a running one's, the tallies already certain).
    pub(super) fn of(
        a: &Artifact,
        delivery: Delivery,
        clocks: Option<super::clocks::Clocks>,
    ) -> Report {
        let m = &a.metrics;
        let signals = a
            .signals
            .as_ref()
            .map(crate::artifact::SignalRecord::summary)
            .unwrap_or_default();
        let checks = checks::evaluate(a, &delivery, &signals);
        let series = series::of(m);
        let sweeps = Sweep::all(a);
        let missing_shards = a.missing_shards();
        let count = |c: Counter| m.count(c);
        let mut report = Report {
            verdict: verdict(a, &missing_shards, &checks),
            scenario: a.scenario.clone(),
            run_id: a.run_id.clone(),
            target: a.target.clone(),
            driver: a.driver.clone(),
            started_at: a.started_at.clone(),
            duration_s: a.duration_s,
            acceptance: a.acceptance,
            checks,
            delivery,
            connections: connections(m, &series),
            rates: Rates::of(m, active_seconds(&series)),
            latency_us: Hist::ALL
                .iter()
                .filter(|&&h| !m.hist(h).is_empty())
                .map(|&h| (h, latency(m.hist(h))))
                .collect(),
            counters: Counter::ALL.iter().map(|&c| (c, count(c))).collect(),
            errors: m
                .errors()
                .map(|(kind, count, examples)| {
                    let examples = examples.to_vec();
                    (kind, ErrorCount { count, examples })
                })
                .collect(),
            findings: findings::of(a, &sweeps),
            sweeps,
            series,
            generators: a.shards.iter().map(generator).collect(),
            clocks,
            missing_shards,
            processes: a.processes.clone(),
            notes: a
                .notes
                .iter()
                .filter(|n| !findings::is_finding_note(n))
                .cloned()
                .chain(unresumable(count(Counter::ResumesWithoutOffset)))
                .collect(),
            scenario_source: a.scenario_source.clone(),
            population: a.population.clone(),
            signals,
            split: super::split::rows(&a.metrics, &a.ledger),
            server_metrics: a.server_metrics.clone(),
            chaos: Vec::new(),
            live: None,
        };
        report.chaos = super::effect::chaos_rows(a, &report.series);
        let reasons: Vec<Option<String>> = report
            .checks
            .iter()
            .map(|c| (!c.passed).then(|| super::reason::of(&report, c)))
            .collect();
        for (c, why) in report.checks.iter_mut().zip(reasons) {
            c.reason = why;
        }
        report
    }
}

/// Incomplete when a shard is missing, else interrupted, else pass when every check did.
fn verdict(a: &Artifact, missing_shards: &[u32], checks: &[CheckOutcome]) -> Verdict {
    if !missing_shards.is_empty() {
        Verdict::Incomplete
    } else if a.interrupted {
        Verdict::Interrupted
    } else if checks.iter().all(|c| c.passed) {
        Verdict::Pass
    } else {
        Verdict::Fail
    }
}

/// Connections, logins and who was online.
fn connections(m: &Metrics, series: &[SecondPoint]) -> Connections {
    let count = |c: Counter| m.count(c);
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    Connections {
        attempts: count(Counter::ConnectAttempts),
        logins_ok: count(Counter::LoginOk),
        login_success: ratio(count(Counter::LoginOk), count(Counter::ConnectAttempts)),
        online_peak: series.iter().map(|s| s.online).max().unwrap_or(0),
        disconnects: count(Counter::Disconnects),
        syncs: count(Counter::Syncs),
        accounts: accounts(m),
        resumes_without_offset: Some(count(Counter::ResumesWithoutOffset)).filter(|&n| n > 0),
        transports: transports(m),
    }
}

/// The transports the run used, with their connections and bytes.
fn transports(m: &Metrics) -> Vec<TransportUse> {
    Wire::ALL
        .iter()
        .map(|w| {
            let [connections, bytes_out, bytes_in] = w.counters().map(|c| m.count(c));
            TransportUse {
                transport: w.name(),
                connections,
                bytes_out,
                bytes_in,
            }
        })
        .filter(|t| t.connections + t.bytes_out + t.bytes_in > 0)
        .collect()
}

/// A histogram's percentiles and curve.
fn latency(x: &Histogram<u64>) -> Latency {
    let q = |p| x.value_at_quantile(p);
    Latency {
        count: x.len(),
        p50: q(0.5),
        p95: q(0.95),
        p99: q(0.99),
        p999: q(0.999),
        max: x.max(),
        mean: x.mean(),
        curve: curve(x),
    }
}

fn generator(s: &crate::artifact::ShardResult) -> Generator {
    let busy_pct = if s.duration_s > 0.0 {
        s.cpu_s / s.duration_s / f64::from(s.cores.max(1)) * 100.0
    } else {
        0.0
    };
    Generator {
        shard: s.clone(),
        busy_pct,
        rss_per_user_bytes: s.peak_rss_bytes as f64 / f64::from(s.users.max(1)),
    }
}

/// Quantile points per halving of the distance to 100% (HdrHistogram's plotter uses 5).
const CURVE_TICKS: u32 = 5;

/// The percentile distribution of `h`: one point per step of the quantile iteration, the
/// highest value last.
fn curve(h: &hdrhistogram::Histogram<u64>) -> Vec<(f64, u64)> {
    let mut points: Vec<(f64, u64)> = Vec::new();
    for v in h.iter_quantiles(CURVE_TICKS) {
        let point = (
            v.quantile_iterated_to(),
            h.highest_equivalent(v.value_iterated_to()),
        );
        if points.last().is_none_or(|last| last.0 < point.0) {
            points.push(point);
        }
    }
    points
}

/// Seconds from the first to the last second in which messages were sent or replies came
/// (at least 1).
fn active_seconds(series: &[SecondPoint]) -> f64 {
    let mut active = series.iter().filter(|s| s.sent > 0 || s.replies > 0);
    match (active.next(), active.next_back()) {
        (Some(first), Some(last)) => f64::from(last.sec - first.sec + 1),
        _ => 1.0,
    }
}

/// The note on `n` reconnects without a point to resume from, when there were any.
fn unresumable(n: u64) -> Option<String> {
    (n > 0).then(|| {
        format!(
            "{} reconnect(s) had no offset to recover the session from (the user had received \
             nothing before it went offline): what those users missed could not be fetched \
             and counts as lost. The app should send each user a first message when it \
             connects, named in `target.socketio.welcome_event` so that a user going \
             offline waits for it (docs/drivers/socketio.md)",
            super::present::thousands(n)
        )
    })
}

/// The account outcomes, when the driver created (or tried to create) any.
fn accounts(m: &crate::metrics::Metrics) -> Option<Accounts> {
    let a = Accounts {
        created: m.count(Counter::AccountsCreated),
        existing: m.count(Counter::AccountsExisting),
        refused: m
            .errors()
            .find(|e| e.0 == ErrorKind::Registration)
            .map_or(0, |e| e.1),
    };
    (a != Accounts::default()).then_some(a)
}
