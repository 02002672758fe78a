//! The run over time: per-second charts on one shared time axis — users, messages,
//! latencies, errors, every monitored process's CPU and memory, and the scraped server
//! metrics — for one run, or two runs overlaid (`compare --html`).

use std::collections::BTreeMap;

use std::fmt::Write;

use super::chart::{Chart, Line, Mark, XAxis, YUnit};
use super::esc;
use super::page::section as page_section;
use crate::metrics::ErrorKind;
use crate::report::model::Report;
use crate::report::series::{SecondPoint, Spread};
use crate::scrape::ScrapedSeries;

/// At most this many points per line: a longer run's seconds are grouped into buckets of
/// whole seconds, so a one-hour run's page stays small.
pub const MAX_POINTS: u32 = 600;

/// The most lines of one scraped metric charted (label sets beyond it are left out).
const MAX_SCRAPED_LINES: usize = 8;

/// How the seconds of one bucket become one point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agg {
    /// Events per second: the bucket's sum over its length (seconds without events count
    /// as 0).
    Rate,
    /// The mean of the seconds that have a value.
    Mean,
    /// The highest value (tails, peaks).
    Max,
}

/// Seconds per point for a run of `end_s` seconds.
pub fn bucket_for(end_s: f64) -> u32 {
    ((end_s / f64::from(MAX_POINTS)).ceil() as u32).max(1)
}

/// `points` (second, value) grouped into buckets of `bucket` seconds; with [`Agg::Rate`]
/// every bucket up to `end_s` is present.
pub fn downsample(
    points: impl IntoIterator<Item = (u32, f64)>,
    bucket: u32,
    agg: Agg,
    end_s: f64,
) -> Vec<(f64, f64)> {
    let bucket = bucket.max(1);
    // Per bucket: sum, highest, count.
    let mut acc: BTreeMap<u32, (f64, f64, u32)> = BTreeMap::new();
    for (sec, v) in points {
        let e = acc.entry(sec / bucket).or_insert((0.0, f64::MIN, 0));
        e.0 += v;
        e.1 = e.1.max(v);
        e.2 += 1;
    }
    let x = |b: u32| f64::from(b * bucket);
    match agg {
        Agg::Rate => {
            let last = acc
                .keys()
                .next_back()
                .copied()
                .unwrap_or(0)
                .max((end_s.max(0.0) as u32).saturating_sub(1) / bucket);
            (0..=last)
                .map(|b| {
                    let sum = acc.get(&b).map_or(0.0, |e| e.0);
                    (x(b), sum / f64::from(bucket))
                })
                .collect()
        }
        Agg::Mean => acc
            .iter()
            .map(|(&b, e)| (x(b), e.0 / f64::from(e.2)))
            .collect(),
        Agg::Max => acc.iter().map(|(&b, e)| (x(b), e.1)).collect(),
    }
}

/// One run on the charts.
#[derive(Debug, Clone, Copy)]
pub struct Run<'a> {
    /// Prefix of its legend entries (`base`, `new`), none for a single run.
    pub label: Option<&'a str>,
    /// Its lines are dashed.
    pub dashed: bool,
    /// Its report.
    pub report: &'a Report,
}

/// A chart with its heading and a sentence on how to read it.
pub struct Panel {
    /// Heading.
    pub heading: String,
    /// How to read it.
    pub why: String,
    /// The chart.
    pub chart: Chart,
}

/// The timeline section of one run's report.
pub fn section(out: &mut String, r: &Report) {
    let runs = [Run {
        label: None,
        dashed: false,
        report: r,
    }];
    page_section(
        out,
        "timeline",
        "The run over time",
        "One point per second (longer runs: per few seconds), all charts on the same time \
         axis: point at one chart to mark that moment on every chart.",
        &body(&runs),
    );
}

