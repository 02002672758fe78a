//! A search's renderings: for the terminal the answer first, then one row per step in
//! value order, then the notes; as JSON the `find.json` file's content. Names, failed
//! checks and notes are shown through [`crate::untrusted`] on the terminal.

use std::fmt::Write;

use comfy_table::{presets, CellAlignment, Table};

use super::{num, FindResult};
use crate::error::Result;
use crate::report::format::{self, Format, Renderer};
use crate::report::json::Json;
use crate::report::text::Text;
use crate::untrusted::{line, quote};

/// The formats a search is rendered in.
const RENDERERS: [(Format, &dyn Renderer<FindResult>); 2] =
    [(Format::Text, &Text), (Format::Json, &Json)];

/// The renderer of a search in format `f` (`find`, `report find.json`); a format without
/// one is a usage error.
pub fn renderer(f: Format) -> Result<&'static dyn Renderer<FindResult>> {
    format::pick(f, "a search (find.json)", &RENDERERS)
}

impl Renderer<FindResult> for Text {
    fn render(&self, f: &FindResult) -> Result<String> {
        Ok(render(f))
    }
}

/// Renders `f` for the terminal.
pub fn render(f: &FindResult) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "msgstorm find: {} — varied {} from {} (to at most {}) against {}",
        quote(&f.scenario),
        quote(&f.vary),
        num(f.from),
        num(f.to),
        quote(&f.target)
    );
    let _ = writeln!(out, "\nANSWER: {}\n", line(&f.answer.words));
    let vary = quote(&f.vary);
    let mut t = Table::new();
    t.load_preset(presets::ASCII_MARKDOWN);
    let header = [
        "#",
        &vary,
        "verdict",
        "offered/s",
        "achieved/s",
        "e2e p50",
        "e2e p99",
        "ack p99",
        "req p99",
        "lost",
        "errors",
        "logins ok",
        "gen CPU",
        "gen RSS",
        "target CPU",
        "target RSS",
    ];
    t.set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut order: Vec<usize> = (0..f.steps.len()).collect();
    order.sort_by(|&a, &b| f.steps[a].value.total_cmp(&f.steps[b].value));
    for i in order {
        let s = &f.steps[i];
        let r = &s.row;
        let ms =
            |v: Option<u64>| v.map_or("–".to_owned(), |us| format!("{:.1} ms", us as f64 / 1e3));
        let cpu = |v: Option<f64>| v.map_or("–".to_owned(), |p| format!("{p:.0}%"));
        let mib = |v: Option<u64>| {
            v.map_or("–".to_owned(), |b| {
                format!("{:.0} MiB", b as f64 / 1048576.0)
            })
        };
        let verdict = match (s.passed, &s.generator_limit) {
            (true, _) => "pass",
            (false, Some(_)) => "FAIL (generator)",
            (false, None) => "FAIL",
        };
        t.add_row(vec![
            (i + 1).to_string(),
            num(s.value),
            verdict.to_owned(),
            format!("{:.1}", r.offered_per_s),
            format!("{:.1}", r.achieved_per_s),
            ms(r.e2e_p50_us),
            ms(r.e2e_p99_us),
            ms(r.ack_p99_us),
            ms(r.request_p99_us),
            r.lost.to_string(),
            r.errors.to_string(),
            logins(r.logins_ok, r.connect_attempts),
            cpu(r.generator_cpu_pct),
            mib(r.generator_rss_bytes),
            cpu(r.target_cpu_pct),
            mib(r.target_rss_bytes),
        ]);
    }
    let _ = writeln!(out, "STEPS (in value order; # is the order they ran)\n{t}");
    let _ = writeln!(
        out,
        "\nEach step's numbers cover its steady window: whole seconds from {} s after its \
         traffic started (users added in one run: after the step's last login) to its last \
         sending second (excluded; in one run: the next step's first login); latency checks \
         are judged on that window, delivery checks on the whole step. CPU is % of one core.",
        f.warmup_s
    );
    let failed: Vec<_> = f.steps.iter().filter(|s| !s.passed).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "\nFAILED STEPS");
        for s in failed {
            let mut why = s.failed.join("; ");
            if let Some(g) = &s.generator_limit {
                let _ = write!(why, " — generator limit: {g}");
            }
            let _ = writeln!(out, "  {vary} = {}: {}", num(s.value), line(&why));
        }
    }
    let storms: Vec<_> = f
        .steps
        .iter()
        .filter(|s| !s.row.errors_by_kind.is_empty())
        .collect();
    if !storms.is_empty() {
        let _ = writeln!(out, "\nERRORS BY KIND");
        for s in storms {
            let kinds: Vec<String> = s
                .row
                .errors_by_kind
                .iter()
                .map(|(k, n)| format!("{} {n}", quote(k)))
                .collect();
            let _ = writeln!(out, "  {vary} = {}: {}", num(s.value), kinds.join(", "));
        }
    }
    if !f.notes.is_empty() {
        let _ = writeln!(out, "\nNOTES");
        for n in &f.notes {
            let _ = writeln!(out, "  - {}", line(n));
        }
    }
    out
}

/// Successful logins of connection attempts, as `ok/attempts (pct)`; `–` without attempts.
fn logins(ok: u64, attempts: u64) -> String {
    if attempts == 0 {
        return "–".to_owned();
    }
    format!(
        "{ok}/{attempts} ({:.2}%)",
        ok as f64 * 100.0 / attempts as f64
    )
}
