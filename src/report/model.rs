//! The report model: every number a report shows, computed once from one (possibly merged)
//! artifact (by [`super::build`], which adds each failed check's reason). Renderers format
//! it and compute nothing; `report --json` is its serialization.

use std::collections::BTreeMap;

use serde::Serialize;

use super::checks::{self, CheckOutcome};
use super::findings::Finding;
use super::series::SecondPoint;
use super::sweep::Sweep;
use crate::artifact::ScenarioSource;
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
    /// The shape the plan's population offered (sessions, contacts, groups), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub population: Option<crate::vocab::Offered>,
    /// What happened to each kind of signal the scenario asked for (read receipts, typing,
    /// presence), in report order; empty without signals.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<crate::ledger::signals::SignalRow>,
    /// Latency and delivery by group-size band, session phase and return (empty when the
    /// run had none of them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<super::split::SplitRow>,
    /// Series scraped from the `[monitor] prometheus` endpoints.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<ScrapedSeries>,
    /// Each `[[chaos]]` step: what it did and what it cost.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub chaos: Vec<ChaosRow>,
    /// Where a run that is still going is (the `--live` page); `None` in a run's report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub live: Option<LiveView>,
}

pub use super::effect::ChaosRow;

/// Where a running run is, and which of its checks only its end can judge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveView {
    /// `starting`, `login`, `traffic`, `drain`, `closing` or `abort`.
    pub phase: String,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Deliveries due for what was accepted and not yet seen: in flight, late or lost
    /// (which of them are lost only the end can tell).
    pub overdue: u64,
    /// The keys of the checks only the end of the run can judge, in report order.
    pub pending: Vec<String>,
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
    /// Per transport the run used (WebSocket, framed TCP, HTTP/1.1, HTTP/2), in that
    /// order: connections opened and bytes on the wire; a transport it did not use is
    /// absent.
    pub transports: Vec<TransportUse>,
}

/// What one transport carried in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TransportUse {
    /// `ws`, `tcp`, `http1` or `http2`.
    pub transport: &'static str,
    /// Connections opened.
    pub connections: u64,
    /// Bytes written, on the wire (below TLS).
    pub bytes_out: u64,
    /// Bytes read, on the wire.
    pub bytes_in: u64,
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
