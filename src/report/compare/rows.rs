//! The rows of a comparison, one named step a group of metrics: the headline counts and
//! rates, each histogram's percentiles (keys and labels from the metric catalog), delivery
//! outcomes, chaos steps, checks, errors, and the generator's and targets' resources.

use super::{verdict, Better, Kind, Row};
use crate::artifact::Op;
use crate::ledger::Delivery;
use crate::metrics::{Counter, Hist};
use crate::monitor::ProcUsage;
use crate::report::checks::{Measure, Unit};
use crate::report::effect::ChaosRow;
use crate::report::model::{Latency, Report};
use crate::report::present::show;
use crate::report::split::SplitRow;
use crate::vocab::Offered;
use Better::{Higher, Lower};

/// Every row of `base` against `new`, in report order.
pub(super) fn all(base: &Report, new: &Report) -> Vec<Row> {
    let mut rows = Rows {
        base,
        new,
        rows: Vec::new(),
    };
    rows.headline();
    rows.population();
    rows.latencies();
    rows.split();
    rows.delivery();
    rows.chaos_steps();
    rows.checks();
    rows.errors();
    rows.generator();
    rows.processes();
    rows.rows
}

/// The rows so far, each metric measured on both runs as it is added.
struct Rows<'r> {
    base: &'r Report,
    new: &'r Report,
    rows: Vec<Row>,
}

/// The row of `part` in `r`'s split.
fn split_row<'a>(r: &'a Report, part: &str) -> Option<&'a SplitRow> {
    r.split.iter().find(|s| s.part == part)
}

/// The keys `of` either run names, sorted, each once.
fn union<'r, K: Ord + ?Sized + 'r, I: Iterator<Item = &'r K>>(
    base: &'r Report,
    new: &'r Report,
    of: impl Fn(&'r Report) -> I,
) -> Vec<&'r K> {
    let mut keys: Vec<&K> = of(base).chain(of(new)).collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

impl<'r> Rows<'r> {
    fn add(
        &mut self,
        key: impl Into<String>,
        label: impl Into<String>,
        kind: Kind,
        better: Better,
        f: &dyn Fn(&Report) -> Option<f64>,
    ) {
        let (b, n) = (f(self.base), f(self.new));
        self.rows.push(Row {
            change: verdict(kind, better, b, n),
            key: key.into(),
            label: label.into(),
            kind,
            better,
            base: b,
            new: n,
        });
    }

    /// Logins, who was online, and the rates.
    fn headline(&mut self) {
        self.add("logins", "logins ok", Kind::Volume, Higher, &|r| {
            Some(r.count(Counter::LoginOk) as f64)
        });
        self.add(
            "login_success",
            "login success",
            Kind::Ratio,
            Higher,
            &|r| r.connections.login_success,
        );
        self.add(
            "online_peak",
            "online peak (users)",
            Kind::Volume,
            Higher,
            &|r| Some(r.connections.online_peak as f64),
        );
        self.add("sent_per_s", "sent per second", Kind::Rate, Higher, &|r| {
            Some(r.rates.sent_per_s)
        });
        self.add(
            "received_per_s",
            "received per second",
            Kind::Rate,
            Higher,
            &|r| Some(r.rates.received_per_s),
        );
        self.add(
            "replies_per_s",
            "request replies per second",
            Kind::Rate,
            Higher,
            &|r| (r.count(Counter::Requests) > 0).then_some(r.rates.replies_per_s),
        );
        self.add(
            "send_failure",
            "failed sends ÷ sends",
            Kind::Ratio,
            Lower,
            &|r| r.rates.send_failure,
        );
    }

