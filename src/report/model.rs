//! The report model: every number a report shows, computed once from one (possibly merged)
//! artifact. Renderers format it and compute nothing; `report --json` is its serialization.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checks::{self, CheckOutcome};
use super::findings::{self, Finding};
use super::series::{self, SecondPoint};
use super::sweep::Sweep;
use crate::artifact::{Artifact, ScenarioSource};
use crate::ledger::Delivery;
use crate::metrics::{Counter, ErrorKind, Hist};
use crate::monitor::ProcUsage;
use crate::scrape::ScrapedSeries;

/// The report of one run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Pass, fail, incomplete or interrupted.
    pub verdict: Verdict,
    /// Scenario name.
    pub scenario: String,
    /// Run id.
    pub run_id: String,
    /// Target as shown (`embedded ws://…` for the in-process server).
    pub target: String,
    /// Driver name.
    pub driver: String,
    /// Start of the run, RFC 3339 UTC.
    pub started_at: String,
    /// Length of the run, s.
    pub duration_s: f64,
    /// Whether sends had a server acceptance (false: send → ack is not measured).
    pub acceptance: bool,
    /// The scenario's checks, then the built-in checks it did not write, then the
    /// pseudo-checks that failed.
    pub checks: Vec<CheckOutcome>,
    /// Delivery accounting, with examples.
    pub delivery: Delivery,
    /// Connecting and logging in.
    pub connections: Connections,
    /// Message rates over the seconds of traffic.
    pub rates: Rates,
    /// Latency of every histogram with values, µs.
    pub latency_us: BTreeMap<Hist, Latency>,
    /// Every counter's total.
    pub counters: BTreeMap<Counter, u64>,
    /// Errors that occurred, by kind.
    pub errors: BTreeMap<ErrorKind, ErrorCount>,
    /// The table of every request/response pattern of the run, in scenario order.
    pub sweeps: Vec<Sweep>,
    /// The per-second series.
    pub series: Vec<SecondPoint>,
    /// One entry per generator process.
    pub generators: Vec<Generator>,
    /// The generators' clocks, when the shards met over the network (`--start-barrier
    /// tcp://…`): their offsets to shard 0 and the uncertainty of cross-shard latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clocks: Option<super::clocks::Clocks>,
    /// Shards of the run missing from the result (see [`Verdict::Incomplete`]).
    pub missing_shards: Vec<u32>,
    /// CPU and memory of the generator and watched processes over the run.
    pub processes: Vec<ProcUsage>,
    /// What bounded the run.
    pub findings: Vec<Finding>,
    /// Other remarks recorded by the run.
    pub notes: Vec<String>,
    /// The scenario as run, when the result file has it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario_source: Option<ScenarioSource>,
    /// Series scraped from the `[monitor] prometheus` endpoints.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<ScrapedSeries>,
    /// Each `[[chaos]]` step: what it did and what it cost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chaos: Vec<ChaosRow>,
    /// Where a run that is still going is (the `--live` page); `None` in a run's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<super::live::LiveView>,
}

/// One chaos step in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChaosRow {
    /// What it did.
    pub step: crate::chaos::StepRecord,
    /// What it cost.
    pub effect: crate::chaos::effect::Effect,
    /// The messages due in its window.
    pub during: crate::ledger::SpanDelivery,
    /// The messages due after it, until the next step begins or ends (or the traffic does).
    pub after: crate::ledger::SpanDelivery,
}

/// The verdict of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every check passed.
    Pass,
    /// A check failed.
    Fail,
    /// Shards of the run are missing from the result: whatever its checks say, it is not
    /// the run's result (`run.shards` fails).
    Incomplete,
    /// A signal stopped the run.
    Interrupted,
}

/// Connecting and logging in.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connections {
    /// Connection attempts.
    pub attempts: u64,
    /// Successful logins.
    pub logins_ok: u64,
    /// Logins ÷ attempts, when there were attempts.
    pub login_success: Option<f64>,
    /// Most users online in one second.
    pub online_peak: u64,
    /// Connections lost or closed after login.
    pub disconnects: u64,
    /// Sync (catch-up and final verification) requests.
    pub syncs: u64,
    /// Accounts the driver created before logging in, when it tried to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accounts: Option<Accounts>,
    /// Reconnects that had no point to resume the session from (Socket.IO: no offset), so
    /// what the user missed could not be fetched; absent when there were none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumes_without_offset: Option<u64>,
}

