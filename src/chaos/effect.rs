//! What a chaos step cost, from the run's per-second series: the baseline before it, the
//! figures during its window and after it, and how long the service took to recover.

use serde::Serialize;

use super::StepRecord;
use crate::report::series::SecondPoint;

/// How far from the baseline a second may be and still count as recovered: latency p99
/// at most this many times the baseline's (and at least [`SLACK_US`] above it), delivered
/// rate at least this share of the baseline's.
pub const BAND: f64 = 1.5;
/// Absolute slack on the p99 band, µs (a baseline of a few ms is noisy per second).
pub const SLACK_US: u64 = 5_000;
/// The share of the baseline's delivered rate a recovered second reaches.
pub const RATE_SHARE: f64 = 0.8;
/// Seconds before a step that make its baseline, at most.
const BASELINE_S: u32 = 10;

/// Figures of a span of seconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Span {
    /// Seconds in it.
    pub seconds: u32,
    /// Messages received per second.
    pub received_per_s: f64,
    /// End-to-end latency: the median of the seconds' p50, µs.
    pub e2e_p50_us: u64,
    /// End-to-end latency: the highest second's p99, µs.
    pub e2e_p99_us: u64,
    /// End-to-end latency: the highest value, µs.
    pub e2e_max_us: u64,
    /// Errors of any kind.
    pub errors: u64,
    /// Sends made.
    pub sent: u64,
}

/// What one step cost.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    /// The step.
    pub key: String,
    /// When its window began and ended, seconds from the run's start (the charts' axis).
    pub from_s: f64,
    /// See `from_s`.
    pub to_s: f64,
    /// Before it (up to 10 s, from traffic start).
    pub before: Span,
    /// During its window (the second it began up to the second it ended).
    pub during: Span,
    /// From its end to the end of the traffic.
    pub after: Span,
    /// Errors by kind during the window and until recovery.
    pub errors: Vec<(String, u64)>,
    /// Logins from the step's start until recovery (users coming back, and any other).
    pub logins: u64,
    /// Seconds from the step's end until the first second back within the band of the
    /// baseline (p99 and delivered rate); `None`: not recovered by the end of the run.
    pub recovery_s: Option<f64>,
    /// Users online before the step (the most in a second of the baseline), and the
    /// fewest in a second from its start until they were all back.
    pub online: (u64, u64),
    /// When users went offline: seconds from the step's start until as many were online
    /// as before it (`None`: never by the end of the run, or nobody went).
    pub back_online_s: Option<f64>,
}

/// The effect of `step` on `series` (seconds from the run's start; traffic started at
/// `traffic_s`, and the run's traffic ended at `end_s`, both from the run's start). Its
/// baseline starts after `earlier_s`, when the steps before it ended (from traffic start),
/// so that one step is not measured against another.
pub fn of(
    step: &StepRecord,
    series: &[SecondPoint],
    (traffic_s, end_s): (f64, f64),
    earlier_s: f64,
) -> Effect {
    let (from, to) = step.window();
    let (from, to) = (traffic_s + from, traffic_s + to);
    let first = from.floor() as u32;
    let last = (to.ceil() as u32).max(first + 1);
    let start = (traffic_s.ceil() as u32)
        .max(first.saturating_sub(BASELINE_S))
        .max(((traffic_s + earlier_s).ceil() as u32).min(first));
    let end = end_s.floor() as u32;
    let before = span(series, start, first);
    // Latency by the second a message arrived: what the window held shows in the second it
    // ended, so that second counts; the rate, over the seconds inside the window only.
    let during = Span {
        received_per_s: span(series, first, (to.floor() as u32).max(first + 1)).received_per_s,
        ..span(series, first, last)
    };
    let after = span(series, last, end.max(last));
    let recovered = series
        .iter()
        .filter(|p| p.sec >= last && p.sec < end.max(last))
        .find(|p| within(p, &before))
        .map(|p| p.sec);
    let until = recovered.unwrap_or(end);
    let mut errors: std::collections::BTreeMap<String, u64> = Default::default();
    let mut logins = 0;
    for p in series.iter().filter(|p| p.sec >= first && p.sec <= until) {
        logins += p.logins;
        for (k, n) in &p.error_kinds {
            *errors.entry(k.name().to_owned()).or_default() += n;
        }
    }
    let online_before = series
        .iter()
        .filter(|p| p.sec >= start && p.sec < first)
        .map(|p| p.online)
        .max()
        .unwrap_or(0);
    let back = series
        .iter()
        .filter(|p| p.sec > first)
        .find(|p| p.online >= online_before)
        .map(|p| p.sec);
    let fewest = series
        .iter()
        .filter(|p| p.sec >= first && back.is_none_or(|b| p.sec <= b))
        .map(|p| p.online)
        .min()
        .unwrap_or(online_before);
    Effect {
        online: (online_before, fewest),
        back_online_s: back
            .filter(|_| fewest < online_before)
            .map(|b| (f64::from(b) - from).max(0.0)),
        key: step.key.clone(),
        from_s: from,
        to_s: to,
        before,
        during,
        after,
        errors: errors.into_iter().collect(),
        logins,
        recovery_s: recovered.map(|s| (f64::from(s) - to).max(0.0)),
    }
}

/// Whether second `p` is back within the band of `base`.
fn within(p: &SecondPoint, base: &Span) -> bool {
    if base.seconds == 0 {
        return true;
    }
    let p99_ok = p.e2e.count == 0 && base.received_per_s == 0.0
        || p.e2e.p99 as f64
            <= (base.e2e_p99_us as f64 * BAND).max((base.e2e_p99_us + SLACK_US) as f64);
    let rate_ok = p.received as f64 >= base.received_per_s * RATE_SHARE;
    p99_ok && rate_ok
}

/// The figures of seconds `from..to`.
fn span(series: &[SecondPoint], from: u32, to: u32) -> Span {
    let secs: Vec<&SecondPoint> = series
        .iter()
        .filter(|p| p.sec >= from && p.sec < to)
        .collect();
    let seconds = to.saturating_sub(from);
    if seconds == 0 {
        return Span::default();
    }
    let mut p50s: Vec<u64> = secs
        .iter()
        .filter(|p| p.e2e.count > 0)
        .map(|p| p.e2e.p50)
        .collect();
    p50s.sort_unstable();
    Span {
        seconds,
        received_per_s: secs.iter().map(|p| p.received).sum::<u64>() as f64 / f64::from(seconds),
        e2e_p50_us: p50s.get(p50s.len() / 2).copied().unwrap_or(0),
        e2e_p99_us: secs.iter().map(|p| p.e2e.p99).max().unwrap_or(0),
        e2e_max_us: secs.iter().map(|p| p.e2e.max).max().unwrap_or(0),
        errors: secs.iter().map(|p| p.errors).sum(),
        sent: secs.iter().map(|p| p.sent).sum(),
    }
}
