//! The offered shape of a population, charted: users online over the run (planned next to
//! actual), logins per second (planned next to actual), the session lengths and group
//! sizes by powers of two, and the share of the messages the most active users send.
//! Everything comes from `population` in the result file and the per-second series.

use std::fmt::Write as _;

use super::chart::{Chart, Line, XAxis, YUnit};
use super::esc;
use super::page::section as page_section;
use crate::report::model::Report;
use crate::vocab::offered::LOGIN_BUCKETS;

/// The section, when the run's population has a shape.
pub fn section(out: &mut String, r: &Report) {
    let Some(o) = &r.population else { return };
    let end = r.series.last().map_or(1.0, |p| f64::from(p.sec) + 1.0);
    let mut body = String::new();
    let mut chart = |heading: &str, why: &str, c: Chart| {
        if c.lines.iter().any(|l| !l.points.is_empty()) {
            let _ = write!(
                body,
                "<h3>{}</h3><p class=\"why\">{}</p>{}",
                esc(heading),
                esc(why),
                c.svg()
            );
        }
    };
    let time = |id: &str, title: &str, lines: Vec<Line>| Chart {
        id: id.to_owned(),
        title: title.to_owned(),
        x: XAxis::Time(end),
        y: YUnit::Count,
        lines,
        gap: None,
        marks: Vec::new(),
    };
    let per_sec = |f: fn(&crate::report::series::SecondPoint) -> u64| {
        r.series
            .iter()
            .map(|p| (f64::from(p.sec), f(p) as f64))
            .collect::<Vec<_>>()
    };
    // The day starts with the traffic: the first second anything was sent.
    let start = r
        .series
        .iter()
        .find(|p| p.sent > 0)
        .map(|p| f64::from(p.sec));
    let day_s = o.day_ms as f64 / 1000.0;
    if let (Some(start), false) = (start, o.online.is_empty()) {
        let step = day_s / (o.online.len().max(2) - 1) as f64;
        let asked = o
            .online
            .iter()
            .enumerate()
            .map(|(k, &n)| (start + k as f64 * step, n as f64))
            .collect();
        chart(
            "Users online",
            "Users online as the plan put them (planned, at 13 moments of the day, the day \
             starting with the first send) and each second as they were (actual): a gap is \
             users who could not log in or were cut off.",
            time(
                "shape-online",
                "users online",
                vec![
                    Line::new("planned", asked),
                    Line::new("actual", per_sec(|p| p.online)),
                ],
            ),
        );
    }
    if let (Some(start), false) = (start, o.logins.is_empty()) {
        let bucket_s = day_s / f64::from(LOGIN_BUCKETS);
        let asked = o
            .logins
            .iter()
            .enumerate()
            .map(|(b, &n)| {
                (
                    start + (b as f64 + 0.5) * bucket_s,
                    n as f64 / bucket_s.max(1e-9),
                )
            })
            .collect();
        chart(
            "Logins per second",
            "Logins the plan asked for (each 1/60 of the day, as a rate; the users online at \
             the day's start log in before it) and the logins that succeeded each second: the \
             login wave and every return.",
            time(
                "shape-logins",
                "logins per second",
                vec![
                    Line::new("planned", asked),
                    Line::new("actual", per_sec(|p| p.logins)),
                ],
            ),
        );
    }
    let steps = |id: &str, title: &str, y: YUnit, labels: Vec<String>, line: Line| Chart {
        id: id.to_owned(),
        title: title.to_owned(),
        x: XAxis::Steps(labels),
        y,
        lines: vec![line],
        gap: None,
        marks: Vec::new(),
    };
    let hist = |h: &[[u64; 2]], label: fn(u64) -> String| {
        let labels = h.iter().map(|&[upper, _]| label(upper)).collect();
        let points = h
            .iter()
            .enumerate()
            .map(|(i, &[_, n])| (i as f64, n as f64))
            .collect();
        (labels, points)
    };
    if !o.session_hist.is_empty() {
        let (labels, points) = hist(&o.session_hist, |ms| {
            humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
        });
        chart(
            "Session lengths",
            "Sessions planned by length, up to each power of two of milliseconds: most short, \
             a few all day.",
            steps(
                "shape-sessions",
                "sessions by length",
                YUnit::Count,
                labels,
                Line::new("sessions", points),
            ),
        );
    }
    if !o.group_hist.is_empty() {
        let (labels, points) = hist(&o.group_hist, |n| format!("≤ {n}"));
        chart(
            "Group sizes",
            "Groups by members, up to each power of two: most small, a few large.",
            steps(
                "shape-groups",
                "groups by size",
                YUnit::Count,
                labels,
                Line::new("groups", points),
            ),
        );
    }
    if !o.top_shares.is_empty() {
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
        chart(
            "Who sends",
            "The share of the messages to contacts that the most active users send: the top \
             1% and 10% are what a uniform load has not.",
            steps(
                "shape-senders",
                "share of the messages",
                YUnit::Percent,
                labels,
                Line::new("share of messages", points),
            ),
        );
    }
    if !body.is_empty() {
        page_section(
            out,
            "shape",
            "The offered shape",
            "The population's shape as the plan asked for it, next to what the run did where \
             the run measures it.",
            &body,
        );
    }
}
