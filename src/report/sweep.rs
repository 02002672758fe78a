//! The request/response sweep table (TPS vs RT per concurrency step), the Little's-law
//! cross-check, and the knee where throughput stops growing.

use crate::artifact::Artifact;
use crate::metrics::{Counter, Hist};

/// One concurrency step of the sweep.
#[derive(Debug, Clone, PartialEq)]
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

/// The sweep rows of `a`, one per step, from the per-second series.
pub fn rows(a: &Artifact) -> Vec<SweepRow> {
    let (Some(sweep), Some(ts)) = (&a.request_sweep, a.traffic_started_s) else {
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

/// One line naming the knee: the last step whose throughput grew by at least 10%.
pub fn verdict(rows: &[SweepRow]) -> String {
    if rows.len() < 2 {
        return "one step only: add a sweep to find the knee".to_owned();
    }
    let mut knee = 0;
    for i in 1..rows.len() {
        if rows[i].tps >= rows[knee].tps * 1.10 {
            knee = i;
        }
    }
    let k = &rows[knee];
    if knee + 1 == rows.len() {
        format!(
            "throughput still grows at concurrency {} ({:.0} req/s): the knee is further out",
            k.concurrency, k.tps
        )
    } else {
        format!(
            "knee at concurrency {}: {:.0} req/s at {:.2} ms mean; more concurrency only adds \
             latency (Little's law: RT ≈ concurrency ÷ TPS). High RT with idle server CPU means \
             too few workers in front of the backend.",
            k.concurrency,
            k.tps,
            k.rt_mean_us / 1000.0
        )
    }
}
