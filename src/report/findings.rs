//! What bounded a run, found in its artifact: the generator falling behind its schedule,
//! and a watched process (generator or target) that used all cores.
//!
//! Computed at report time, so a merge of shards gets the findings of the whole run. Result
//! files written before this module existed carry the same findings as sentences in their
//! notes; [`is_finding_note`] recognises those so that they are not shown twice.

use serde::Serialize;

use crate::artifact::Artifact;
use crate::metrics::Hist;

/// Send lag p99 above which the generator is said to have fallen behind, µs.
pub const SEND_LAG_P99_US: u64 = 10_000;

/// CPU use, in % of all of a process's host's cores, from which that process is saturated.
pub const SATURATED_PCT: f64 = 90.0;

/// How the note that `msgstorm run` records when the reference server ran embedded in the
/// generator's own process begins.
const EMBEDDED_IN_GENERATOR: &str = "the reference server ran embedded in the generator's process";

/// One finding about what bounded the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
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
        /// Cores of the host (of the shard that watched it).
        cores: u32,
        /// The first second of the run at which it did.
        from_sec: u32,
        /// Its CPU use that second, % of one core.
        cpu_pct: f32,
    },
}

/// The findings of `a`: send lag first, then saturated processes in the artifact's order.
pub fn find(a: &Artifact) -> Vec<Finding> {
    let mut out = Vec::new();
    let lag_p99 = a.metrics.hist(Hist::SendLag).value_at_quantile(0.99);
    if lag_p99 > SEND_LAG_P99_US {
        out.push(Finding::SendLag { p99_us: lag_p99 });
    }
    let embedded = a.notes.iter().any(|n| n.starts_with(EMBEDDED_IN_GENERATOR));
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
            cores,
            from_sec: sec,
            cpu_pct: pct,
        };
        // Shards watching the same target process see the same thing.
        if !out.contains(&found) {
            out.push(found);
        }
    }
    out
}

/// Whether `note` is one of the sentences older versions froze into the notes for what is
/// now a [`Finding`].
pub fn is_finding_note(note: &str) -> bool {
    note.starts_with("the generator fell behind its schedule: send lag p99 ")
        || (note.contains(" cores from second ") && note.ends_with(" was the bottleneck there"))
}
