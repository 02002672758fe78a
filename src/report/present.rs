//! Presentation rules every format shares, so that no number is formatted twice: thousands
//! separators, units, percentages, a check's origin, bound and measured value, the verdict
//! line and the findings' sentences. The tables'
//! rows are built from these in [`super::tables`]; renderers lay them out and format no
//! number themselves. Outside text these sentences quote (error examples, names of
//! processes, chaos steps and checks) is shown through [`crate::untrusted`], so that each
//! stays one line.

use super::checks::{CheckOutcome, Measure, NotMeasured, Origin, RunMetric, Unit};
use super::findings::{Finding, LittleGap, LITTLE_TOLERANCE};
use super::model::{Accounts, Report, Verdict};
use crate::artifact::CheckMetric;
use crate::metrics::{ErrorKind, Hist};
use crate::untrusted::quote;

/// The connections row of reconnects that could not resume their session.
pub const RESUMES_WITHOUT_OFFSET: &str = "reconnects without an offset (missed not fetchable)";

/// Account outcomes in one line, e.g. `12 created, 3 existed, 0 refused`.
pub fn accounts(a: &Accounts) -> String {
    format!(
        "{} created, {} existed, {} refused",
        thousands(a.created),
        thousands(a.existing),
        thousands(a.refused)
    )
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// µs → `12.34 ms`.
pub fn ms(us: f64) -> String {
    format!("{:.2} ms", us / 1000.0)
}

/// `num ÷ den` as a percentage with two decimals, `–` when `den` is 0.
pub fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        "–".to_owned()
    } else {
        format!("{:.2}%", num as f64 * 100.0 / den as f64)
    }
}

/// Where a check comes from: `scenario`, `built-in`, `relaxed (built-in <= 1.000%)`, `run`.
pub fn origin(c: &CheckOutcome) -> String {
    match c.origin {
        Origin::Scenario => "scenario".to_owned(),
        Origin::BuiltIn => "built-in".to_owned(),
        Origin::Relaxed => match c.default_bound {
            Some(d) => format!("relaxed (built-in {} {})", c.op.symbol(), show(c.unit, d)),
            None => "relaxed".to_owned(),
        },
        Origin::Run => "run".to_owned(),
    }
}

/// A finding as the sentence of a note.
pub fn finding(f: &Finding) -> String {
    match f {
        Finding::Generator { errors, example } => format!(
            "the generator ran out of its own resources {errors} time{} (local ports or \
             addresses, file descriptors, socket buffers or memory, or a name it could not \
             resolve): not the server's failures, and the users they hit measured nothing of \
             it. Give it more (`ulimit -n`, `[target] source_addresses`, shards) and run \
             again. First: {}",
            if *errors == 1 { "" } else { "s" },
            quote(example)
        ),
        Finding::SendLag { p99_us } => format!(
            "the generator fell behind its schedule: send lag p99 {:.1} ms (latencies still \
             count from the due time)",
            *p99_us as f64 / 1000.0
        ),
        Finding::LittleBelow { steps } => format!(
            "Little's law does not hold at concurrency {}: TPS × mean RT is more than {:.0}% \
             below the concurrency, so fewer requests were in flight than users. Likely causes: \
             time between a reply and the user's next request (the generator's own turnaround \
             is outside the measured RT, which matters when RT is short), a ramp or warm-up \
             inside the step, failed requests, or a generator too busy to keep every request \
             outstanding (see its CPU). These steps' TPS and RT are not those of their \
             concurrency",
            gaps(steps),
            LITTLE_TOLERANCE * 100.0
        ),
        Finding::LittleAbove { steps } => format!(
            "Little's law does not hold at concurrency {}: TPS × mean RT is more than {:.0}% \
             above the concurrency, so more requests were in flight than users. Likely causes: \
             requests overlapping (a user sending again before its reply, e.g. after a \
             timeout), or replies and round trips of another step counted in this one. These \
             steps' TPS and RT are not those of their concurrency",
            gaps(steps),
            LITTLE_TOLERANCE * 100.0
        ),
        Finding::Saturated {
            embedded_server: true,
            pid,
            cores,
            from_sec,
            cpu_pct,
            ..
        } => format!(
            "the generator process (pid {pid}), which also ran the embedded reference server, \
             used all {cores} cores from second {from_sec} ({cpu_pct:.0}% of one core): neither \
             side's capacity can be read from this run; run `msgstorm serve` separately (its \
             own cores or host) and give the scenario a [target]"
        ),
        Finding::Saturated {
            process,
            pid,
            generator,
            ticked,
            cores,
            from_sec,
            cpu_pct,
            ..
        } => format!(
            "{} (pid {pid}) used all {cores} cores from second {from_sec} ({cpu_pct:.0}% \
             of one core): {} was the bottleneck there{}",
            quote(process),
            if *generator {
                "the generator itself"
            } else {
                "this target process"
            },
            if *generator && !*ticked {
                "; `wake_tick = \"1ms\"` in the scenario takes more deliveries per generator \
                 CPU-second (fewer wake-ups, receive times from the kernel), and shards on \
                 other hosts add cores"
            } else {
                ""
            }
        ),
    }
}

