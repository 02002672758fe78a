//! The comparison as rendered: [`Compared`] (two runs, their files and the gates' outcomes)
//! in every format `compare` offers — terminal tables, JSON, an HTML page with the two runs'
//! time series overlaid (the base dashed), and Markdown for a pull-request comment. The
//! runs' names, keys and files are shown through [`crate::untrusted`].

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};

use serde::Serialize;

use super::gate::Outcome;
use super::{Change, Comparison, Kind, Row};
use crate::error::Result;
use crate::metrics::Hist;
use crate::report::format::{self, Format, Renderer};
use crate::report::html::chart::{self, Chart, Line, XAxis, YUnit};
use crate::report::html::timeline::{self, Run};
use crate::report::html::Html;
use crate::report::html::{esc, page};
use crate::report::json::Json;
use crate::report::markdown::{self, Markdown};
use crate::report::model::Report;
use crate::report::present::thousands;
use crate::report::text::Text;
use crate::untrusted::quote;

/// What "within noise" means, in one sentence.
pub const NOISE: &str = "within noise: latencies ±5% (p99 and p99.9 ±10%, max ±25%) and \
    never below 0.10 ms; rates and volumes ±2%; CPU and memory ±5%; delivery problems and \
    errors have no noise (any change counts)";

/// A comparison as `compare` renders it.
#[derive(Debug, Clone)]
pub struct Compared {
    /// The two runs compared.
    pub comparison: Comparison,
    /// The base and new result files, as given.
    pub files: [String; 2],
    /// Each `--fail-on` gate's outcome.
    pub gates: Vec<Outcome>,
}

/// The formats a comparison is rendered in.
const RENDERERS: [(Format, &dyn Renderer<Compared>); 4] = [
    (Format::Text, &Text),
    (Format::Json, &Json),
    (Format::Html, &Html),
    (Format::Markdown, &Markdown),
];

impl Compared {
    /// The renderer of format `f`; a format without one is a usage error.
    pub fn renderer(f: Format) -> Result<&'static dyn Renderer<Compared>> {
        format::pick(f, "a comparison", &RENDERERS)
    }

    fn files(&self) -> [&str; 2] {
        [self.files[0].as_str(), self.files[1].as_str()]
    }

    /// True when a gate failed.
    pub fn failed(&self) -> bool {
        self.gates.iter().any(|g| g.failed)
    }
}

impl Renderer<Compared> for Text {
    fn render(&self, c: &Compared) -> Result<String> {
        Ok(text(&c.comparison, c.files(), &c.gates))
    }
}

impl Renderer<Compared> for Html {
    fn render(&self, c: &Compared) -> Result<String> {
        Ok(html(&c.comparison, c.files(), &c.gates))
    }
}

/// One run of the JSON comparison.
#[derive(Serialize)]
struct Side<'a> {
    file: &'a str,
    scenario: &'a str,
    run_id: &'a str,
    started_at: &'a str,
    duration_s: f64,
    target: &'a str,
}

impl<'a> Side<'a> {
    fn of(r: &'a Report, file: &'a str) -> Side<'a> {
        Side {
            file,
            scenario: &r.scenario,
            run_id: &r.run_id,
            started_at: &r.started_at,
            duration_s: r.duration_s,
            target: &r.target,
        }
    }
}

/// The comparison as JSON (`compare --format json`): the verdict (`pass`, `fail`, or
/// `compared` without gates), the first line, both runs, every metric measured in either
/// and every gate.
impl Serialize for Compared {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct View<'a> {
            verdict: &'static str,
            headline: String,
            base: Side<'a>,
            new: Side<'a>,
            rows: Vec<&'a Row>,
            gates: &'a [Outcome],
        }
        let c = &self.comparison;
        View {
            verdict: match (self.failed(), self.gates.is_empty()) {
                (true, _) => "fail",
                (false, true) => "compared",
                (false, false) => "pass",
            },
            headline: headline(c, &self.gates),
            base: Side::of(&c.base, &self.files[0]),
            new: Side::of(&c.new, &self.files[1]),
            rows: measured(c).collect(),
            gates: &self.gates,
        }
        .serialize(s)
    }
}

