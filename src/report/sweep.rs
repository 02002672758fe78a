//! The request/response sweep table (TPS vs RT per concurrency step), the Little's-law
//! cross-check, and the knee where throughput stops growing.

use serde::Serialize;

use crate::artifact::{Artifact, RequestSweep};
use crate::metrics::{Counter, Hist};

/// One concurrency step of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    /// Users with a request outstanding in this step.
    pub concurrency: u32,
    /// Replies per second.
    pub tps: f64,
    /// Mean round trip, µs.
    pub rt_mean_us: f64,
    /// p99 round trip, µs.
    pub rt_p99_us: u64,
    /// Little's law: TPS × mean RT (s) — should be close to `concurrency`.
    pub little: f64,
    /// Failed requests.
    pub errors: u64,
}

/// One request pattern's table and its knee.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sweep {
    /// The traffic pattern's name (empty for results of earlier versions).
    pub name: String,
    /// The request: `time` or `kv_get`.
    pub kind: String,
    /// One row per step with at least one whole second.
    pub rows: Vec<SweepRow>,
    /// Where throughput stopped growing.
    pub knee: Knee,
}

impl Sweep {
    /// The table of every request pattern of `a` with at least one whole second in a
    /// step, in scenario order. Replies and round trips are counted per second, so patterns
    /// that run at the same time share each other's seconds: W3 runs them one after the
    /// other.
    pub fn all(a: &Artifact) -> Vec<Sweep> {
        let patterns = if a.request_sweeps.is_empty() {
            a.request_sweep.as_slice()
        } else {
            &a.request_sweeps[..]
        };
        patterns
            .iter()
            .filter_map(|p| {
                let rows = rows(a, p);
                (!rows.is_empty()).then(|| Sweep {
                    name: p.name.clone(),
                    kind: p.kind.clone(),
                    knee: knee(&rows),
                    rows,
                })
            })
            .collect()
    }
}

/// The rows of request pattern `sweep` of `a`, one per step, from the per-second series.
fn rows(a: &Artifact, sweep: &RequestSweep) -> Vec<SweepRow> {
    let Some(ts) = a.traffic_started_s else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (k, &concurrency) in sweep.steps.iter().enumerate() {
        let from = ts + sweep.start_s + k as f64 * sweep.step_s;
        let to = from + sweep.step_s;
        // Whole seconds inside the step: the first partial second is warm-up.
        let lo = from.ceil() as u32;
        let hi = to.floor() as u32;
        if hi <= lo {
            continue;
        }
        let (mut replies, mut errors) = (0, 0);
        for s in a.metrics.seconds().filter(|s| (lo..hi).contains(&s.sec)) {
            replies += s.count(Counter::Replies);
            errors += s.errors;
        }
        let rt = a.metrics.window(Hist::Request, lo..hi).unwrap_or_default();
        let tps = replies as f64 / f64::from(hi - lo);
        out.push(SweepRow {
            concurrency,
            tps,
            rt_mean_us: rt.mean,
            rt_p99_us: rt.p99,
            little: tps * rt.mean / 1e6,
            errors,
        });
    }
    out
}

/// Where throughput stops growing: the last step whose throughput grew by at least 10%
/// over the best step before it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Knee {
    /// One step only: nothing to compare.
    OneStep,
    /// The last step still grew: the knee is at a higher concurrency.
    StillGrowing {
        /// Concurrency of the last step.
        concurrency: u32,
        /// Its replies per second.
        tps: f64,
    },
    /// Throughput stopped growing after this step.
    At {
        /// Concurrency of the step.
        concurrency: u32,
        /// Its replies per second.
        tps: f64,
        /// Its mean round trip, µs.
        rt_mean_us: f64,
    },
}

/// The knee of `rows`.
fn knee(rows: &[SweepRow]) -> Knee {
    if rows.len() < 2 {
        return Knee::OneStep;
    }
    let mut knee = 0;
    for i in 1..rows.len() {
        if rows[i].tps >= rows[knee].tps * 1.10 {
            knee = i;
        }
    }
    let k = &rows[knee];
    if knee + 1 == rows.len() {
        Knee::StillGrowing {
            concurrency: k.concurrency,
            tps: k.tps,
        }
    } else {
        Knee::At {
            concurrency: k.concurrency,
            tps: k.tps,
            rt_mean_us: k.rt_mean_us,
        }
    }
}
