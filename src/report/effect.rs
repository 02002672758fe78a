//! What a chaos step cost, from the run's per-second series: the baseline before it, the
//! figures during its window and after it, and how long the service took to recover.

use serde::Serialize;

use super::series::SecondPoint;
use crate::artifact::Artifact;
use crate::chaos::StepRecord;

/// How far from the baseline a second may be and still count as recovered: end-to-end
/// p99 at most this many times the baseline's (its worst second's) or [`SLACK_US`] above
/// it, whichever is more, and delivered rate at least [`RATE_SHARE`] of the baseline's, or
/// deliveries at least that share of the second's sends times the baseline's deliveries
/// per send.
pub const BAND: f64 = 2.0;
/// Absolute slack on the p99 band, µs: a baseline of a few ms has single seconds 10–20 ms
/// higher whenever the host's scheduler is busy (two shared cores), which is not the
/// service still recovering.
pub const SLACK_US: u64 = 20_000;
/// The share of the baseline's delivered rate a recovered second reaches.
pub const RATE_SHARE: f64 = 0.8;
/// Recovered at the first second within the band of which, with the next ones up to this
/// many, at most one is out of it (when fewer seconds of traffic are left: all of them in
/// it). One quiet second inside a backlog does not end the recovery, and one noisy second
/// after the service is back does not prolong it: on a shared host a second's p99 jumps
/// to 100 ms now and then, with nothing wrong with the service.
pub const HELD_S: u32 = 3;
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
    /// baseline (p99 and delivered rate) that the next ones confirm ([`HELD_S`]); `None`:
    /// not recovered by the end of the traffic.
    pub recovery_s: Option<f64>,
    /// Users online before the step (the most in a second of the baseline), and the
    /// fewest in a second from its start until they were all back.
    pub online: (u64, u64),
    /// When users went offline: seconds from the step's start until as many were online
    /// as before it (`None`: never by the end of the run, or nobody went).
    pub back_online_s: Option<f64>,
}

/// The effect of `step` on `series` (seconds from the run's start; traffic started at
/// `traffic_s`, and ended at `end_s`, both from the run's start: the last second of the
/// traffic may be partial, and rates over it count its true length). Its baseline starts
/// after `earlier_s`, when the steps before it ended (from traffic start), so that one
/// step is not measured against another.
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
    // The seconds with traffic, the last one maybe partial; and the whole ones.
    let end = (end_s.ceil() as u32).max(last);
    let whole = (end_s.floor() as u32).max(last);
    let before = span(series, (start, first), f64::from(first));
    // Latency by the second a message arrived: what the window held shows in the second it
    // ended, so that second counts; the rate, over the seconds inside the window only.
    let inside = (to.floor() as u32).max(first + 1);
    let during = Span {
        received_per_s: span(series, (first, inside), f64::from(inside)).received_per_s,
        ..span(series, (first, last), f64::from(last))
    };
    let after = span(series, (last, end), end_s.max(f64::from(last)));
    let by_sec: std::collections::BTreeMap<u32, &SecondPoint> =
        series.iter().map(|p| (p.sec, p)).collect();
    let ok = |sec: u32| by_sec.get(&sec).is_some_and(|p| within(p, &before));
    let recovered = (last..whole).find(|&s| {
        let next = s..(s + HELD_S).min(whole);
        let out = next.clone().filter(|&n| !ok(n)).count();
        // Near the end of the traffic fewer seconds are left to confirm it: a second in
        // band is enough there, as the traffic's last seconds wind down.
        ok(s) && (next.len() < HELD_S as usize || out <= 1)
    });
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
    // Deliveries keep up with what was sent that second as they did before the step: a
    // baseline of a second or two may hold a burst (users' first sends together), and a
    // second at the offered rate after the step is recovered even when below it.
    let fanout = base.received_per_s * f64::from(base.seconds) / base.sent.max(1) as f64;
    let rate_ok = p.received as f64 >= base.received_per_s * RATE_SHARE
        || (base.sent > 0
            && p.sent > 0
            && p.received as f64 >= p.sent as f64 * fanout * RATE_SHARE);
    p99_ok && rate_ok
}

/// The figures of seconds `from..to`; its rate over its true length, up to `until` (the
/// end of the traffic when that falls inside its last second).
fn span(series: &[SecondPoint], (from, to): (u32, u32), until: f64) -> Span {
    let secs: Vec<&SecondPoint> = series
        .iter()
        .filter(|p| p.sec >= from && p.sec < to)
        .collect();
    let seconds = to.saturating_sub(from);
    if seconds == 0 {
        return Span::default();
    }
    let length = until.min(f64::from(to)) - f64::from(from);
    let length = if length > 0.0 {
        length
    } else {
        f64::from(seconds)
    };
    let mut p50s: Vec<u64> = secs
        .iter()
        .filter(|p| p.e2e.count > 0)
        .map(|p| p.e2e.p50)
        .collect();
    p50s.sort_unstable();
    Span {
        seconds,
        received_per_s: secs.iter().map(|p| p.received).sum::<u64>() as f64 / length,
        e2e_p50_us: p50s.get(p50s.len() / 2).copied().unwrap_or(0),
        e2e_p99_us: secs.iter().map(|p| p.e2e.p99).max().unwrap_or(0),
        e2e_max_us: secs.iter().map(|p| p.e2e.max).max().unwrap_or(0),
        errors: secs.iter().map(|p| p.errors).sum(),
        sent: secs.iter().map(|p| p.sent).sum(),
    }
}

/// One chaos step in the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChaosRow {
    /// What it did.
    pub step: crate::chaos::StepRecord,
    /// What it cost.
    pub effect: Effect,
    /// The messages due in its window.
    pub during: crate::ledger::SpanDelivery,
    /// The messages due after it, until the next step begins or ends (or the traffic does).
    pub after: crate::ledger::SpanDelivery,
}