    /// Each histogram either run measured: `<short>_<part>` by the catalog's short name.
    fn latencies(&mut self) {
        type Pick = fn(&Latency) -> f64;
        let parts: [(&str, &str, Kind, Pick); 6] = [
            ("p50", "p50", Kind::Latency, |l| l.p50 as f64),
            ("p95", "p95", Kind::Latency, |l| l.p95 as f64),
            ("p99", "p99", Kind::Tail, |l| l.p99 as f64),
            ("p999", "p99.9", Kind::Tail, |l| l.p999 as f64),
            ("max", "max", Kind::Max, |l| l.max as f64),
            ("mean", "mean", Kind::Latency, |l| l.mean),
        ];
        for h in Hist::ALL {
            if !self.base.latency_us.contains_key(&h) && !self.new.latency_us.contains_key(&h) {
                continue;
            }
            let e = h.entry();
            for (part, shown, kind, pick) in parts {
                self.add(
                    format!("{}_{part}", e.short),
                    format!("{} {shown}", e.label),
                    kind,
                    Lower,
                    &|r| r.latency_us.get(&h).map(pick),
                );
            }
        }
    }

    /// The population's offered shape, when either run has one: the load each asked for
    /// (`population_<number>`; more is "higher", as for logins).
    fn population(&mut self) {
        type Pick = fn(&Offered) -> Option<f64>;
        let numbers: [(&str, &str, Kind, Pick); 8] = [
            ("sessions", "sessions", Kind::Volume, |o| {
                Some(o.sessions as f64)
            }),
            (
                "online_peak",
                "users online at the peak, planned",
                Kind::Volume,
                |o| o.online.iter().max().map(|&n| n as f64),
            ),
            (
                "chat_sends",
                "messages to contacts planned",
                Kind::Volume,
                |o| Some(o.chat_sends as f64),
            ),
            (
                "top1_share",
                "share of the top 1% of senders",
                Kind::Ratio,
                |o| Some(o.top1_share),
            ),
            (
                "top10_share",
                "share of the top 10% of senders",
                Kind::Ratio,
                |o| Some(o.top10_share),
            ),
            (
                "largest_group",
                "members of the largest group",
                Kind::Volume,
                |o| Some(o.largest_group as f64),
            ),
            (
                "fanout",
                "deliveries per group message",
                Kind::Volume,
                |o| (o.group_sends > 0).then(|| o.group_deliveries as f64 / o.group_sends as f64),
            ),
            ("size_mean", "mean body bytes", Kind::Volume, |o| {
                o.sizes.map(|s| s.mean)
            }),
        ];
        if self.base.population.is_none() && self.new.population.is_none() {
            return;
        }
        for (key, label, kind, pick) in numbers {
            self.add(
                format!("population_{key}"),
                format!("population: {label}"),
                kind,
                Higher,
                &|r| r.population.as_ref().and_then(pick),
            );
        }
    }

    /// The split where the population's shape matters, each part either run has:
    /// `split_<part>_count`, `_lost` (group bands and phases), `_p50` and `_p99`.
    fn split(&mut self) {
        type Pick = fn(&SplitRow) -> Option<f64>;
        let parts: [(&str, &str, Kind, Better, Pick); 4] = [
            ("count", "count", Kind::Volume, Higher, |s| {
                Some(s.count as f64)
            }),
            ("lost", "lost", Kind::Problem, Lower, |s| {
                s.lost.map(|n| n as f64)
            }),
            ("p50", "p50", Kind::Latency, Lower, |s| {
                s.p50_us.map(|v| v as f64)
            }),
            ("p99", "p99", Kind::Tail, Lower, |s| {
                s.p99_us.map(|v| v as f64)
            }),
        ];
        for part in union(self.base, self.new, |r| r.split.iter().map(|s| s.part)) {
            let label = [self.base, self.new]
                .iter()
                .find_map(|r| split_row(r, part))
                .map_or_else(String::new, |s| s.label.clone());
            for (key, shown, kind, better, pick) in parts {
                self.add(
                    format!("split_{part}_{key}"),
                    format!("{label}: {shown}"),
                    kind,
                    better,
                    &|r| split_row(r, part).and_then(pick),
                );
            }
        }
    }