/// `4 (0.8 in flight), 16 (7.2 in flight)`.
fn gaps(steps: &[LittleGap]) -> String {
    let each: Vec<String> = steps
        .iter()
        .map(|g| {
            format!(
                "{} ({:.1} in flight){}",
                thousands(u64::from(g.concurrency)),
                g.in_flight,
                if g.pattern.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", quote(&g.pattern))
                }
            )
        })
        .collect();
    each.join(", ")
}

/// `2 of 3 shards: missing shard 1`.
pub fn shards_present(r: &Report) -> String {
    let count = r.generators.len() + r.missing_shards.len();
    let missing: Vec<String> = r.missing_shards.iter().map(u32::to_string).collect();
    format!(
        "{} of {count} shards: missing shard{} {}",
        r.generators.len(),
        if missing.len() == 1 { "" } else { "s" },
        missing.join(", ")
    )
}

/// The verdict as the report's first words, with why each failed check failed:
/// `PASS (3 checks)`, `FAIL: checks.max_lost: 3 lost (bound <= 0)`, ….
pub fn verdict(r: &Report) -> String {
    let failed = || {
        let names: Vec<String> = r
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| match &c.reason {
                // `INCOMPLETE: 1 of 2 shards…` says it already.
                Some(why) if c.metric != Measure::Run(RunMetric::Shards) => {
                    format!("{}: {}", quote(&c.key), crate::untrusted::line(why))
                }
                _ => quote(&c.key).into_owned(),
            })
            .collect();
        format!("FAIL: {}", names.join("; "))
    };
    match r.verdict {
        Verdict::Interrupted => "INTERRUPTED".to_owned(),
        Verdict::Pass => format!("PASS ({} checks)", r.checks.len()),
        Verdict::Fail => failed(),
        Verdict::Incomplete => format!("INCOMPLETE: {}; {}", shards_present(r), failed()),
    }
}

/// A check's bound and what was measured, with units.
pub fn check(r: &Report, c: &CheckOutcome) -> (String, String) {
    match c.metric {
        Measure::Check(_) => (
            format!("{} {}", c.op.symbol(), show(c.unit, c.bound)),
            measured(r, c),
        ),
        Measure::Run(m) => run_check(r, c, m),
    }
}

/// What a scenario or built-in check measured, with its unit, or why nothing was.
fn measured(r: &Report, c: &CheckOutcome) -> String {
    match (c.value, c.not_measured) {
        (Some(v), _)
            if c.metric == Measure::Check(CheckMetric::Lost) && r.delivery.unverified > 0 =>
        {
            format!(
                "{} + {} unverified (recipients never logged in)",
                show(c.unit, v),
                thousands(r.delivery.unverified)
            )
        }
        (Some(v), _) => show(c.unit, v),
        (None, Some(NotMeasured::NoAcceptance)) => {
            "not measured: the protocol has no acceptance".to_owned()
        }
        (None, Some(NotMeasured::NothingOwed)) => {
            "not measured: no recipient was owed one".to_owned()
        }
        (None, _) => "not measured: no samples".to_owned(),
    }
}