/// Each chaos step of `a` with its effect on `series`.
pub fn chaos_rows(a: &Artifact, series: &[SecondPoint]) -> Vec<ChaosRow> {
    let traffic_s = a.traffic_started_s.unwrap_or(0.0);
    let end_s = a.traffic_ended_s.unwrap_or_else(|| {
        series
            .iter()
            .filter(|p| p.sent > 0)
            .map(|p| f64::from(p.sec) + 1.0)
            .fold(traffic_s, f64::max)
    });
    let spans = step_charged_spans(a);
    a.chaos
        .iter()
        .map(|step| {
            let (during, after) = step_spans(a.ledger.bounds_us(), &spans, step);
            let earlier = a
                .chaos
                .iter()
                .map(crate::chaos::StepRecord::window)
                .filter(|w| w.1 <= step.window().0)
                .map(|w| w.1)
                .fold(0.0, f64::max);
            ChaosRow {
                effect: of(step, series, (traffic_s, end_s), earlier),
                step: step.clone(),
                during,
                after,
            }
        })
        .collect()
}

/// The ledger's spans of `a`, each loss charged to the step in whose window (or at whose
/// instant) it was last seen safe ([`crate::ledger::Ledger::spans`]).
pub fn step_charged_spans(a: &Artifact) -> Vec<crate::ledger::SpanDelivery> {
    let starts: Vec<u64> = a.chaos.iter().map(|s| us(s.at_s)).collect();
    a.ledger.spans(&starts)
}

/// Seconds as whole µs, as the ledger's bounds are.
fn us(s: f64) -> u64 {
    (s * 1e6).round() as u64
}

/// The deliveries due in `step`'s planned window and in the span after it.
pub fn step_spans(
    bounds: &[u64],
    spans: &[crate::ledger::SpanDelivery],
    step: &crate::chaos::StepRecord,
) -> (crate::ledger::SpanDelivery, crate::ledger::SpanDelivery) {
    use crate::ledger::{Ledger, SpanDelivery};
    if spans.is_empty() {
        return Default::default();
    }
    let first = Ledger::span_of(bounds, us(step.at_s));
    let last = Ledger::span_of(bounds, us(step.at_s + step.duration_s));
    let during = spans[first.min(spans.len())..last.min(spans.len())]
        .iter()
        .fold(SpanDelivery::default(), |a, s| a + *s);
    let after = spans.get(last).copied().unwrap_or_default();
    (during, after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::series::Spread;

    /// Second `sec` with `received` deliveries of end-to-end p99 `p99_us`.
    /// Step `chaos[0]` doing `action` from `began` to `ended`, seconds of the run.
    fn step(action: &str, began: f64, ended: f64) -> StepRecord {
        StepRecord {
            key: "chaos[0]".to_owned(),
            action: action.to_owned(),
            planned: String::new(),
            at_s: began,
            duration_s: ended - began,
            began_s: Some(began),
            ended_s: Some(ended),
            outcome: String::new(),
            ok: true,
            pids: Vec::new(),
            exit_code: None,
            output: None,
            cut: None,
            back_after_s: None,
            max_lost: None,
            max_duplicated: None,
        }
    }

    fn second(sec: u32, received: u64, p99_us: u64) -> SecondPoint {
        let e2e = Spread {
            count: received,
            p50: p99_us / 2,
            p99: p99_us,
            max: p99_us,
        };
        SecondPoint {
            sec,
            online: 40,
            logins: 0,
            sent: received,
            accepted: received,
            received,
            replies: 0,
            signals_sent: 0,
            signals_received: 0,
            errors: 0,
            error_kinds: Default::default(),
            e2e,
            ack: e2e,
            request: Spread {
                count: 0,
                p50: 0,
                p99: 0,
                max: 0,
            },
        }
    }

    /// A pause from 3 s to 5 s: a backlog second, a second 10 ms above a 5 ms baseline, one
    /// noisy second of 100 ms, then quiet; the traffic ends half-way through second 10.
    #[test]
    fn recovery_ignores_one_noisy_second_and_the_last_partial_second_counts_its_length() {
        let mut series: Vec<SecondPoint> = (0..3).map(|s| second(s, 100, 5_000)).collect();
        series.extend([
            second(3, 0, 0),
            second(4, 0, 0),
            second(5, 300, 2_000_000),
            second(6, 100, 15_000),
            second(7, 100, 100_000),
        ]);
        series.extend((8..10).map(|s| second(s, 100, 5_000)));
        series.push(second(10, 50, 5_000));
        let step = step("pause", 3.0, 5.0);
        let e = of(&step, &series, (0.0, 10.5), 0.0);
        assert_eq!(e.recovery_s, Some(1.0), "{e:?}");
        let after = (300.0 + 4.0 * 100.0 + 50.0) / 5.5;
        assert!((e.after.received_per_s - after).abs() < 1e-9, "{e:?}");
    }

    /// A baseline that holds the users' first burst (130/s sent and delivered) and a
    /// server killed at 2 s: from second 3 on it delivers all of the 100/s sent again,
    /// which is recovered though below 80% of the burst.
    #[test]
    fn recovery_is_deliveries_keeping_up_with_sends_not_a_burst_in_the_baseline() {
        let mut series: Vec<SecondPoint> = (0..2).map(|s| second(s, 130, 5_000)).collect();
        series.push(second(2, 0, 0));
        series.extend((3..9).map(|s| second(s, 100, 5_000)));
        let step = step("restart", 2.0, 2.5);
        let e = of(&step, &series, (0.0, 9.0), 0.0);
        assert_eq!(e.recovery_s, Some(0.5), "{e:?}");
    }
}
