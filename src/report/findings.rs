//! What bounded a run, found in its artifact: the generator running out of its own
//! resources, the generator falling behind its schedule, a watched process (generator or
//! target) that used all cores, and sweep steps in which Little's law did not hold (their
//! TPS and RT are not those of their concurrency).
//!
//! Computed at report time, so a merge of shards gets the findings of the whole run. Result
//! files written before this module existed carry the same findings as sentences in their
//! notes; [`is_finding_note`] recognises those so that they are not shown twice.

use serde::Serialize;

use super::sweep::Sweep;
use crate::artifact::Artifact;
use crate::metrics::{ErrorKind, Hist};

/// Send lag p99 above which the generator is said to have fallen behind, µs.
pub const SEND_LAG_P99_US: u64 = 10_000;

/// CPU use, in % of all of a process's host's cores, from which that process is saturated.
pub const SATURATED_PCT: f64 = 90.0;

/// How far TPS × mean RT (the requests in flight on average, by Little's law) may be from a
/// sweep step's concurrency, as a fraction of it, before the step is a finding.
pub const LITTLE_TOLERANCE: f64 = 0.15;

/// The note `msgstorm run` records when the reference server ran embedded in the
/// generator's own process; the saturation finding recognises such a run by it.
pub const EMBEDDED_IN_GENERATOR: &str =
    "the reference server ran embedded in the generator's process: CPU and memory above include it";

/// One finding about what bounded the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The generator ran out of its own resources (local ports, file descriptors, socket
    /// buffers, memory) or could not resolve the target's name: errors of kind
    /// [`ErrorKind::Generator`], which are not the server's.
    Generator {
        /// How many there were.
        errors: u64,
        /// The first example kept (it names what ran out).
        example: String,
    },
    /// The generator sent late: its send lag p99 exceeded [`SEND_LAG_P99_US`]. Latencies
    /// still count from the due time.
    SendLag {
        /// Send lag p99, µs.
        p99_us: u64,
    },
    /// A watched process used [`SATURATED_PCT`] of all cores of its host.
    Saturated {
        /// Its name.
        process: String,
        /// Its process id.
        pid: u32,
        /// True for a generator process, false for a target process.
        generator: bool,
        /// True when it is a generator process that also ran the embedded reference server:
        /// then neither side's capacity can be read from the run.
        embedded_server: bool,
        /// True when it is a generator process whose threads slept to a wake tick
        /// (`wake_tick`): then the report has no cheaper receive path to suggest.
        ticked: bool,
        /// Cores of the host (of the shard that watched it).
        cores: u32,
        /// The first second of the run at which it did.
        from_sec: u32,
        /// Its CPU use that second, % of one core.
        cpu_pct: f32,
    },
    /// In these sweep steps fewer requests were in flight on average (TPS × mean RT) than
    /// the step's concurrency, by more than [`LITTLE_TOLERANCE`].
    LittleBelow {
        /// The steps, in sweep order.
        steps: Vec<LittleGap>,
    },
    /// In these sweep steps more requests were in flight on average (TPS × mean RT) than
    /// the step's concurrency, by more than [`LITTLE_TOLERANCE`].
    LittleAbove {
        /// The steps, in sweep order.
        steps: Vec<LittleGap>,
    },
}

/// A sweep step whose concurrency and TPS × mean RT disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LittleGap {
    /// The request pattern's name (empty for results of earlier versions).
    pub pattern: String,
    /// The step's concurrency (users with a request outstanding).
    pub concurrency: u32,
    /// TPS × mean RT: the requests in flight on average.
    pub in_flight: f64,
}

/// The findings of `a` and its `sweeps`: the generator's own failures first, then send
/// lag, then saturated processes in the artifact's order, then the sweep steps where
/// Little's law did not hold (not looked for when shards are missing).
pub fn of(a: &Artifact, sweeps: &[Sweep]) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some((_, errors, examples)) = a
        .metrics
        .errors()
        .find(|(k, _, _)| *k == ErrorKind::Generator)
    {
        out.push(Finding::Generator {
            errors,
            example: examples.first().cloned().unwrap_or_default(),
        });
    }
    let lag_p99 = a.metrics.hist(Hist::SendLag).value_at_quantile(0.99);
    if lag_p99 > SEND_LAG_P99_US {
        out.push(Finding::SendLag { p99_us: lag_p99 });
    }
    let embedded = a.notes.iter().any(|n| n == EMBEDDED_IN_GENERATOR);
    let ticked = a
        .notes
        .iter()
        .any(|n| n.starts_with(crate::runtime::WAKE_TICK_NOTE_START));
    for p in &a.processes {
        let Some(cores) = a
            .shards
            .iter()
            .find(|s| s.index == p.shard)
            .map(|s| s.cores)
        else {
            continue;
        };
        let full = SATURATED_PCT * f64::from(cores);
        let Some(&(sec, pct, _)) = p.series.iter().find(|s| f64::from(s.1) >= full) else {
            continue;
        };
        let found = Finding::Saturated {
            process: p.name.clone(),
            pid: p.pid,
            generator: p.generator,
            embedded_server: p.generator && embedded,
            ticked: p.generator && ticked,
            cores,
            from_sec: sec,
            cpu_pct: pct,
        };
        // Shards watching the same target process see the same thing.
        if !out.contains(&found) {
            out.push(found);
        }
    }
    // A result missing shards lacks their requests: that, not the law, is what it shows.
    let sweeps = if a.missing_shards().is_empty() {
        sweeps
    } else {
        &[]
    };
    let (mut below, mut above) = (Vec::new(), Vec::new());
    for (sweep, row) in sweeps
        .iter()
        .flat_map(|s| s.rows.iter().map(move |r| (s, r)))
    {
        let concurrency = f64::from(row.concurrency);
        let gap = LittleGap {
            pattern: sweep.name.clone(),
            concurrency: row.concurrency,
            in_flight: row.little,
        };
        if row.little < concurrency * (1.0 - LITTLE_TOLERANCE) {
            below.push(gap);
        } else if row.little > concurrency * (1.0 + LITTLE_TOLERANCE) {
            above.push(gap);
        }
    }
    if !below.is_empty() {
        out.push(Finding::LittleBelow { steps: below });
    }
    if !above.is_empty() {
        out.push(Finding::LittleAbove { steps: above });
    }
    out
}

/// Whether `note` is one of the sentences older versions froze into the notes for what is
/// now a [`Finding`].
pub fn is_finding_note(note: &str) -> bool {
    note.starts_with("the generator fell behind its schedule: send lag p99 ")
        || (note.contains(" cores from second ") && note.ends_with(" was the bottleneck there"))
}
