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

use serde::Serialize;

use super::checks::Unit;
use super::model::Report;
use super::present::show;
use crate::artifact::Op;
use crate::metrics::{Counter, Hist};

/// Latency changes below this many µs are within noise whatever their relative size.
pub const LATENCY_FLOOR_US: f64 = 100.0;

/// Which direction of a metric is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latency, losses, errors, resource use).
    Lower,
    /// Higher is better (throughput, logins).
    Higher,
}

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

/// Short gate names of the histograms.
pub fn hist_key(h: Hist) -> &'static str {
    match h {
        Hist::Connect => "connect",
        Hist::Login => "login",
        Hist::SendAck => "ack",
        Hist::EndToEnd => "e2e",
        Hist::Fanout => "fanout",
        Hist::SendLag => "send_lag",
        Hist::Request => "request",
    }
}

impl Comparison {
    /// Compares `new` against `base`.
    pub fn new(base: Report, new: Report) -> Comparison {
        let mut rows = Vec::new();
        let mut add = |key: String,
                       label: String,
                       kind: Kind,
                       better: Better,
                       f: &dyn Fn(&Report) -> Option<f64>| {
            let (b, n) = (f(&base), f(&new));
            rows.push(Row {
                change: verdict(kind, better, b, n),
                key,
                label,
                kind,
                better,
                base: b,
                new: n,
            });
        };
        use Better::{Higher, Lower};
        let s = |x: &str| x.to_owned();
        add(s("logins"), s("logins ok"), Kind::Volume, Higher, &|r| {
            Some(r.count(Counter::LoginOk) as f64)
        });
        add(
            s("login_success"),
            s("login success"),
            Kind::Ratio,
            Higher,
            &|r| r.connections.login_success,
        );
        add(
            s("online_peak"),
            s("online peak (users)"),
            Kind::Volume,
            Higher,
            &|r| Some(r.connections.online_peak as f64),
        );
        add(
            s("sent_per_s"),
            s("sent per second"),
            Kind::Rate,
            Higher,
            &|r| Some(r.rates.sent_per_s),
        );
        add(
            s("received_per_s"),
            s("received per second"),
            Kind::Rate,
            Higher,
            &|r| Some(r.rates.received_per_s),
        );
        add(
            s("replies_per_s"),
            s("request replies per second"),
            Kind::Rate,
            Higher,
            &|r| (r.count(Counter::Requests) > 0).then_some(r.rates.replies_per_s),
        );
        add(
            s("send_failure"),
            s("failed sends ÷ sends"),
            Kind::Ratio,
            Lower,
            &|r| r.rates.send_failure,
        );
        for h in Hist::ALL {
            let key = hist_key(h);
            let label = super::present::hist_label(h);
            type Pick = fn(&super::model::Latency) -> f64;
            let parts: [(&str, Kind, Pick); 6] = [
                ("p50", Kind::Latency, |l| l.p50 as f64),
                ("p95", Kind::Latency, |l| l.p95 as f64),
                ("p99", Kind::Tail, |l| l.p99 as f64),
                ("p999", Kind::Tail, |l| l.p999 as f64),
                ("max", Kind::Max, |l| l.max as f64),
                ("mean", Kind::Latency, |l| l.mean),
            ];
            if !base.latency_us.contains_key(&h) && !new.latency_us.contains_key(&h) {
                continue;
            }
            for (part, kind, pick) in parts {
                add(
                    format!("{key}_{part}"),
                    format!("{label} {}", if part == "p999" { "p99.9" } else { part }),
                    kind,
                    Lower,
                    &|r| r.latency_us.get(&h).map(pick),
                );
            }
        }
        type Outcome = fn(&crate::ledger::Delivery) -> u64;
        let outcomes: [(&str, Kind, Better, Outcome); 8] = [
            ("delivered", Kind::Volume, Higher, |d| d.delivered),
            ("lost", Kind::Problem, Lower, |d| d.lost),
            ("duplicated", Kind::Problem, Lower, |d| d.duplicated),
            ("reordered", Kind::Problem, Lower, |d| d.reordered),
            ("corrupted", Kind::Problem, Lower, |d| d.corrupted),
            ("late", Kind::Problem, Lower, |d| d.late),
            ("damaged", Kind::Problem, Lower, |d| d.damaged),
            ("unexpected", Kind::Problem, Lower, |d| d.unexpected),
        ];
        for (key, kind, better, pick) in outcomes {
            add(s(key), format!("delivery: {key}"), kind, better, &|r| {
                Some(pick(&r.delivery) as f64)
            });
        }
        // Each chaos step of either run, by its key: what it cost, side by side.
        let mut steps: Vec<&str> = base
            .chaos
            .iter()
            .chain(&new.chaos)
            .map(|c| c.step.key.as_str())
            .collect();
        steps.sort_unstable();
        steps.dedup();
        type StepPick = fn(&super::effect::ChaosRow) -> Option<f64>;
        let parts: [(&str, &str, Kind, Better, StepPick); 5] = [
            ("e2e_p99", "e2e p99 during it", Kind::Tail, Lower, |c| {
                Some(c.effect.during.e2e_p99_us as f64)
            }),
            (
                "received_per_s",
                "received per second during it",
                Kind::Rate,
                Higher,
                |c| Some(c.effect.during.received_per_s),
            ),
            (
                "lost",
                "lost of the messages due during and after it",
                Kind::Problem,
                Lower,
                |c| Some((c.during.lost + c.after.lost) as f64),
            ),
            (
                "duplicated",
                "duplicated of those",
                Kind::Problem,
                Lower,
                |c| Some((c.during.duplicated + c.after.duplicated) as f64),
            ),
            (
                "recovery",
                "time to recover (µs; none: not recovered)",
                Kind::Tail,
                Lower,
                |c| c.effect.recovery_s.map(|s| s * 1e6),
            ),
        ];
        for step in steps {
            for (part, what, kind, better, pick) in parts {
                add(
                    format!("{step}.{part}"),
                    format!("{step}: {what}"),
                    kind,
                    better,
                    &|r| r.chaos.iter().find(|c| c.step.key == step).and_then(pick),
                );
            }
        }
        // Every check of either run, built-in or written, by its key (`checks.min_verified`).
        let mut keys: Vec<&str> = base
            .checks
            .iter()
            .chain(&new.checks)
            .map(|c| c.key.as_str())
            .collect();
        keys.sort_unstable();
        keys.dedup();
        for key in keys {
            let Some(c) = base.checks.iter().chain(&new.checks).find(|c| c.key == key) else {
                continue;
            };
            let kind = match c.unit {
                Unit::Count => Kind::Problem,
                Unit::Ratio => Kind::Ratio,
                Unit::Micros => Kind::Tail,
            };
            let better = match c.op {
                Op::AtMost => Lower,
                Op::AtLeast => Higher,
            };
            add(
                key.to_owned(),
                format!("check {key} ({} {})", c.op.symbol(), show(c.unit, c.bound)),
                kind,
                better,
                &|r| r.checks.iter().find(|c| c.key == key).and_then(|c| c.value),
            );
        }
        add(
            s("errors"),
            s("errors (all kinds)"),
            Kind::Problem,
            Lower,
            &|r| Some(r.errors.values().map(|e| e.count).sum::<u64>() as f64),
        );
        let mut kinds: Vec<_> = base.errors.keys().chain(new.errors.keys()).collect();
        kinds.sort();
        kinds.dedup();
        for kind in kinds {
            add(
                format!("errors.{}", kind.name()),
                format!("errors: {}", kind.name()),
                Kind::Problem,
                Lower,
                &|r| Some(r.errors.get(kind).map_or(0, |e| e.count) as f64),
            );
        }
        add(
            s("generator_cpu_s"),
            s("generator CPU time (all shards), s"),
            Kind::CpuSeconds,
            Lower,
            &|r| Some(r.generators.iter().map(|g| g.shard.cpu_s).sum()),
        );
        add(
            s("generator_rss_bytes"),
            s("generator peak memory (all shards)"),
            Kind::Bytes,
            Lower,
            &|r| {
                Some(
                    r.generators
                        .iter()
                        .map(|g| g.shard.peak_rss_bytes as f64)
                        .sum(),
                )
            },
        );
        // Monitored target processes, matched by name (pids differ between runs).
        let mut names: Vec<&str> = base
            .processes
            .iter()
            .chain(&new.processes)
            .filter(|p| !p.generator)
            .map(|p| p.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            let of = |r: &Report, f: &dyn Fn(&crate::monitor::ProcUsage) -> f64| {
                let mut m = r
                    .processes
                    .iter()
                    .filter(|p| !p.generator && p.name == name);
                m.next().map(|first| m.fold(f(first), |acc, p| acc + f(p)))
            };
            add(
                format!("{name}.cpu_avg"),
                format!("{name}: CPU mean, % of a core"),
                Kind::Cpu,
                Lower,
                &|r| of(r, &|p| p.cpu_avg_pct),
            );
            add(
                format!("{name}.cpu_peak"),
                format!("{name}: CPU peak, % of a core"),
                Kind::Cpu,
                Lower,
                &|r| of(r, &|p| p.cpu_peak_pct),
            );
            add(
                format!("{name}.rss_peak"),
                format!("{name}: peak memory"),
                Kind::Bytes,
                Lower,
                &|r| of(r, &|p| p.rss_peak_bytes as f64),
            );
        }
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