/// What creating accounts before the logins found (XMPP `register = true`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Accounts {
    /// Accounts the server created.
    pub created: u64,
    /// Accounts that existed already.
    pub existing: u64,
    /// Attempts the server refused (`registration` errors).
    pub refused: u64,
}

/// Rates over the seconds in which messages or replies went out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rates {
    /// Seconds of traffic, from the first to the last second with a send or a reply (≥ 1).
    pub window_s: f64,
    /// Messages sent per second.
    pub sent_per_s: f64,
    /// Sends accepted per second.
    pub accepted_per_s: f64,
    /// Messages received per second.
    pub received_per_s: f64,
    /// Request replies per second.
    pub replies_per_s: f64,
    /// Refused and failed sends ÷ sends, when there were sends.
    pub send_failure: Option<f64>,
}

impl Rates {
    /// The rates of `m`'s totals over `window_s` seconds of traffic (at least 1).
    pub fn of(m: &crate::metrics::Metrics, window_s: f64) -> Rates {
        let count = |c: Counter| m.count(c);
        let rate = |c: Counter| count(c) as f64 / window_s.max(1.0);
        let (failed, tried) = crate::metrics::send_failures(count);
        Rates {
            window_s,
            sent_per_s: rate(Counter::Sent),
            accepted_per_s: rate(Counter::Accepted),
            received_per_s: rate(Counter::Received),
            replies_per_s: rate(Counter::Replies),
            send_failure: (tried > 0).then(|| failed as f64 / tried as f64),
        }
    }
}

/// Latency of one histogram, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// The percentile distribution, as HdrHistogram's percentile output: (quantile, value µs)
    /// pairs, denser towards the tail, ending at the highest value.
    pub curve: Vec<(f64, u64)>,
}

/// Count and kept examples of one error kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ErrorCount {
    /// How many occurred.
    pub count: u64,
    /// The first distinct examples.
    pub examples: Vec<String>,
}