/// The charts of `runs`, each under its heading and caption, then the scraped series that
/// stayed constant (listed, not charted).
pub fn body(runs: &[Run<'_>]) -> String {
    let mut body = String::new();
    for p in panels(runs) {
        let _ = write!(
            body,
            "<h3>{}</h3><p class=\"why\">{}</p>{}",
            esc(&crate::untrusted::line(&p.heading)),
            esc(&crate::untrusted::line(&p.why)),
            p.chart.svg()
        );
    }
    if !any_errors(runs) {
        body.push_str("<h3>Errors</h3><p>No errors occurred.</p>");
    }
    let flat = constant_series(runs);
    if !flat.is_empty() {
        body.push_str("<h3>Server metrics that did not change</h3><ul class=\"flat\">");
        for f in flat {
            let _ = write!(
                body,
                "<li><code>{}</code></li>",
                esc(&crate::untrusted::line(&f))
            );
        }
        body.push_str("</ul>");
    }
    body
}

/// Every time chart of `runs`, overlaid, on one time axis as long as the longest run.
pub fn panels(runs: &[Run<'_>]) -> Vec<Panel> {
    let end = runs
        .iter()
        .map(|r| r.report.duration_s)
        .fold(1.0, f64::max)
        .ceil();
    let bucket = bucket_for(end);
    let marks = chaos_marks(runs);
    let chart = |id: &str, title: &str, y: YUnit, lines: Vec<Line>, gap: bool| Chart {
        marks: marks.clone(),
        id: id.to_owned(),
        title: title.to_owned(),
        x: XAxis::Time(end),
        y,
        lines,
        gap: gap.then_some(f64::from(bucket) * 1.5),
    };
    let series =
        |run: &Run<'_>, label: &str, agg: Agg, f: &dyn Fn(&SecondPoint) -> Option<f64>| -> Line {
            let points = run
                .report
                .series
                .iter()
                .filter_map(|s| f(s).map(|v| (s.sec, v)));
            named(run, label, downsample(points, bucket, agg, end))
        };
    let mut out = vec![users_panel(runs, &series, &chart)];
    message_panels(runs, &series, &chart, &mut out);
    latency_panels(runs, &series, &chart, &mut out);
    // A run without errors gets a sentence instead of a flat line ([`body`]).
    if any_errors(runs) {
        out.push(errors_panel(runs, &series, &chart));
    }
    processes(runs, bucket, end, &mut out, &chart);
    scraped(runs, bucket, end, &mut out, &chart);
    if runs.len() > 1 {
        color_by_metric(runs.len(), &mut out);
    }
    out
}

/// The first run's chaos steps, as marks on every chart.
fn chaos_marks(runs: &[Run<'_>]) -> Vec<Mark> {
    runs.first()
        .map(|r| {
            r.report
                .chaos
                .iter()
                .map(|c| Mark {
                    from: c.effect.from_s,
                    to: c.effect.to_s,
                    label: format!("{} {}", c.step.key, c.step.action),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Users online and logins per second.
fn users_panel(runs: &[Run<'_>], series: &SeriesOf<'_>, chart: &MakeChart<'_>) -> Panel {
    let mut users = Vec::new();
    for run in runs {
        users.push(series(run, "users online", Agg::Max, &|s| {
            Some(s.online as f64)
        }));
        users.push(series(run, "logins/s", Agg::Rate, &|s| {
            Some(s.logins as f64)
        }));
    }
    Panel {
        heading: "Users online and logins".to_owned(),
        why: "Users logged in at each moment, and logins completed per second.".to_owned(),
        chart: chart(
            "users",
            "users online and logins per second",
            YUnit::Count,
            users,
            false,
        ),
    }
}

/// Messages per second, and request replies per second when there were any.
fn message_panels(
    runs: &[Run<'_>],
    series: &SeriesOf<'_>,
    chart: &MakeChart<'_>,
    out: &mut Vec<Panel>,
) {
    let mut msgs = Vec::new();
    for run in runs {
        let r = run.report;
        msgs.push(series(run, "sent/s", Agg::Rate, &|s| Some(s.sent as f64)));
        if r.acceptance {
            msgs.push(series(run, "accepted/s", Agg::Rate, &|s| {
                Some(s.accepted as f64)
            }));
        }
        msgs.push(series(run, "received/s", Agg::Rate, &|s| {
            Some(s.received as f64)
        }));
    }
    out.push(Panel {
        heading: "Messages per second".to_owned(),
        why: "Messages sent, accepted by the server and delivered, per second.".to_owned(),
        chart: chart("messages", "messages per second", YUnit::Count, msgs, false),
    });
    // Requests run at their own scale (thousands per second against a few messages).
    if runs
        .iter()
        .any(|r| r.report.series.iter().any(|s| s.replies > 0))
    {
        let replies = runs
            .iter()
            .map(|run| series(run, "replies/s", Agg::Rate, &|s| Some(s.replies as f64)))
            .collect();
        out.push(Panel {
            heading: "Request replies per second".to_owned(),
            why: "Replies to requests (the request/response traffic) per second.".to_owned(),
            chart: chart(
                "replies",
                "request replies per second",
                YUnit::Count,
                replies,
                false,
            ),
        });
    }
}

/// One panel per latency of the per-second series that has samples (or, on a live page,
/// will have).
fn latency_panels(
    runs: &[Run<'_>],
    series: &SeriesOf<'_>,
    chart: &MakeChart<'_>,
    out: &mut Vec<Panel>,
) {
    type Pick = fn(&SecondPoint) -> Spread;
    let latencies: [(&str, &str, &str, Pick); 3] = [
        (
            "e2e",
            "End-to-end latency",
            "From when a message was due to when a recipient had it.",
            |s| s.e2e,
        ),
        (
            "ack",
            "Send → ack latency",
            "From when a message was due to the server's acceptance.",
            |s| s.ack,
        ),
        (
            "request",
            "Request round trip",
            "From a request to its reply.",
            |s| s.request,
        ),
    ];
    // A live page keeps the panels it will have from its first second, empty until the
    // first second with samples is over, so that the page does not change shape.
    let live = runs.iter().any(|r| r.report.live.is_some());
    let acceptance = runs.iter().any(|r| r.report.acceptance);
    for (id, heading, why, pick) in latencies {
        let shown_empty = live && (id == "e2e" || (id == "ack" && acceptance));
        if !shown_empty
            && !runs
                .iter()
                .any(|r| r.report.series.iter().any(|s| pick(s).count > 0))
        {
            continue;
        }
        let mut lines = Vec::new();
        for run in runs {
            let ms = |v: u64| v as f64 / 1000.0;
            lines.push(series(run, "p50", Agg::Mean, &|s| {
                let x = pick(s);
                (x.count > 0).then(|| ms(x.p50))
            }));
            lines.push(series(run, "p99", Agg::Max, &|s| {
                let x = pick(s);
                (x.count > 0).then(|| ms(x.p99))
            }));
            lines.push(series(run, "max", Agg::Max, &|s| {
                let x = pick(s);
                (x.count > 0).then(|| ms(x.max))
            }));
        }
        out.push(Panel {
            heading: format!("{heading} per second"),
            why: format!("{why} Median, 99th percentile and highest of each second."),
            chart: chart(id, heading, YUnit::Ms, lines, true),
        });
    }
}

/// Errors per second, a line per kind.
fn errors_panel(runs: &[Run<'_>], series: &SeriesOf<'_>, chart: &MakeChart<'_>) -> Panel {
    Panel {
        heading: "Errors per second, by kind".to_owned(),
        why: "Failures per second, one line per kind that occurred; what each kind means \
                  and examples are in the errors table below."
            .to_owned(),
        chart: chart(
            "errors",
            "errors per second",
            YUnit::Count,
            error_lines(runs, series),
            false,
        ),
    }
}

/// Overlaid runs with the same lines: one colour per metric (the base run's dashed).
fn color_by_metric(runs: usize, panels: &mut [Panel]) {
    for p in panels {
        let lines = &mut p.chart.lines;
        if lines.len() % runs == 0 {
            let per = lines.len() / runs;
            for (i, l) in lines.iter_mut().enumerate() {
                l.color = Some(i % per);
            }
        }
    }
}

/// A line of `run` with its legend prefix and dash.
fn named(run: &Run<'_>, label: &str, points: Vec<(f64, f64)>) -> Line {
    let mut line = Line::new(
        match run.label {
            Some(prefix) => format!("{prefix}: {label}"),
            None => label.to_owned(),
        },
        points,
    );
    line.dashed = run.dashed;
    line
}

type MakeChart<'c> = dyn Fn(&str, &str, YUnit, Vec<Line>, bool) -> Chart + 'c;

/// CPU and memory of every monitored process.
fn processes(runs: &[Run<'_>], bucket: u32, end: f64, out: &mut Vec<Panel>, chart: &MakeChart<'_>) {
    if runs.iter().all(|r| r.report.processes.is_empty()) {
        return;
    }
    let (mut cpu, mut mem) = (Vec::new(), Vec::new());
    for run in runs {
        let shards = run.report.generators.len() > 1;
        for p in &run.report.processes {
            let name = if shards {
                format!("{} pid {} (shard {})", p.name, p.pid, p.shard)
            } else {
                format!("{} pid {}", p.name, p.pid)
            };
            let points = p.series.iter().map(|s| (s.0, f64::from(s.1)));
            cpu.push(named(
                run,
                &name,
                downsample(points, bucket, Agg::Mean, end),
            ));
            let points = p.series.iter().map(|s| (s.0, s.2 as f64 / 1048576.0));
            mem.push(named(run, &name, downsample(points, bucket, Agg::Max, end)));
        }
    }
    out.push(Panel {
        heading: "CPU of the monitored processes".to_owned(),
        why: "% of one core: 100% is one busy core, so a process at cores × 100% is saturated."
            .to_owned(),
        chart: chart("cpu", "CPU, % of one core", YUnit::Percent, cpu, true),
    });
    out.push(Panel {
        heading: "Memory of the monitored processes".to_owned(),
        why: "Resident memory (RSS).".to_owned(),
        chart: chart("memory", "resident memory", YUnit::Mib, mem, true),
    });
}

/// One chart per scraped metric (name at an endpoint), a line per label set.
fn scraped(runs: &[Run<'_>], bucket: u32, end: f64, out: &mut Vec<Panel>, chart: &MakeChart<'_>) {
    // (endpoint, name) → lines, in the order first seen.
    let mut groups: Vec<((String, String), bool, Vec<Line>)> = Vec::new();
    for run in runs {
        for s in run.report.server_metrics.iter().filter(|s| !constant(s)) {
            let key = (s.endpoint.clone(), s.name.clone());
            let idx = match groups.iter().position(|g| g.0 == key) {
                Some(i) => i,
                None => {
                    groups.push((key, s.counter, Vec::new()));
                    groups.len() - 1
                }
            };
            let lines = &mut groups[idx].2;
            if lines.len() >= MAX_SCRAPED_LINES * runs.len() {
                continue;
            }
            let points: Vec<(u32, f64)> = if s.counter {
                // A counter's rate between samples; a drop is a restart, not a rate.
                s.points
                    .windows(2)
                    .filter(|w| w[1].1 >= w[0].1 && w[1].0 > w[0].0)
                    .map(|w| (w[1].0, (w[1].1 - w[0].1) / f64::from(w[1].0 - w[0].0)))
                    .collect()
            } else {
                s.points.clone()
            };
            let label = if s.labels.is_empty() {
                s.name.clone()
            } else {
                s.display_name()[s.name.len()..].to_owned()
            };
            lines.push(named(
                run,
                &label,
                downsample(points, bucket, Agg::Mean, end),
            ));
        }
    }
    for (i, ((endpoint, name), counter, lines)) in groups.into_iter().enumerate() {
        out.push(Panel {
            heading: format!("{name}{}", if counter { " (per second)" } else { "" }),
            why: format!("Scraped from {endpoint} once a second."),
            chart: chart(&format!("scraped-{i}"), &name, YUnit::Count, lines, true),
        });
    }
}

/// Makes one run's line from a value of each second ([`panels`]' `series`).
type SeriesOf<'a> = dyn Fn(&Run<'_>, &str, Agg, &dyn Fn(&SecondPoint) -> Option<f64>) -> Line + 'a;

/// One line per error kind that occurred in any of `runs` (per run when overlaid), and one
/// for errors of unknown kind (seconds of result files written before kinds were counted
/// per second).
fn error_lines(runs: &[Run<'_>], series: &SeriesOf<'_>) -> Vec<Line> {
    let kinds: std::collections::BTreeSet<ErrorKind> = runs
        .iter()
        .flat_map(|r| r.report.series.iter())
        .flat_map(|s| s.error_kinds.keys().copied())
        .collect();
    let unknown = |s: &SecondPoint| s.errors - s.error_kinds.values().sum::<u64>().min(s.errors);
    let mut lines = Vec::new();
    for run in runs {
        for &kind in &kinds {
            lines.push(series(run, kind.name(), Agg::Rate, &|s| {
                Some(s.error_kinds.get(&kind).copied().unwrap_or(0) as f64)
            }));
        }
        if run.report.series.iter().any(|s| unknown(s) > 0) {
            lines.push(series(run, "kind not recorded", Agg::Rate, &|s| {
                Some(unknown(s) as f64)
            }));
        }
    }
    lines
}

/// Whether any second of `runs` had an error.
fn any_errors(runs: &[Run<'_>]) -> bool {
    runs.iter()
        .any(|r| r.report.series.iter().any(|s| s.errors > 0))
}

/// Whether a scraped series never moved (a counter that never grew, a steady gauge):
/// listed under the charts rather than drawn as a flat line.
fn constant(s: &ScrapedSeries) -> bool {
    s.points.windows(2).all(|w| w[0].1 == w[1].1)
}

/// `name{labels} = value` of every constant scraped series of `runs`.
fn constant_series(runs: &[Run<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for run in runs {
        for s in run.report.server_metrics.iter().filter(|s| constant(s)) {
            let value = s.points.first().map_or(f64::NAN, |p| p.1);
            let prefix = run.label.map_or_else(String::new, |l| format!("{l}: "));
            out.push(format!("{prefix}{} = {value}", s.display_name()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_runs_are_bucketed() {
        assert_eq!(bucket_for(30.0), 1);
        assert_eq!(bucket_for(3600.0), 6);
        let rate = downsample([(0, 6.0), (5, 6.0), (13, 3.0)], 6, Agg::Rate, 18.0);
        assert_eq!(rate, vec![(0.0, 2.0), (6.0, 0.0), (12.0, 0.5)]);
        let max = downsample([(0, 1.0), (5, 7.0), (13, 3.0)], 6, Agg::Max, 18.0);
        assert_eq!(max, vec![(0.0, 7.0), (12.0, 3.0)]);
        let mean = downsample([(0, 1.0), (5, 7.0)], 6, Agg::Mean, 18.0);
        assert_eq!(mean, vec![(0.0, 4.0)]);
    }
}