/// The comparison as Markdown: the first line as a heading, both runs, the gates and the
/// metrics that changed beyond noise, then every metric in a collapsed section.
impl Renderer<Compared> for Markdown {
    fn render(&self, cmp: &Compared) -> Result<String> {
        let c = &cmp.comparison;
        let mark = match (cmp.failed(), cmp.gates.is_empty()) {
            (true, _) => "❌",
            (false, true) => "🔍",
            (false, false) => "✅",
        };
        let [base, new] = cmp.files();
        let mut out = format!(
            "## {mark} {}\n\n- base: {}\n- new: {}\n",
            markdown::cell(&headline(c, &cmp.gates)),
            markdown::cell(&side(&c.base, base)),
            markdown::cell(&side(&c.new, new))
        );
        if !cmp.gates.is_empty() {
            let rows: Vec<Vec<String>> = cmp
                .gates
                .iter()
                .map(|g| {
                    vec![
                        g.gate.clone(),
                        g.measured.clone(),
                        if g.failed { "❌ FAIL" } else { "✅ pass" }.to_owned(),
                    ]
                })
                .collect();
            markdown::table(
                &mut out,
                "Gates",
                &["gate", "measured", "result"],
                &rows,
                markdown::code,
            );
        }
        let header = ["metric", "base", "new", "change", "relative", "verdict"];
        let changed: Vec<Vec<String>> = measured(c)
            .filter(|r| matches!(r.change, Change::Better | Change::Worse))
            .map(cells)
            .collect();
        if !changed.is_empty() {
            markdown::table(
                &mut out,
                "Changed beyond noise",
                &header,
                &changed,
                markdown::code,
            );
        }
        let all: Vec<Vec<String>> = measured(c).map(cells).collect();
        out.push_str("\n<details><summary>Every metric</summary>\n");
        markdown::table(&mut out, "Every metric", &header, &all, markdown::code);
        let _ = write!(out, "\n({})\n\n</details>\n", markdown::cell(NOISE));
        Ok(out)
    }
}

/// The rows measured in either run, in report order.
fn measured(c: &Comparison) -> impl Iterator<Item = &Row> {
    c.rows
        .iter()
        .filter(|r| r.base.is_some() || r.new.is_some())
}

/// A value of `row` with its unit, `–` when not measured.
pub fn value(row: &Row, v: Option<f64>) -> String {
    let Some(v) = v else {
        return "–".to_owned();
    };
    match row.kind {
        Kind::Latency | Kind::Tail | Kind::Max => format!("{:.2} ms", v / 1000.0),
        Kind::Rate => format!("{v:.1}/s"),
        Kind::Volume | Kind::Problem => {
            if v < 0.0 {
                format!("-{}", thousands((-v).round() as u64))
            } else {
                thousands(v.round() as u64)
            }
        }
        Kind::Ratio => format!("{:.3}%", v * 100.0),
        Kind::Cpu => format!("{v:.0}%"),
        Kind::CpuSeconds => format!("{v:.2} s"),
        Kind::Bytes => format!("{:.1} MiB", v / 1048576.0),
    }
}

/// A change of `row` with its sign and unit.
pub fn signed(row: &Row, d: f64) -> String {
    if d == 0.0 {
        return "0".to_owned();
    }
    let sign = if d > 0.0 { "+" } else { "" };
    match row.kind {
        // Percentage points, not a percentage of a percentage.
        Kind::Ratio => format!("{sign}{:.3} pt", d * 100.0),
        Kind::Cpu => format!("{sign}{d:.0} pt"),
        _ => format!("{sign}{}", value(row, Some(d))),
    }
}

/// `+12.3%`, `-4.0%`, `new` (from zero).
pub fn relative(r: f64) -> String {
    if r.is_infinite() {
        "from 0".to_owned()
    } else {
        format!("{:+.1}%", r * 100.0)
    }
}

/// The cells of one row: metric, base, new, change, relative, verdict.
fn cells(row: &Row) -> Vec<String> {
    vec![
        quote(&row.key).into_owned(),
        value(row, row.base),
        value(row, row.new),
        row.delta()
            .map_or_else(|| "–".to_owned(), |d| signed(row, d)),
        row.relative().map_or_else(|| "–".to_owned(), relative),
        row.change.word().to_owned(),
    ]
}

/// The first line: the gates' verdict, or the count of changes when there are no gates.
pub fn headline(c: &Comparison, gates: &[Outcome]) -> String {
    let failed: Vec<_> = gates
        .iter()
        .filter(|g| g.failed)
        .map(|g| quote(&g.gate))
        .collect();
    let count = |ch: Change| c.rows.iter().filter(|r| r.change == ch).count();
    let tally = format!(
        "{} worse, {} better, {} within noise, {} unchanged",
        count(Change::Worse),
        count(Change::Better),
        count(Change::WithinNoise),
        count(Change::Unchanged)
    );
    if !failed.is_empty() {
        format!("FAIL: {} — {tally}", failed.join(", "))
    } else if gates.is_empty() {
        format!("COMPARED (no gates) — {tally}")
    } else {
        format!("PASS ({} gates) — {tally}", gates.len())
    }
}

fn side(r: &Report, file: &str) -> String {
    format!(
        "{}: scenario {}, run {}, started {}, {:.1} s, {}",
        quote(file),
        quote(&r.scenario),
        quote(&r.run_id),
        quote(&r.started_at),
        r.duration_s,
        quote(&r.target)
    )
}

