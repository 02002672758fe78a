//! Validation: the schema as written → checked, resolved numbers (`Checked`), or the first
//! mistake as `FILE:LINE: KEY: what is wrong`. Everything that can be wrong with a scenario
//! is found here, before anything connects; lowering (`lower.rs`) cannot fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::de::DeTable;
use toml::Spanned;

use super::plan::{Bound, Check, CheckMetric, LedgerOpts, MonitorOpts, ReportOpts, Target};
use super::population::{population, Pop};
use super::schema::{ChecksSpec, LedgerSpec, MonitorSpec, PopulationSpec, ReportSpec, Scenario};
use super::source::Source;
use super::target::{check_driver, target, DriverTable};
use super::traffic::{traffic, Pattern};
use super::values::{duration, number, positive, unit, wake_tick, MAX_EXAMPLES};
use crate::vocab::TrafficKind;
use crate::Result;

/// Seed used when the scenario sets none.
pub const DEFAULT_SEED: u64 = 42;

/// A validated scenario: every number checked and resolved, users not yet chosen.
#[derive(Debug)]
pub struct Checked {
    /// Plan name.
    pub name: String,
    /// Seed of every random choice.
    pub seed: u64,
    /// Drain grace period.
    pub drain: Duration,
    /// The generator's wake tick (zero: none).
    pub wake_tick: Duration,
    /// The target.
    pub target: Target,
    /// The population.
    pub population: Pop,
    /// Traffic patterns, with counts still to be resolved into users.
    pub traffic: Vec<Pattern>,
    /// Ledger settings.
    pub ledger: LedgerOpts,
    /// SLO checks.
    pub checks: Vec<Check>,
    /// Output settings.
    pub report: ReportOpts,
    /// Processes to watch.
    pub monitor: MonitorOpts,
    /// The `[find]` table.
    pub find: Option<super::plan::FindOpts>,
    /// What the run cannot verify (see `warnings.rs`).
    pub warnings: Vec<String>,
    /// Fault steps during the load.
    pub chaos: Vec<super::chaos_step::ChaosStep>,
    /// `[signals]`.
    pub signals: Option<super::signals::SignalsPlan>,
}

/// Validates a whole scenario read from `file`; `root` is its spanned tree (after
/// overrides) and `tables` the drivers' own tables taken out of it.
pub fn validate(
    src: &Source<'_>,
    s: &Scenario,
    root: &DeTable<'_>,
    tables: &[DriverTable<'_>],
    file: &Path,
) -> Result<Checked> {
    let name = name(src, s, file)?;
    let seed = match &s.seed {
        Some(v) => u64::try_from(*v.get_ref())
            .map_err(|_| src.at(v, "seed", format!("must be ≥ 0, got {}", v.get_ref())))?,
        None => DEFAULT_SEED,
    };
    let drain = match &s.drain {
        Some(d) => src.value(d, "drain", duration)?,
        None => Duration::from_secs(5),
    };
    let wake_tick = match &s.wake_tick {
        Some(d) => src.value(d, "wake_tick", wake_tick)?,
        None => Duration::ZERO,
    };
    let mut target = target(src, s.target.as_ref(), tables)?;
    let population = population(src, &s.population)?;
    let traffic = traffic(src, &s.traffic, &population, target.driver)?;
    target.kinds = kinds(&traffic);
    check_driver(src, root, &mut target, max_body(&traffic))?;
    missed_messages(src, &s.population, &population, &target)?;
    let warnings = super::warnings::warnings(src, &s.population, &population, &traffic, &target);
    let mut ledger = ledger(src, s.ledger.as_ref())?;
    let monitor = monitor(src, s.monitor.as_ref())?;
    sampled_streams(src, s.ledger.as_ref(), &ledger, &traffic)?;
    let chaos = super::chaos::steps(
        src,
        &s.chaos,
        &super::chaos::Context {
            seed,
            traffic: &traffic,
            target_addr: target.endpoint.as_ref().map(|ep| ep.addr()),
            more_nodes: target.options.contains_key("urls"),
            in_process: target.driver.schemes.is_empty(),
            monitor: &monitor,
        },
    )?;
    ledger.bounds_us = super::chaos::bounds_us(&chaos);
    let senders: Vec<&str> = traffic
        .iter()
        .filter(|p| !matches!(p.kind, TrafficKind::Idle | TrafficKind::Request))
        .map(|p| p.name.as_str())
        .collect();
    let signals = super::signals::signals(
        src,
        s.signals.as_ref(),
        target.driver.name,
        target.signals,
        &senders,
    )?;
    Ok(Checked {
        name,
        seed,
        drain,
        wake_tick,
        target,
        population,
        traffic,
        ledger,
        checks: checks(src, s.checks.as_ref())?,
        report: report(src, s.report.as_ref())?,
        monitor,
        find: super::find::find(src, s.find.as_ref())?,
        warnings,
        chaos,
        signals,
    })
}

/// The traffic kinds of the scenario, each once, in order of first use.
/// The run's name: the scenario's `name`, else the file's stem.
fn name(src: &Source<'_>, s: &Scenario, file: &Path) -> Result<String> {
    match &s.name {
        Some(n) if n.get_ref().trim().is_empty() => Err(src.at(n, "name", "must not be empty")),
        Some(n) => Ok(n.get_ref().clone()),
        None => Ok(file
            .file_stem()
            .map_or("scenario".into(), |f| f.to_string_lossy().into_owned())),
    }
}

fn kinds(traffic: &[Pattern]) -> Vec<&'static str> {
    let mut kinds = Vec::new();
    for p in traffic {
        let first = p.numbers.sends_as().unwrap_or(p.kind);
        for kind in std::iter::once(first).chain(p.numbers.also_sends()) {
            if !kinds.contains(&kind.as_str()) {
                kinds.push(kind.as_str());
            }
        }
    }
    kinds
}

