//! One step of a search: its verdict and its row, computed from the step's artifact.
//!
//! **Warm-up.** A step's rates, latencies and resource use are taken over its *steady
//! window*: the whole seconds from `warmup` after traffic started to the last second in
//! which anything was sent, that last (partial) second excluded. The latency checks
//! (`e2e_p99`, `ack_p99`, `request_p99`) are judged on that window too; the delivery checks
//! (lost, duplicated, …) on the whole step, since a message lost during warm-up is lost.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::artifact::{Artifact, CheckMetric};
use crate::metrics::{Counter, Hist};
use crate::report::checks::{CheckOutcome, Measure, Unit};
use crate::report::findings::Finding;
use crate::report::Report;

/// One step: the value tried, whether it passed, and its numbers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// The value of the varied key.
    pub value: f64,
    /// True when every check passed.
    pub passed: bool,
    /// The failed checks, each as `key: measured vs bound`.
    pub failed: Vec<String>,
    /// Why the generator was the limit in this step (send lag, its CPU), if it was.
    pub generator_limit: Option<String>,
    /// The step's numbers over its steady window.
    pub row: StepRow,
    /// The step's `result.json`, relative to the folder of `find.json`.
    pub result: String,
}

/// A step's numbers over its steady window (see the module documentation).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StepRow {
    /// Seconds of the run the window covers: `[from, to)`.
    pub window: (u32, u32),
    /// Messages sent plus requests made per second.
    pub offered_per_s: f64,
    /// Messages received plus replies per second (a group message counts once per member
    /// that received it).
    pub achieved_per_s: f64,
    /// End-to-end latency p50, µs.
    pub e2e_p50_us: Option<u64>,
    /// End-to-end latency p99, µs.
    pub e2e_p99_us: Option<u64>,
    /// Send → acceptance p99, µs.
    pub ack_p99_us: Option<u64>,
    /// Request round trip p99, µs.
    pub request_p99_us: Option<u64>,
    /// Messages never delivered, over the whole step (steps that share one run: the run's,
    /// which cannot be dated to a step).
    pub lost: u64,
    /// Errors of every kind, over the whole step.
    pub errors: u64,
    /// The generator's mean CPU over the window, % of one core.
    pub generator_cpu_pct: Option<f64>,
    /// The generator's highest resident memory in the window, bytes.
    pub generator_rss_bytes: Option<u64>,
    /// The watched target processes' mean CPU over the window, summed, % of one core.
    pub target_cpu_pct: Option<f64>,
    /// The watched target processes' highest resident memory in the window, summed, bytes.
    pub target_rss_bytes: Option<u64>,
    /// Connection attempts over the step (logins and reconnects).
    #[serde(default)]
    pub connect_attempts: u64,
    /// Successful logins over the step.
    #[serde(default)]
    pub logins_ok: u64,
    /// Errors by kind (`connect`, `timeout`, …) over the step, when the step had its run to
    /// itself (a step sharing a run with others counts only their sum, in `errors`).
    #[serde(default)]
    pub errors_by_kind: BTreeMap<String, u64>,
}

/// The step at `value` whose run left `a` (written to `result`), with `warmup_s` seconds
/// of traffic left out of its numbers.
pub fn of(value: f64, a: &Artifact, warmup_s: f64, result: String) -> Step {
    let (lo, hi) = steady_window(a, warmup_s);
    let span = Span {
        from: 0,
        window: (lo, hi),
        whole_run: true,
    };
    measure(value, a, &span, result)
}

/// The part of a run one step covers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// The first second of the step (its logins start there): its logins, login success,
    /// errors and send errors are counted from here to the end of `window`.
    pub from: u32,
    /// The steady window `[from, to)`: rates, latencies, CPU and memory.
    pub window: (u32, u32),
    /// The step has the run to itself: logins, errors and send errors are the run's.
    /// (Delivery counts — lost, duplicated, reordered, corrupted, late — are always the
    /// run's: they cannot be dated to a step of a shared run.)
    pub whole_run: bool,
}