/// The terminal comparison.
pub fn text(c: &Comparison, files: [&str; 2], gates: &[Outcome]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", headline(c, gates));
    let _ = writeln!(out, "base {}", side(&c.base, files[0]));
    let _ = writeln!(out, "new  {}", side(&c.new, files[1]));
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN);
    t.set_header(vec![
        "metric", "base", "new", "change", "relative", "verdict",
    ]);
    for i in 1..6 {
        if let Some(col) = t.column_mut(i) {
            col.set_cell_alignment(CellAlignment::Right);
        }
    }
    for row in measured(c) {
        t.add_row(cells(row));
    }
    let _ = writeln!(out, "\n{t}\n({NOISE})");
    if !gates.is_empty() {
        let _ = writeln!(out, "\ngates:");
        for g in gates {
            let _ = writeln!(
                out,
                "  {} {}: {}",
                if g.failed { "FAIL" } else { "pass" },
                quote(&g.gate),
                crate::untrusted::line(&g.measured)
            );
        }
    }
    out
}

/// The HTML comparison: verdict, gates, the metrics table, the time series and the
/// latency distributions of both runs overlaid.
pub fn html(c: &Comparison, files: [&str; 2], gates: &[Outcome]) -> String {
    let title = headline(c, gates);
    let class = if gates.iter().any(|g| g.failed) {
        "fail"
    } else if gates.is_empty() {
        "warn"
    } else {
        "pass"
    };
    let mut body = format!(
        r#"<header class="verdict {class}"><h1>{}</h1><p>base (dashed): {}<br>new (solid): {}</p></header>"#,
        esc(&title),
        esc(&side(&c.base, files[0])),
        esc(&side(&c.new, files[1]))
    );
    gates_section(&mut body, gates);
    let rows: Vec<Vec<String>> = measured(c)
        .map(|r| {
            let mut cells = cells(r);
            cells[0] = format!("{} ({})", quote(&r.label), quote(&r.key));
            cells
        })
        .collect();
    page::section(
        &mut body,
        "metrics",
        "Every headline metric",
        &format!("Change is new − base. Verdict {NOISE}."),
        &page::table(
            &["metric", "base", "new", "change", "relative", "verdict"],
            &rows,
        ),
    );
    let runs = [
        Run {
            label: Some("base"),
            dashed: true,
            report: &c.base,
        },
        Run {
            label: Some("new"),
            dashed: false,
            report: &c.new,
        },
    ];
    let charts = timeline::body(&runs);
    page::section(
        &mut body,
        "timeline",
        "Both runs over time",
        "Seconds since each run's start; the base run dashed, the new run solid, one colour \
         per metric.",
        &charts,
    );
    page::section(
        &mut body,
        "latency",
        "Latency distributions",
        "The latency each percentile of the measurements stayed under; base dashed, new solid.",
        &distributions(&runs),
    );
    page::document(&title, &body, None)
}

/// The regression gates and how each came out, when there are any.
fn gates_section(body: &mut String, gates: &[Outcome]) {
    if gates.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = gates
        .iter()
        .map(|g| {
            vec![
                quote(&g.gate).into_owned(),
                crate::untrusted::line(&g.measured).into_owned(),
                if g.failed { "FAIL" } else { "pass" }.to_owned(),
            ]
        })
        .collect();
    page::section(
        body,
        "gates",
        "Regression gates",
        "Each gate fails the comparison when its condition holds.",
        &page::table(&["gate", "measured", "result"], &rows),
    );
}

/// The end-to-end, send → ack and request distributions of both runs on one plot.
fn distributions(runs: &[Run<'_>]) -> String {
    let mut lines = Vec::new();
    let mut most: f64 = 2.0;
    for (i, h) in [Hist::EndToEnd, Hist::SendAck, Hist::Request]
        .into_iter()
        .enumerate()
    {
        for run in runs {
            let Some(l) = run.report.latency_us.get(&h) else {
                continue;
            };
            let end = (l.count.max(1) as f64).log10().ceil().clamp(2.0, 6.0);
            most = most.max(end);
            let points = l
                .curve
                .iter()
                .map(|&(q, v)| (chart::nines(q, end), v as f64 / 1000.0))
                .collect();
            let mut line = Line::new(
                format!("{}: {}", run.label.unwrap_or(""), h.entry().label),
                points,
            );
            line.dashed = run.dashed;
            line.color = Some(i);
            lines.push(line);
        }
    }
    Chart {
        marks: Vec::new(),
        id: "percentiles".to_owned(),
        title: "latency by percentile".to_owned(),
        x: XAxis::Percentile(most),
        y: YUnit::Ms,
        lines,
        gap: None,
    }
    .svg()
}