/// The largest body any pattern sends, bytes.
fn max_body(traffic: &[Pattern]) -> usize {
    traffic
        .iter()
        .map(|p| p.numbers.max_body())
        .max()
        .unwrap_or(0)
}

/// Refuses a `ledger.sample` so small that the ledger would track no stream of the plan
/// (fewer than one expected): a run that verifies nothing must not pass.
fn sampled_streams(
    src: &Source<'_>,
    spec: Option<&LedgerSpec>,
    opts: &LedgerOpts,
    traffic: &[Pattern],
) -> Result<()> {
    let Some(s) = spec.and_then(|l| l.sample.as_ref()) else {
        return Ok(());
    };
    let streams: u64 = traffic.iter().map(|p| p.numbers.streams()).sum();
    let expected = opts.sample * streams as f64;
    if streams == 0 || expected >= 1.0 {
        return Ok(());
    }
    Err(src.at(
        s,
        "ledger.sample",
        format!(
            "{} of {streams} streams is less than one stream, so the ledger would verify \
             nothing; set at least {}",
            number(opts.sample),
            number(1.0 / streams as f64)
        ),
    ))
}

/// Refuses late and churning users when the driver cannot fetch what a user missed while
/// offline: those messages would be reported as the server's loss.
fn missed_messages(
    src: &Source<'_>,
    spec: &Spanned<PopulationSpec>,
    pop: &Pop,
    target: &Target,
) -> Result<()> {
    if target.caps.fetch_missed {
        return Ok(());
    }
    let p = spec.get_ref();
    let (key, span) = match (&p.late, &p.churn, &p.sessions) {
        (Some(l), _, _) if pop.late > 0 => ("population.late", l.span()),
        (_, Some(c), _) if pop.churn > 0 => ("population.churn", c.span()),
        (_, _, Some(s)) => ("population.sessions", s.span()),
        _ => return Ok(()),
    };
    let why = if target.driver.caps.fetch_missed {
        "as configured (see its options)"
    } else {
        "at all"
    };
    Err(src.error(
        span,
        key,
        format!(
            "driver `{}` cannot fetch the messages a user missed while offline {why}, so \
             late, churning or returning users' messages would be reported as lost; remove \
             `{key}`",
            target.driver.name
        ),
    ))
}

