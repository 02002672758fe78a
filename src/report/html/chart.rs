//! Line charts as inline SVG, drawn on the server side.
//!
//! Written by hand rather than with a plotting crate or a JavaScript library: the page
//! needs only line charts on a shared time axis, a percentile plot and a sweep plot, and
//! a few hundred lines of SVG text give exact control over size and layout with no
//! dependency, no script needed to see a chart, and a file that opens anywhere (see
//! docs/result.md, "report.html"). A plotting crate (plotters) would add its own font
//! and backend stack for the same paths; a JS library would have to be vendored and
//! inlined into every report.

use std::fmt::Write;

use super::esc;

/// Width of a chart, in SVG units (the page scales it to its column).
pub const WIDTH: f64 = 960.0;
/// Height of a chart's plot area plus its axes.
const HEIGHT: f64 = 220.0;
/// Left margin: room for the y tick labels.
pub const LEFT: f64 = 70.0;
/// Right margin: room for half of the last x tick label.
pub const RIGHT: f64 = 34.0;
/// Bottom margin: room for the x tick labels.
const BOTTOM: f64 = 28.0;
/// Height of one legend row.
const LEGEND_ROW: f64 = 18.0;

/// Line colours, distinguishable also for the common colour-vision deficiencies
/// (Okabe–Ito, with black last).
pub const COLORS: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000",
];

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Line {
    /// Legend text.
    pub label: String,
    /// (x, y) points in x order.
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (the base run of a comparison).
    pub dashed: bool,
    /// Index into [`COLORS`]; by position when unset.
    pub color: Option<usize>,
}

impl Line {
    /// A solid line.
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Line {
        Line {
            label: label.into(),
            points,
            dashed: false,
            color: None,
        }
    }
}

/// What the x axis shows.
#[derive(Debug, Clone)]
pub enum XAxis {
    /// Seconds of the run, from 0 to this end; charts with the same end line up and share
    /// the page's cross-hair.
    Time(f64),
    /// Percentiles: x is `log10(1 / (1 - q))`, up to this many nines.
    Percentile(f64),
    /// Named steps at x = 0, 1, 2, ….
    Steps(Vec<String>),
}

/// How y values are labelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YUnit {
    /// Plain numbers (`1.5k`).
    Count,
    /// Milliseconds.
    Ms,
    /// Percent.
    Percent,
    /// MiB.
    Mib,
}

/// A chart to draw.
#[derive(Debug, Clone)]
pub struct Chart {
    /// DOM id of the `<svg>`.
    pub id: String,
    /// Accessible title.
    pub title: String,
    /// The x axis.
    pub x: XAxis,
    /// How y values are labelled.
    pub y: YUnit,
    /// The lines, each in its own colour.
    pub lines: Vec<Line>,
    /// A gap in x wider than this breaks a line (no samples there), when set.
    pub gap: Option<f64>,
    /// Spans of x to mark (the chaos steps of a run), each with its label.
    pub marks: Vec<Mark>,
}

/// A marked span of a time chart: a chaos step from `from` to `to` (equal: an instant).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Start, in x units.
    pub from: f64,
    /// End, in x units.
    pub to: f64,
    /// What it is (`chaos[0] kill`).
    pub label: String,
}