/// The step at `value` that covers `span` of the run that left `a`.
pub fn measure(value: f64, a: &Artifact, span: &Span, result: String) -> Step {
    let report = Report::new(a);
    let window = span.window;
    let (lo, hi) = window;
    let secs = f64::from(hi - lo).max(1.0);
    let mut offered = 0;
    let mut achieved = 0;
    let mut errors = 0;
    let mut counted = [0u64; 8];
    let counters = [
        Counter::ConnectAttempts,
        Counter::LoginOk,
        Counter::Sent,
        Counter::SendErrors,
        Counter::Refused,
        Counter::Unconfirmed,
        Counter::OnlineUserMs,
        Counter::PlannedUserMs,
    ];
    for s in a.metrics.seconds() {
        let inside = span.whole_run || (span.from..hi).contains(&s.sec);
        if inside {
            errors += s.errors;
            for (n, c) in counted.iter_mut().zip(counters) {
                *n += s.count(c);
            }
        }
        if (lo..hi).contains(&s.sec) {
            offered += s.count(Counter::Sent) + s.count(Counter::Requests);
            achieved += s.count(Counter::Received) + s.count(Counter::Replies);
        }
    }
    let [attempts, logins_ok, sent, send_errors, refused, unconfirmed, online_ms, planned_ms] =
        counted;
    let ratio = |num: u64, den: u64| (den > 0).then(|| num as f64 / den as f64);
    let win = |h| a.metrics.window(h, lo..hi);
    let e2e = win(Hist::EndToEnd);
    let ack = win(Hist::SendAck).filter(|_| a.acceptance);
    let request = win(Hist::Request);
    let mut checks = report.checks.clone();
    for c in &mut checks {
        let windowed = match c.metric {
            Measure::Check(CheckMetric::E2eP99) => e2e.as_ref().map(|w| w.p99 as f64),
            Measure::Check(CheckMetric::AckP99) => ack.as_ref().map(|w| w.p99 as f64),
            Measure::Check(CheckMetric::RequestP99) => request.as_ref().map(|w| w.p99 as f64),
            Measure::Check(CheckMetric::LoginSuccess) if !span.whole_run => {
                ratio(logins_ok, attempts)
            }
            // The users held online during the step, of those the plan had online then.
            Measure::Check(CheckMetric::Online) if !span.whole_run => ratio(online_ms, planned_ms),
            Measure::Check(CheckMetric::SendErrorRate) if !span.whole_run => {
                let (failed, tried) = crate::metrics::send_failures(|c| match c {
                    Counter::Sent => sent,
                    Counter::SendErrors => send_errors,
                    Counter::Refused => refused,
                    Counter::Unconfirmed => unconfirmed,
                    _ => 0,
                });
                ratio(failed, tried)
            }
            // A delivery count (lost, duplicated, …) is the whole run's and cannot be dated to
            // a step: a run that lost nothing lost nothing in any of its steps, and when the run
            // failed, none of its steps passes on that check (never a pass the run does not
            // prove). Its value is the run's.
            _ => continue,
        };
        if let Some(v) = windowed {
            c.value = Some(v);
            c.not_measured = None;
            c.passed = c.op.holds(v, c.bound);
        }
    }
    let (gen_cpu, gen_rss) = usage(a, lo..hi, true);
    let (target_cpu, target_rss) = usage(a, lo..hi, false);
    let errors_by_kind = if span.whole_run {
        a.metrics
            .errors()
            .map(|(k, n, _)| (k.name().to_owned(), n))
            .collect()
    } else {
        BTreeMap::new()
    };
    Step {
        value,
        passed: checks.iter().all(|c| c.passed),
        failed: checks.iter().filter(|c| !c.passed).map(describe).collect(),
        // A step whose generator fell behind (`run.generator`) is no capacity of the target.
        generator_limit: generator_limit(&report.findings).or_else(|| {
            report
                .generator_fell_behind()
                .then(|| "it did not offer the asked load (run.generator)".to_owned())
        }),
        row: StepRow {
            window,
            offered_per_s: offered as f64 / secs,
            achieved_per_s: achieved as f64 / secs,
            e2e_p50_us: e2e.as_ref().map(|w| w.p50),
            e2e_p99_us: e2e.as_ref().map(|w| w.p99),
            ack_p99_us: ack.as_ref().map(|w| w.p99),
            request_p99_us: request.as_ref().map(|w| w.p99),
            lost: report.delivery.lost,
            errors,
            generator_cpu_pct: gen_cpu,
            generator_rss_bytes: gen_rss,
            target_cpu_pct: target_cpu,
            target_rss_bytes: target_rss,
            connect_attempts: attempts,
            logins_ok,
            errors_by_kind,
        },
        result,
    }
}