fn monitor(src: &Source<'_>, spec: Option<&MonitorSpec>) -> Result<MonitorOpts> {
    let Some(m) = spec else {
        return Ok(MonitorOpts::default());
    };
    let mut opts = MonitorOpts::default();
    for (i, p) in m.pids.iter().enumerate() {
        let pid = u32::try_from(*p.get_ref())
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                src.at(
                    p,
                    format!("monitor.pids[{i}]"),
                    format!("must be a process id > 0, got {}", p.get_ref()),
                )
            })?;
        opts.pids.push(pid);
    }
    for (i, n) in m.names.iter().enumerate() {
        let name = n.get_ref().trim();
        if name.is_empty() || name.contains('/') {
            return Err(src.at(
                n,
                format!("monitor.names[{i}]"),
                "must be a process name as in /proc/PID/comm, e.g. \"mosquitto\"",
            ));
        }
        opts.names.push(name.to_owned());
    }
    for (i, u) in m.prometheus.iter().enumerate() {
        let key = format!("monitor.prometheus[{i}]");
        if !cfg!(feature = "prometheus") {
            return Err(src.at(
                u,
                key,
                "this msgstorm was built without scraping (feature `prometheus`)",
            ));
        }
        let url = u.get_ref().trim();
        let ok = url
            .parse::<http::Uri>()
            .is_ok_and(|uri| uri.scheme_str() == Some("http") && uri.host().is_some());
        if !ok {
            return Err(src.at(
                u,
                key,
                format!(
                    "`{url}` is not an http:// URL of a metrics page, e.g. \"http://127.0.0.1:9100/metrics\""
                ),
            ));
        }
        opts.prometheus.push(url.to_owned());
    }
    for (i, f) in m.series.iter().enumerate() {
        let filter = crate::scrape::SeriesFilter::parse(f.get_ref())
            .map_err(|why| src.at(f, format!("monitor.series[{i}]"), why))?;
        opts.series.push(filter);
    }
    Ok(opts)
}

fn ledger(src: &Source<'_>, spec: Option<&LedgerSpec>) -> Result<LedgerOpts> {
    let mut opts = LedgerOpts {
        sample: 1.0,
        late_after: Duration::from_secs(5),
        examples: 10,
        verify_sync: true,
        bounds_us: Vec::new(),
        wave_us: Vec::new(),
    };
    let Some(l) = spec else { return Ok(opts) };
    if let Some(s) = &l.sample {
        let v = src.value(s, "ledger.sample", unit)?;
        if v == 0.0 {
            return Err(src.at(
                s,
                "ledger.sample",
                "must be > 0 (1.0 tracks every stream), got 0",
            ));
        }
        opts.sample = v;
    }
    if let Some(d) = &l.late_after {
        opts.late_after = src.value(d, "ledger.late_after", positive)?;
    }
    if let Some(e) = &l.examples {
        opts.examples = usize::try_from(*e.get_ref())
            .ok()
            .filter(|&n| n <= MAX_EXAMPLES)
            .ok_or_else(|| {
                src.at(
                    e,
                    "ledger.examples",
                    format!("must be in 0..={MAX_EXAMPLES}, got {}", e.get_ref()),
                )
            })?;
    }
    if let Some(v) = &l.verify_sync {
        opts.verify_sync = *v.get_ref();
    }
    Ok(opts)
}

/// `[report]`: the results folder and the live metrics endpoint.
fn report(src: &Source<'_>, spec: Option<&ReportSpec>) -> Result<ReportOpts> {
    let mut opts = ReportOpts::default();
    let Some(r) = spec else { return Ok(opts) };
    if let Some(o) = &r.out {
        if o.get_ref().is_empty() {
            return Err(src.at(o, "report.out", "must name a folder"));
        }
        opts.out = Some(PathBuf::from(o.get_ref()));
    }
    if let Some(a) = &r.metrics_listen {
        let addr = a.get_ref().parse().map_err(|_| {
            src.at(
                a,
                "report.metrics_listen",
                format!("`{}` is not an address such as 127.0.0.1:9464", a.get_ref()),
            )
        })?;
        opts.metrics_listen = Some(addr);
    }
    if let Some(u) = &r.metrics_push {
        let uri = push_url(u.get_ref()).map_err(|why| {
            src.at(
                u,
                "report.metrics_push",
                format!("`{}`: {why}", u.get_ref()),
            )
        })?;
        opts.metrics_push = Some(uri);
    }
    Ok(opts)
}