/// What one generator process did and used: its shard result and what follows from it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Generator {
    /// The shard's own numbers, as in the artifact.
    #[serde(flatten)]
    pub shard: crate::artifact::ShardResult,
    /// CPU used over its run, % of all its cores.
    pub busy_pct: f64,
    /// Peak resident memory per user, bytes.
    pub rss_per_user_bytes: f64,
}

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
        let checks = checks::evaluate(a, &delivery);
        let series = series::of(m);
        let sweeps = Sweep::all(a);
        let missing_shards = a.missing_shards();
        let verdict = if !missing_shards.is_empty() {
            Verdict::Incomplete
        } else if a.interrupted {
            Verdict::Interrupted
        } else if checks.iter().all(|c| c.passed) {
            Verdict::Pass
        } else {
            Verdict::Fail
        };
        let count = |c: Counter| m.count(c);
        let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
        let mut report = Report {
            verdict,
            scenario: a.scenario.clone(),
            run_id: a.run_id.clone(),
            target: a.target.clone(),
            driver: a.driver.clone(),
            started_at: a.started_at.clone(),
            duration_s: a.duration_s,
            acceptance: a.acceptance,
            checks,
            delivery,
            connections: Connections {
                attempts: count(Counter::ConnectAttempts),
                logins_ok: count(Counter::LoginOk),
                login_success: ratio(count(Counter::LoginOk), count(Counter::ConnectAttempts)),
                online_peak: series.iter().map(|s| s.online).max().unwrap_or(0),
                disconnects: count(Counter::Disconnects),
                syncs: count(Counter::Syncs),
                accounts: accounts(m),
                resumes_without_offset: Some(count(Counter::ResumesWithoutOffset))
                    .filter(|&n| n > 0),
            },
            rates: Rates::of(m, active_seconds(&series)),
            latency_us: Hist::ALL
                .iter()
                .filter(|&&h| !m.hist(h).is_empty())
                .map(|&h| {
                    let x = m.hist(h);
                    let q = |p| x.value_at_quantile(p);
                    let latency = Latency {
                        count: x.len(),
                        p50: q(0.5),
                        p95: q(0.95),
                        p99: q(0.99),
                        p999: q(0.999),
                        max: x.max(),
                        mean: x.mean(),
                        curve: curve(x),
                    };
                    (h, latency)
                })
                .collect(),
            counters: Counter::ALL.iter().map(|&c| (c, count(c))).collect(),
            errors: m
                .errors()
                .map(|(kind, count, examples)| {
                    let examples = examples.to_vec();
                    (kind, ErrorCount { count, examples })
                })
                .collect(),
            findings: findings::find(a, &sweeps),
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
            server_metrics: a.server_metrics.clone(),
            chaos: Vec::new(),
            live: None,
        };
        report.chaos = chaos_rows(a, &report.series);
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

    /// True when every check passed, the run was not interrupted and no shard is missing.
    pub fn passed(&self) -> bool {
        self.verdict == Verdict::Pass
    }

    /// Whether the generator did not offer the load the scenario asked (`run.generator`
    /// failed): the run is no verdict on the target.
    pub fn generator_fell_behind(&self) -> bool {
        self.checks
            .iter()
            .any(|c| !c.passed && c.metric == checks::Measure::Run(checks::RunMetric::Generator))
    }

    /// The exit code of this report's verdict: 0 it passed; 4 the generator fell behind
    /// (msgstorm could not do the job: no verdict on the target); 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        if self.passed() {
            crate::error::EXIT_OK
        } else if self.generator_fell_behind() && self.verdict == Verdict::Fail {
            crate::error::EXIT_TOOL_FAILED
        } else {
            crate::error::EXIT_CHECK_FAILED
        }
    }

    /// A counter's total.
    pub fn count(&self, c: Counter) -> u64 {
        self.counters.get(&c).copied().unwrap_or(0)
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

/// Each chaos step of `a` with its effect on `series`.
pub(super) fn chaos_rows(a: &Artifact, series: &[SecondPoint]) -> Vec<ChaosRow> {
    let traffic_s = a.traffic_started_s.unwrap_or(0.0);
    let end_s = a.traffic_ended_s.unwrap_or_else(|| {
        series
            .iter()
            .filter(|p| p.sent > 0)
            .map(|p| f64::from(p.sec) + 1.0)
            .fold(traffic_s, f64::max)
    });
    let spans = step_charged_spans(a);
    a.chaos
        .iter()
        .map(|step| {
            let (during, after) = step_spans(a.ledger.bounds_us(), &spans, step);
            let earlier = a
                .chaos
                .iter()
                .map(crate::chaos::StepRecord::window)
                .filter(|w| w.1 <= step.window().0)
                .map(|w| w.1)
                .fold(0.0, f64::max);
            ChaosRow {
                effect: crate::chaos::effect::of(step, series, (traffic_s, end_s), earlier),
                step: step.clone(),
                during,
                after,
            }
        })
        .collect()
}

/// The ledger's spans of `a`, each loss charged to the step in whose window (or at whose
/// instant) it was last seen safe ([`crate::ledger::Ledger::spans`]).
pub(super) fn step_charged_spans(a: &Artifact) -> Vec<crate::ledger::SpanDelivery> {
    let starts: Vec<u64> = a.chaos.iter().map(|s| us(s.at_s)).collect();
    a.ledger.spans(&starts)
}

/// Seconds as whole µs, as the ledger's bounds are.
fn us(s: f64) -> u64 {
    (s * 1e6).round() as u64
}

/// The deliveries due in `step`'s planned window and in the span after it.
pub(super) fn step_spans(
    bounds: &[u64],
    spans: &[crate::ledger::SpanDelivery],
    step: &crate::chaos::StepRecord,
) -> (crate::ledger::SpanDelivery, crate::ledger::SpanDelivery) {
    use crate::ledger::{Ledger, SpanDelivery};
    if spans.is_empty() {
        return Default::default();
    }
    let first = Ledger::span_of(bounds, us(step.at_s));
    let last = Ledger::span_of(bounds, us(step.at_s + step.duration_s));
    let during = spans[first.min(spans.len())..last.min(spans.len())]
        .iter()
        .fold(SpanDelivery::default(), |a, s| a + *s);
    let after = spans.get(last).copied().unwrap_or_default();
    (during, after)
}