/// The steady window of `a`: whole seconds from `warmup_s` after traffic started to the
/// last second with a send or request, that one excluded. A step too short for that keeps
/// all its active seconds.
fn steady_window(a: &Artifact, warmup_s: f64) -> (u32, u32) {
    let mut active = a
        .metrics
        .seconds()
        .filter(|s| s.count(Counter::Sent) + s.count(Counter::Requests) > 0)
        .map(|s| s.sec);
    let Some(first) = active.next() else {
        return (0, 0);
    };
    let last = active.next_back().unwrap_or(first);
    let settled = a
        .traffic_started_s
        .map_or(0.0, |t| (t + warmup_s).ceil())
        .max(0.0) as u32;
    let lo = first.max(settled);
    if lo < last {
        (lo, last)
    } else {
        (first, last + 1)
    }
}

/// Mean CPU (% of one core) and highest RSS over the seconds `secs` of the generator's
/// process (`generator`) or of the watched target processes, summed over the processes.
fn usage(a: &Artifact, secs: std::ops::Range<u32>, generator: bool) -> (Option<f64>, Option<u64>) {
    let mut cpu = None;
    let mut rss = None;
    let procs = if generator {
        a.processes.iter().filter(|p| p.generator).collect()
    } else {
        crate::monitor::targets(&a.processes)
    };
    for p in procs {
        let inside: Vec<_> = p.series.iter().filter(|s| secs.contains(&s.0)).collect();
        if inside.is_empty() {
            continue;
        }
        let mean = inside.iter().map(|s| f64::from(s.1)).sum::<f64>() / inside.len() as f64;
        let peak = inside.iter().map(|s| s.2).max().unwrap_or(0);
        cpu = Some(cpu.unwrap_or(0.0) + mean);
        rss = Some(rss.unwrap_or(0) + peak);
    }
    (cpu, rss)
}

/// Why the generator was the limit, from the report's findings.
fn generator_limit(findings: &[Finding]) -> Option<String> {
    findings.iter().find_map(|f| match f {
        Finding::SendLag { p99_us } => Some(format!(
            "it sent late: send lag p99 {:.1} ms",
            *p99_us as f64 / 1000.0
        )),
        Finding::Saturated {
            generator: true,
            embedded_server,
            cores,
            cpu_pct,
            ..
        } => Some(format!(
            "its process used {cpu_pct:.0}% of one core on a {cores}-core host{}",
            if *embedded_server {
                ", the embedded server included"
            } else {
                ""
            }
        )),
        _ => None,
    })
}

/// A failed check as `key: measured vs bound`.
fn describe(c: &CheckOutcome) -> String {
    let show = |v: f64| match c.unit {
        Unit::Micros => format!("{:.1} ms", v / 1000.0),
        Unit::Ratio => format!("{:.2}%", v * 100.0),
        Unit::Count => super::num(v),
    };
    let measured = c.value.map_or_else(|| "not measured".to_owned(), show);
    let wrong = match c.op {
        crate::artifact::Op::AtMost => ">",
        crate::artifact::Op::AtLeast => "<",
    };
    match c.value {
        Some(_) => format!("{} failed: {measured} {wrong} {}", c.key, show(c.bound)),
        None => format!("{} failed: {measured}", c.key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step that shares its run with others (users added rung by rung) carries the run's
    /// delivery verdict: when the run lost a message, the step does not pass on `max_lost`
    /// even though the loss cannot be dated to it, and its row shows the run's count.
    #[test]
    fn a_shared_runs_loss_fails_every_one_of_its_steps() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("src/report/testdata/result.json");
        let mut a = Artifact::read(&path).expect("the fixture reads");
        let lower = Span {
            from: 0,
            window: (0, 5),
            whole_run: false,
        };
        let clean = measure(12.0, &a, &lower, String::new());
        assert!(
            !clean
                .failed
                .iter()
                .any(|f| f.starts_with("checks.max_lost")),
            "{:?}",
            clean.failed
        );
        a.ledger.expect(999_999, 1);
        a.ledger.sent(999_999, 0);
        let lossy = measure(12.0, &a, &lower, String::new());
        assert!(!lossy.passed);
        assert!(
            lossy
                .failed
                .iter()
                .any(|f| f.starts_with("checks.max_lost")),
            "{:?}",
            lossy.failed
        );
        assert_eq!(lossy.row.lost, a.ledger.summary().lost);
        assert!(lossy.row.lost >= 1);
    }
}