/// A remote-write URL: `http://HOST[:PORT]/PATH` (plain HTTP: a receiver beside the run or
/// a local agent; TLS is not taken).
pub fn push_url(s: &str) -> std::result::Result<http::Uri, String> {
    let uri: http::Uri = s.parse().map_err(|e| format!("not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err("expected http://HOST[:PORT]/PATH (Prometheus: /api/v1/write)".to_owned());
    }
    Ok(uri)
}

fn checks(src: &Source<'_>, spec: Option<&ChecksSpec>) -> Result<Vec<Check>> {
    let Some(c) = spec else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    let mut push = |key: &str, metric, bound| {
        out.push(Check {
            key: format!("checks.{key}"),
            metric,
            bound,
        })
    };
    let counts = [
        ("max_lost", &c.max_lost, CheckMetric::Lost),
        ("max_duplicated", &c.max_duplicated, CheckMetric::Duplicated),
        ("max_reordered", &c.max_reordered, CheckMetric::Reordered),
        ("max_corrupted", &c.max_corrupted, CheckMetric::Corrupted),
        ("max_late", &c.max_late, CheckMetric::Late),
        (
            "max_protocol_errors",
            &c.max_protocol_errors,
            CheckMetric::ProtocolErrors,
        ),
        ("max_foreign", &c.max_foreign, CheckMetric::Foreign),
        (
            "max_join_failures",
            &c.max_join_failures,
            CheckMetric::JoinFailures,
        ),
        (
            "max_script_errors",
            &c.max_script_errors,
            CheckMetric::ScriptErrors,
        ),
        (
            "max_receipts_lost",
            &c.max_receipts_lost,
            CheckMetric::ReceiptsLost,
        ),
        (
            "max_receipts_duplicated",
            &c.max_receipts_duplicated,
            CheckMetric::ReceiptsDuplicated,
        ),
        (
            "max_typing_missed",
            &c.max_typing_missed,
            CheckMetric::TypingMissed,
        ),
        (
            "max_presence_missed",
            &c.max_presence_missed,
            CheckMetric::PresenceMissed,
        ),
    ];
    for (key, v, metric) in counts {
        if let Some(v) = v {
            if *v.get_ref() < 0 {
                return Err(src.at(
                    v,
                    format!("checks.{key}"),
                    format!("must be ≥ 0, got {}", v.get_ref()),
                ));
            }
            push(key, metric, Bound::AtMost(*v.get_ref() as f64));
        }
    }
    let latencies = [
        ("e2e_p99", &c.e2e_p99, CheckMetric::E2eP99),
        ("ack_p99", &c.ack_p99, CheckMetric::AckP99),
        ("request_p99", &c.request_p99, CheckMetric::RequestP99),
        ("max_recovery", &c.max_recovery, CheckMetric::Recovery),
        ("receipt_p99", &c.receipt_p99, CheckMetric::ReceiptP99),
        ("typing_p99", &c.typing_p99, CheckMetric::TypingP99),
        ("presence_p99", &c.presence_p99, CheckMetric::PresenceP99),
        ("max_send_lag", &c.max_send_lag, CheckMetric::SendLag),
    ];
    for (key, v, metric) in latencies {
        if let Some(v) = v {
            let d = src.value(v, format!("checks.{key}"), positive)?;
            push(key, metric, Bound::AtMost(d.as_secs_f64() * 1e6));
        }
    }
    if let Some(v) = &c.min_login_success {
        push(
            "min_login_success",
            CheckMetric::LoginSuccess,
            Bound::AtLeast(src.value(v, "checks.min_login_success", unit)?),
        );
    }
    let fractions = [
        (
            "max_send_error_rate",
            &c.max_send_error_rate,
            CheckMetric::SendErrorRate,
        ),
        (
            "max_repaired_rate",
            &c.max_repaired_rate,
            CheckMetric::RepairedRate,
        ),
    ];
    for (key, v, metric) in fractions {
        if let Some(v) = v {
            push(
                key,
                metric,
                Bound::AtMost(src.value(v, format!("checks.{key}"), unit)?),
            );
        }
    }
    let shares = [
        ("min_verified", &c.min_verified, CheckMetric::Verified),
        ("min_online", &c.min_online, CheckMetric::Online),
        ("min_offered", &c.min_offered, CheckMetric::Offered),
    ];
    for (key, v, metric) in shares {
        if let Some(v) = v {
            push(
                key,
                metric,
                Bound::AtLeast(src.value(v, format!("checks.{key}"), unit)?),
            );
        }
    }
    Ok(out)
}