/// A pseudo-check's promise and what the run did instead.
fn run_check(r: &Report, c: &CheckOutcome, metric: RunMetric) -> (String, String) {
    match metric {
        RunMetric::Logins => {
            let first = r.errors.iter().next().map_or_else(String::new, |(k, e)| {
                format!(
                    ": {} ({})",
                    k.name(),
                    quote(e.examples.first().map_or("", String::as_str))
                )
            });
            (
                "at least one user logs in".to_owned(),
                format!("none of {} attempts{first}", r.connections.attempts),
            )
        }
        RunMetric::Shards => (
            format!("all {:.0} shards of the run", c.bound),
            shards_present(r),
        ),
        RunMetric::Interrupted => (
            "the run ends on its own".to_owned(),
            "interrupted by a signal".to_owned(),
        ),
        RunMetric::Chaos => {
            let first = r
                .chaos
                .iter()
                .find(|c| !c.step.ok)
                .map_or_else(String::new, |c| {
                    format!(": {} {}", quote(&c.step.key), quote(&c.step.outcome))
                });
            (
                "every chaos step does what it says".to_owned(),
                format!(
                    "{} did not{first}",
                    thousands(c.value.map_or(0, |n| n as u64))
                ),
            )
        }
        RunMetric::Generator => (
            "the generator keeps the schedule the scenario asked".to_owned(),
            fell_behind(r),
        ),
        RunMetric::EngineErrors => {
            let example = r
                .errors
                .get(&ErrorKind::Engine)
                .and_then(|e| e.examples.first())
                .map_or_else(String::new, |ex| format!(": {}", quote(ex)));
            (
                "no user task of the generator fails".to_owned(),
                format!(
                    "{} failed{example}",
                    thousands(c.value.map_or(0, |n| n as u64))
                ),
            )
        }
    }
}

/// What `run.generator` says: how far behind the generator was, and what its own process
/// did meanwhile, so that a reader can tell its limits from the target's.
fn fell_behind(r: &Report) -> String {
    let mut how = Vec::new();
    if let Some(l) = r.latency_us.get(&Hist::SendLag) {
        how.push(format!("send lag p99 {}", ms(l.p99 as f64)));
    }
    let due = r.count(crate::metrics::Counter::Due);
    if due > 0 {
        let made = super::checks::offered_count(|c| r.count(c));
        how.push(format!(
            "{} of {} due sends made",
            thousands(made.min(due)),
            thousands(due)
        ));
    }
    let cores: u32 = r
        .generators
        .iter()
        .map(|g| g.shard.cores)
        .max()
        .unwrap_or(0);
    let cause = r
        .processes
        .iter()
        .filter(|p| p.generator)
        .map(|p| p.cpu_peak_pct)
        .reduce(f64::max)
        .filter(|_| cores > 0)
        .map_or_else(String::new, |peak| {
            let embedded = r
                .notes
                .iter()
                .any(|n| n == super::findings::EMBEDDED_IN_GENERATOR);
            format!(
                " (generator CPU peak {:.0}% of its {cores} cores{})",
                peak / f64::from(cores),
                if embedded {
                    ", the embedded reference server included"
                } else {
                    ""
                }
            )
        });
    format!(
        "the generator fell behind: {}{cause}; this run did not offer the asked load, so it \
         is no verdict on the target",
        how.join(", ")
    )
}

/// A value with its unit.
pub fn show(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Count => format!("{v:.0}"),
        Unit::Micros => ms(v),
        Unit::Ratio => format!("{:.3}%", v * 100.0),
    }
}