impl Chart {
    /// The SVG element.
    pub fn svg(&self) -> String {
        let legend_rows = legend_layout(&self.lines);
        let top = 8.0 + LEGEND_ROW * legend_rows.iter().map(|r| r.1 + 1.0).fold(0.0, f64::max);
        let height = top + HEIGHT;
        let plot = Plot {
            x0: LEFT,
            x1: WIDTH - RIGHT,
            y0: top,
            y1: height - BOTTOM,
        };
        let (dx0, dx1) = self.x_domain();
        let ymax = self
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let (ystep, ytop) = nice_scale(ymax);
        let f = Frame {
            plot,
            dx0,
            dx1,
            ytop,
        };
        let mut s = String::new();
        let time = matches!(self.x, XAxis::Time(_));
        let _ = write!(
            s,
            r#"<svg id="{}" class="chart{}" viewBox="0 0 {WIDTH} {height}" role="img" data-x0="{dx0}" data-x1="{dx1}" data-l="{}" data-r="{}" data-t="{}" data-b="{}"><title>{}</title>"#,
            esc(&self.id),
            if time { " tc" } else { "" },
            f.plot.x0,
            f.plot.x1,
            f.plot.y0,
            f.plot.y1,
            esc(&crate::untrusted::quote(&self.title))
        );
        self.grid(&mut s, &f, ystep);
        self.lines_svg(&mut s, &f);
        self.legend(&mut s, &f, &legend_rows);
        if self.lines.iter().all(|l| l.points.is_empty()) {
            let _ = write!(
                s,
                r#"<text class="empty" x="{:.1}" y="{:.1}" text-anchor="middle">no samples</text>"#,
                (f.plot.x0 + f.plot.x1) / 2.0,
                (f.plot.y0 + f.plot.y1) / 2.0
            );
        }
        s.push_str("</svg>");
        s
    }

    /// The y grid and ticks, the marked spans, the x ticks and the frame.
    fn grid(&self, s: &mut String, f: &Frame, ystep: f64) {
        // Grid and y ticks.
        let mut v = 0.0;
        while v <= f.ytop + ystep / 2.0 {
            let y = f.y(v);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
                f.plot.x0,
                f.plot.x1,
                f.plot.x0 - 6.0,
                y + 4.0,
                esc(&y_label(self.y, v, ystep))
            );
            v += ystep;
        }
        for m in &self.marks {
            let (a, b) = (f.x(m.from.max(f.dx0)), f.x(m.to.min(f.dx1)));
            let _ = write!(
                s,
                r#"<rect class="mark" x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{}</title></rect><text class="marktext" x="{:.1}" y="{:.1}">{}</text>"#,
                f.plot.y0,
                (b - a).max(2.0),
                f.plot.y1 - f.plot.y0,
                esc(&crate::untrusted::quote(&m.label)),
                a + 3.0,
                f.plot.y0 + 12.0,
                esc(&crate::untrusted::quote(&m.label))
            );
        }
        // X ticks.
        for (x, label) in self.x_ticks(f.dx0, f.dx1) {
            let px = f.x(x);
            let _ = write!(
                s,
                r#"<line class="grid" x1="{px:.1}" x2="{px:.1}" y1="{:.1}" y2="{:.1}"/><text class="tick" x="{px:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                f.plot.y0,
                f.plot.y1,
                f.plot.y1 + 18.0,
                esc(&label)
            );
        }
        let _ = write!(
            s,
            r#"<rect class="frame" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"/>"#,
            f.plot.x0,
            f.plot.y0,
            f.plot.x1 - f.plot.x0,
            f.plot.y1 - f.plot.y0
        );
    }

    /// The lines, each a path broken at gaps.
    fn lines_svg(&self, s: &mut String, f: &Frame) {
        for (i, line) in self.lines.iter().enumerate() {
            let color = COLORS[line.color.unwrap_or(i) % COLORS.len()];
            let mut d = String::new();
            let mut last: Option<f64> = None;
            for &(x, y) in line.points.iter().filter(|p| p.1.is_finite()) {
                let jump = match (last, self.gap) {
                    (None, _) => true,
                    (Some(lx), Some(gap)) => x - lx > gap,
                    (Some(_), None) => false,
                };
                let _ = write!(
                    d,
                    "{}{:.1} {:.1}",
                    if jump { "M" } else { "L" },
                    f.x(x),
                    f.y(y)
                );
                last = Some(x);
            }
            // A single point (or every segment one point long) still shows as a dot.
            let lone = line.points.len() == 1;
            let _ = write!(
                s,
                r#"<path class="series{}" stroke="{color}" d="{d}"{}><title>{}</title></path>"#,
                if line.dashed { " dashed" } else { "" },
                if lone {
                    r#" stroke-width="6" stroke-linecap="round""#
                } else {
                    ""
                },
                esc(&crate::untrusted::quote(&line.label))
            );
        }
    }

    /// The legend, an entry a line, laid out in `rows`.
    fn legend(&self, s: &mut String, f: &Frame, rows: &[(f64, f64)]) {
        for (i, (line, (x, row))) in self.lines.iter().zip(rows).enumerate() {
            let color = COLORS[line.color.unwrap_or(i) % COLORS.len()];
            let y = 8.0 + row * LEGEND_ROW;
            let _ = write!(
                s,
                r#"<g class="legend"><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="3"{}/><text x="{:.1}" y="{:.1}">{}</text></g>"#,
                f.plot.x0 + x,
                f.plot.x0 + x + 18.0,
                y + 6.0,
                y + 6.0,
                if line.dashed {
                    r#" stroke-dasharray="5 3""#
                } else {
                    ""
                },
                f.plot.x0 + x + 23.0,
                y + 10.0,
                esc(&crate::untrusted::quote(&line.label))
            );
        }
    }

    fn x_domain(&self) -> (f64, f64) {
        match &self.x {
            XAxis::Time(end) => (0.0, end.max(1.0)),
            XAxis::Percentile(nines) => (0.0, nines.max(1.0)),
            XAxis::Steps(names) => (-0.25, (names.len() as f64 - 0.75).max(0.25)),
        }
    }

    fn x_ticks(&self, dx0: f64, dx1: f64) -> Vec<(f64, String)> {
        match &self.x {
            XAxis::Time(_) => {
                let span = dx1 - dx0;
                let step = [
                    1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
                    3600.0, 7200.0, 14400.0, 43200.0, 86400.0,
                ]
                .into_iter()
                .find(|s| span / s <= 12.0)
                .unwrap_or(86400.0);
                let mut ticks = Vec::new();
                let mut t = 0.0;
                while t <= dx1 + 1e-9 {
                    ticks.push((t, time_label(t, dx1)));
                    t += step;
                }
                ticks
            }
            XAxis::Percentile(_) => {
                let mut ticks = Vec::new();
                let mut n = 0.0;
                while n <= dx1 + 1e-9 {
                    ticks.push((n, nines_label(n)));
                    n += 1.0;
                }
                ticks
            }
            XAxis::Steps(names) => names
                .iter()
                .enumerate()
                .map(|(i, n)| (i as f64, n.clone()))
                .collect(),
        }
    }
}

