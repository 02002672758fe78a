//! The offered shape of a population, charted: users online over the run (planned next to
//! actual), logins per second (planned next to actual), the session lengths and group
//! sizes by powers of two, and the share of the messages the most active users send
//! (from `population` in the result file and the per-second series); and the table of
//! the split where the shape matters.

use std::fmt::Write as _;

use super::chart::{Chart, Line, XAxis, YUnit};
use super::esc;
use super::page::{section, table};
use crate::report::model::Report;
use crate::report::split::{cells, SplitRow, HEAD};
use crate::vocab::offered::{Offered, LOGIN_BUCKETS};

/// A chart under its heading and caption.
struct Panel {
    heading: &'static str,
    why: &'static str,
    chart: Chart,
}

/// The offered shape's section, when the run's population has one.
pub fn section_of(out: &mut String, r: &Report) {
    let Some(o) = &r.population else { return };
    let mut panels = time_panels(r, o);
    panels.extend(histogram_panels(o));
    let mut body = String::new();
    for p in panels
        .iter()
        .filter(|p| p.chart.lines.iter().any(|l| !l.points.is_empty()))
    {
        let _ = write!(
            body,
            "<h3>{}</h3><p class=\"why\">{}</p>{}",
            esc(p.heading),
            esc(p.why),
            p.chart.svg()
        );
    }
    if !body.is_empty() {
        section(
            out,
            "shape",
            "The offered shape",
            "The population's shape as the plan asked for it, next to what the run did where \
             the run measures it.",
            &body,
        );
    }
}

/// A chart of `lines` over the run's seconds, up to `end`.
fn over_time(id: &str, title: &str, end: f64, lines: Vec<Line>) -> Chart {
    Chart {
        id: id.to_owned(),
        title: title.to_owned(),
        x: XAxis::Time(end),
        y: YUnit::Count,
        lines,
        gap: None,
        marks: Vec::new(),
    }
}

/// Users online and logins per second, planned next to actual. The day starts with the
/// traffic: the first second anything was sent.
fn time_panels(r: &Report, o: &Offered) -> Vec<Panel> {
    let Some(start) = r
        .series
        .iter()
        .find(|p| p.sent > 0)
        .map(|p| f64::from(p.sec))
    else {
        return Vec::new();
    };
    let end = r.series.last().map_or(1.0, |p| f64::from(p.sec) + 1.0);
    let day_s = o.day_ms as f64 / 1000.0;
    let actual = |f: fn(&crate::report::series::SecondPoint) -> u64| {
        let points = r
            .series
            .iter()
            .map(|p| (f64::from(p.sec), f(p) as f64))
            .collect();
        Line::new("actual", points)
    };
    let mut out = Vec::new();
    if !o.online.is_empty() {
        let step = day_s / (o.online.len().max(2) - 1) as f64;
        let at = |k: usize| start + k as f64 * step;
        let planned = o.online.iter().enumerate().map(|(k, &n)| (at(k), n as f64));
        out.push(Panel {
            heading: "Users online",
            why: "Users online as the plan put them (planned, at 13 moments of the day, the \
                  day starting with the first send) and each second as they were (actual): a \
                  gap is users who could not log in or were cut off.",
            chart: over_time(
                "shape-online",
                "users online",
                end,
                vec![
                    Line::new("planned", planned.collect()),
                    actual(|p| p.online),
                ],
            ),
        });
    }
    if !o.logins.is_empty() {
        let bucket_s = day_s / f64::from(LOGIN_BUCKETS);
        let rate = |(b, &n): (usize, &u64)| {
            (
                start + (b as f64 + 0.5) * bucket_s,
                n as f64 / bucket_s.max(1e-9),
            )
        };
        out.push(Panel {
            heading: "Logins per second",
            why: "Logins the plan asked for (each 1/60 of the day, as a rate; the users online \
                  at the day's start log in before it) and the logins that succeeded each \
                  second: the login wave and every return.",
            chart: over_time(
                "shape-logins",
                "logins per second",
                end,
                vec![
                    Line::new("planned", o.logins.iter().enumerate().map(rate).collect()),
                    actual(|p| p.logins),
                ],
            ),
        });
    }
    out
}

/// A chart of one line over named steps.
fn steps(id: &str, title: &str, y: YUnit, labels: Vec<String>, line: Line) -> Chart {
    Chart {
        id: id.to_owned(),
        title: title.to_owned(),
        x: XAxis::Steps(labels),
        y,
        lines: vec![line],
        gap: None,
        marks: Vec::new(),
    }
}

/// The labels and points of a `[upper bound, count]` histogram.
fn buckets(h: &[[u64; 2]], label: fn(u64) -> String) -> (Vec<String>, Vec<(f64, f64)>) {
    let labels = h.iter().map(|&[upper, _]| label(upper)).collect();
    let points = h
        .iter()
        .enumerate()
        .map(|(i, &[_, n])| (i as f64, n as f64))
        .collect();
    (labels, points)
}

/// Session lengths, group sizes and the top senders' shares.
fn histogram_panels(o: &Offered) -> Vec<Panel> {
    let (labels, points) = buckets(&o.session_hist, |ms| {
        humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
    });
    let sessions = Panel {
        heading: "Session lengths",
        why: "Sessions planned by length, up to each power of two of milliseconds: most \
              short, a few all day.",
        chart: steps(
            "shape-sessions",
            "sessions by length",
            YUnit::Count,
            labels,
            Line::new("sessions", points),
        ),
    };
    let (labels, points) = buckets(&o.group_hist, |n| format!("≤ {n}"));
    let groups = Panel {
        heading: "Group sizes",
        why: "Groups by members, up to each power of two: most small, a few large.",
        chart: steps(
            "shape-groups",
            "groups by size",
            YUnit::Count,
            labels,
            Line::new("groups", points),
        ),
    };
    let labels = o
        .top_shares
        .iter()
        .map(|&[f, _]| format!("top {}%", f * 100.0))
        .collect();
    let points = o
        .top_shares
        .iter()
        .enumerate()
        .map(|(i, &[_, s])| (i as f64, s * 100.0))
        .collect();
    let senders = Panel {
        heading: "Who sends",
        why: "The share of the messages to contacts that the most active users send: the \
              top 1% and 10% are what a uniform load has not.",
        chart: steps(
            "shape-senders",
            "share of the messages",
            YUnit::Percent,
            labels,
            Line::new("share of messages", points),
        ),
    };
    vec![sessions, groups, senders]
}

/// The table of the split where the shape matters, when it has rows.
pub fn split_of(out: &mut String, rows: &[SplitRow]) {
    if rows.is_empty() {
        return;
    }
    let body = table(&HEAD, &rows.iter().map(cells).collect::<Vec<_>>());
    section(
        out,
        "split",
        "Where the shape matters",
        "Group messages by the size of their group (the largest group apart), every message \
         by the session phase it was due in (a second is in the login wave when the plan puts \
         more than twice the median second's logins in it), and each return's catch-up from \
         its login to the last missed message its sync fetched. Count: first intact copies \
         (returns, for sync); timed: those that came live, with their end-to-end latency.",
        &body,
    );
}