    /// The ledger's outcomes.
    fn delivery(&mut self) {
        type Outcome = fn(&Delivery) -> u64;
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
            self.add(key, format!("delivery: {key}"), kind, better, &|r| {
                Some(pick(&r.delivery) as f64)
            });
        }
    }

    /// Each chaos step of either run, by its key: what it cost, side by side.
    fn chaos_steps(&mut self) {
        type StepPick = fn(&ChaosRow) -> Option<f64>;
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
        let steps = union(self.base, self.new, |r| {
            r.chaos.iter().map(|c| c.step.key.as_str())
        });
        for step in steps {
            for (part, what, kind, better, pick) in parts {
                self.add(
                    format!("{step}.{part}"),
                    format!("{step}: {what}"),
                    kind,
                    better,
                    &|r| r.chaos.iter().find(|c| c.step.key == step).and_then(pick),
                );
            }
        }
    }

    /// Every check of either run, built-in or written, by its key (`checks.min_verified`).
    fn checks(&mut self) {
        let (base, new) = (self.base, self.new);
        for key in union(base, new, |r| r.checks.iter().map(|c| c.key.as_str())) {
            let Some(c) = base.checks.iter().chain(&new.checks).find(|c| c.key == key) else {
                continue;
            };
            let kind = match c.unit {
                Unit::Count => Kind::Problem,
                Unit::Ratio => Kind::Ratio,
                Unit::Micros => Kind::Tail,
            };
            // A metric's direction is the catalog's; a run pseudo-check's, its bound's.
            let better = match (c.metric, c.op) {
                (Measure::Check(m), _) => m.entry().better,
                (Measure::Run(_), Op::AtMost) => Lower,
                (Measure::Run(_), Op::AtLeast) => Higher,
            };
            self.add(
                key,
                format!("check {key} ({} {})", c.op.symbol(), show(c.unit, c.bound)),
                kind,
                better,
                &|r| r.checks.iter().find(|c| c.key == key).and_then(|c| c.value),
            );
        }
    }

    /// Errors of all kinds, then each kind either run had.
    fn errors(&mut self) {
        self.add("errors", "errors (all kinds)", Kind::Problem, Lower, &|r| {
            Some(r.errors.values().map(|e| e.count).sum::<u64>() as f64)
        });
        for kind in union(self.base, self.new, |r| r.errors.keys()) {
            self.add(
                format!("errors.{}", kind.name()),
                format!("errors: {}", kind.name()),
                Kind::Problem,
                Lower,
                &|r| Some(r.errors.get(kind).map_or(0, |e| e.count) as f64),
            );
        }
    }

    /// The generator's own CPU time and memory, over all shards.
    fn generator(&mut self) {
        self.add(
            "generator_cpu_s",
            "generator CPU time (all shards), s",
            Kind::CpuSeconds,
            Lower,
            &|r| Some(r.generators.iter().map(|g| g.shard.cpu_s).sum()),
        );
        self.add(
            "generator_rss_bytes",
            "generator peak memory (all shards)",
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
    }

    /// Monitored target processes, matched by name (pids differ between runs).
    fn processes(&mut self) {
        let names = union(self.base, self.new, |r| {
            r.processes
                .iter()
                .filter(|p| !p.generator)
                .map(|p| p.name.as_str())
        });
        for name in names {
            let of = |r: &Report, f: &dyn Fn(&ProcUsage) -> f64| {
                let mut m = r
                    .processes
                    .iter()
                    .filter(|p| !p.generator && p.name == name);
                m.next().map(|first| m.fold(f(first), |acc, p| acc + f(p)))
            };
            type Use = fn(&ProcUsage) -> f64;
            let parts: [(&str, &str, Kind, Use); 3] = [
                ("cpu_avg", "CPU mean, % of a core", Kind::Cpu, |p| {
                    p.cpu_avg_pct
                }),
                ("cpu_peak", "CPU peak, % of a core", Kind::Cpu, |p| {
                    p.cpu_peak_pct
                }),
                ("rss_peak", "peak memory", Kind::Bytes, |p| {
                    p.rss_peak_bytes as f64
                }),
            ];
            for (part, what, kind, pick) in parts {
                self.add(
                    format!("{name}.{part}"),
                    format!("{name}: {what}"),
                    kind,
                    Lower,
                    &|r| of(r, &pick),
                );
            }
        }
    }
}