/// The plot area, in SVG units.
struct Plot {
    x0: f64,
    x1: f64,
    y0: f64,
    y1: f64,
}

/// The plot area with the domains it shows: x from `dx0` to `dx1`, y from 0 to `ytop`.
struct Frame {
    plot: Plot,
    dx0: f64,
    dx1: f64,
    ytop: f64,
}

impl Frame {
    /// An x value's position.
    fn x(&self, x: f64) -> f64 {
        let p = &self.plot;
        p.x0 + (x - self.dx0) / (self.dx1 - self.dx0).max(1e-9) * (p.x1 - p.x0)
    }

    /// A y value's position.
    fn y(&self, y: f64) -> f64 {
        let p = &self.plot;
        p.y1 - y / self.ytop * (p.y1 - p.y0)
    }
}

/// Each legend entry's (x offset, row), wrapping at the plot's width.
fn legend_layout(lines: &[Line]) -> Vec<(f64, f64)> {
    let room = WIDTH - LEFT - RIGHT;
    let mut out = Vec::with_capacity(lines.len());
    let (mut x, mut row) = (0.0, 0.0);
    for l in lines {
        // About 7 units per character at the legend's 12-unit font.
        let w = 23.0 + 7.0 * l.label.chars().count() as f64 + 18.0;
        if x > 0.0 && x + w > room {
            x = 0.0;
            row += 1.0;
        }
        out.push((x, row));
        x += w;
    }
    out
}

/// A tick step of 1, 2 or 5 × 10ⁿ giving about four intervals up to `max`, and the top of
/// the axis (a multiple of the step at or above `max`).
fn nice_scale(max: f64) -> (f64, f64) {
    let max = if max > 0.0 { max } else { 1.0 };
    let raw = max / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    (step, (max / step).ceil().max(1.0) * step)
}

/// A y tick label.
fn y_label(unit: YUnit, v: f64, step: f64) -> String {
    // As many decimals as the step needs.
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };
    let num = |v: f64| {
        if v >= 1e6 && step >= 1e5 {
            format!("{:.1}M", v / 1e6)
        } else if v >= 1e4 && step >= 1e3 {
            format!("{:.0}k", v / 1e3)
        } else {
            format!("{v:.decimals$}")
        }
    };
    match unit {
        YUnit::Count => num(v),
        YUnit::Ms => format!("{} ms", num(v)),
        YUnit::Percent => format!("{}%", num(v)),
        YUnit::Mib => format!("{} MiB", num(v)),
    }
}

/// `45 s`, or `12:30` (minutes) when the axis is two minutes or longer.
pub fn time_label(t: f64, end: f64) -> String {
    let t = t.round() as u64;
    if end < 120.0 {
        format!("{t} s")
    } else if end < 36000.0 {
        format!("{}:{:02}", t / 60, t % 60)
    } else {
        format!("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60)
    }
}

/// `0%`, `90%`, `99%`, `99.9%`, … for x = 0, 1, 2, 3.
fn nines_label(n: f64) -> String {
    match n.round() as u32 {
        0 => "0%".to_owned(),
        1 => "90%".to_owned(),
        k => format!("99.{}%", "9".repeat(k as usize - 2)).replace(".%", "%"),
    }
}

/// The x position of quantile `q` on a percentile axis: `log10(1 / (1 - q))`.
pub fn nines(q: f64, most: f64) -> f64 {
    if q >= 1.0 {
        most
    } else {
        (1.0 / (1.0 - q)).log10().min(most)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales_are_round() {
        assert_eq!(nice_scale(0.0), (0.5, 1.0));
        assert_eq!(nice_scale(7.0), (2.0, 8.0));
        assert_eq!(nice_scale(950.0), (500.0, 1000.0));
        assert_eq!(nice_scale(1234.0), (500.0, 1500.0));
    }

    #[test]
    fn axis_labels() {
        assert_eq!(nines_label(0.0), "0%");
        assert_eq!(nines_label(1.0), "90%");
        assert_eq!(nines_label(2.0), "99%");
        assert_eq!(nines_label(4.0), "99.99%");
        assert_eq!(time_label(90.0, 100.0), "90 s");
        assert_eq!(time_label(90.0, 600.0), "1:30");
        assert_eq!(y_label(YUnit::Ms, 2.5, 0.5), "2.5 ms");
        assert_eq!(y_label(YUnit::Count, 20000.0, 5000.0), "20k");
        assert!((nines(0.99, 5.0) - 2.0).abs() < 1e-9);
        assert_eq!(nines(1.0, 5.0), 5.0);
    }

    #[test]
    fn a_gap_breaks_a_line() {
        let chart = Chart {
            marks: Vec::new(),
            id: "c".to_owned(),
            title: "t".to_owned(),
            x: XAxis::Time(10.0),
            y: YUnit::Count,
            lines: vec![Line::new(
                "a<b",
                vec![(0.0, 1.0), (1.0, 2.0), (5.0, 1.0), (6.0, 1.0)],
            )],
            gap: Some(1.5),
        };
        let svg = chart.svg();
        let d = svg.split(" d=\"").nth(1).and_then(|s| s.split('"').next());
        assert_eq!(d.map(|d| d.matches('M').count()), Some(2), "{svg}");
        assert!(svg.contains("a&lt;b"), "labels are escaped");
    }
}
