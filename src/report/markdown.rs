//! GitHub-flavoured Markdown (`--format markdown`): a CI job summary or a pull-request
//! comment — the verdict as a heading, the run in one line, then the checks, latency and
//! delivery tables, and the findings and notes. Numbers as in the text report.

use std::fmt::Write;

use super::model::{Report, Verdict};
use super::present::{finding, ms, thousands, verdict};
use super::renderer::Renderer;
use super::tables::{
    check_rows, delivery_rows, latency_rows, signal_rows, CheckResult, CHECKS_HEADER,
    DELIVERY_HEADER, LATENCY_HEADER, SIGNALS_HEADER,
};
use crate::error::Result;
use crate::metrics::{Counter, Hist};

/// The Markdown format.
#[derive(Debug, Clone, Copy)]
pub struct Markdown;

impl Renderer<Report> for Markdown {
    fn render(&self, r: &Report) -> Result<String> {
        Ok(render(r))
    }
}

/// Renders `r` as a Markdown document.
pub fn render(r: &Report) -> String {
    let mut out = String::new();
    let mark = match r.verdict {
        Verdict::Pass => "✅",
        Verdict::Fail => "❌",
        Verdict::Incomplete | Verdict::Interrupted => "⚠️",
    };
    let _ = writeln!(out, "## {mark} {}\n", cell(&verdict(r)));
    let e2e_p99 = r
        .latency_us
        .get(&Hist::EndToEnd)
        .map_or_else(|| "–".to_owned(), |l| ms(l.p99 as f64));
    let _ = writeln!(
        out,
        "Scenario **{}**: {} logins, {} msgs sent, {} delivered, {} lost, e2e p99 {e2e_p99}, \
         {:.1} s against {} ({}); run `{}` started {}.",
        cell(&r.scenario),
        thousands(r.count(Counter::LoginOk)),
        thousands(r.count(Counter::Sent)),
        thousands(r.delivery.delivered),
        thousands(r.delivery.lost),
        r.duration_s,
        cell(&r.target),
        cell(&r.driver),
        r.run_id,
        r.started_at
    );
    let rows: Vec<Vec<String>> = check_rows(r)
        .into_iter()
        .map(|c| {
            let result = match c.result {
                CheckResult::Fail(Some(why)) => format!("❌ FAIL: {why}"),
                CheckResult::Fail(None) => "❌ FAIL".to_owned(),
                CheckResult::Pass => "✅ pass".to_owned(),
                CheckResult::Pending => "⏳ pending".to_owned(),
            };
            vec![format!("`{}`", c.key), c.from, c.bound, c.measured, result]
        })
        .collect();
    table(&mut out, "Checks", &CHECKS_HEADER, &rows);
    let rows: Vec<Vec<String>> = latency_rows(r)
        .into_iter()
        .map(|row| {
            let label = row.label().to_owned();
            match row.cells {
                Some(cells) => std::iter::once(label).chain(cells).collect(),
                None => {
                    let mut cells = vec![String::new(); LATENCY_HEADER.len()];
                    cells[0] = label;
                    cells[1] = "not measured: no acceptance".to_owned();
                    cells
                }
            }
        })
        .collect();
    table(&mut out, "Latency", &LATENCY_HEADER, &rows);
    let d = &r.delivery;
    let rows: Vec<Vec<String>> = delivery_rows(d).into_iter().map(Vec::from).collect();
    table(&mut out, "Delivery", &DELIVERY_HEADER, &rows);
    if !r.signals.is_empty() {
        let rows: Vec<Vec<String>> = signal_rows(r).into_iter().map(Vec::from).collect();
        table(&mut out, "Signals", &SIGNALS_HEADER, &rows);
    }
    if !r.findings.is_empty() || !r.notes.is_empty() {
        out.push_str("\n### Notes\n\n");
        for f in &r.findings {
            let _ = writeln!(out, "- {}", cell(&finding(f)));
        }
        for n in &r.notes {
            let _ = writeln!(out, "- {}", cell(n));
        }
    }
    out
}

/// A GitHub table under a `###` heading; the first column left-aligned, the others right.
pub(super) fn table(out: &mut String, title: &str, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "\n### {title}\n");
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = (0..header.len())
        .map(|i| if i == 0 { ":---" } else { "---:" })
        .collect();
    let _ = writeln!(out, "| {} |", align.join(" | "));
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            // A code span (a check's key) is written as is.
            .map(|(i, c)| {
                if i == 0 && c.starts_with('`') {
                    c.clone()
                } else {
                    cell(c)
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// Text as inline Markdown on one line: the characters that would start markup or end a
/// table cell are backslash-escaped (`<` only where it could open an HTML tag, `&` an
/// entity, `_` only
/// where it could start emphasis: not inside a word, as in `checks.max_lost`), line
/// breaks become spaces.
pub(super) fn cell(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let word = |i: Option<usize>| {
        i.and_then(|i| chars.get(i))
            .is_some_and(|c| c.is_alphanumeric())
    };
    let mut out = String::with_capacity(s.len());
    for (i, &c) in chars.iter().enumerate() {
        let escape = match c {
            '\\' | '|' | '*' | '`' | '[' | ']' => true,
            '<' => chars
                .get(i + 1)
                .is_some_and(|n| n.is_ascii_alphabetic() || matches!(n, '/' | '!' | '?')),
            '_' => !(word(i.checked_sub(1)) && word(Some(i + 1))),
            // `&lt;` and the like would read as the character they name.
            '&' => word(Some(i + 1)) || chars.get(i + 1) == Some(&'#'),
            _ => false,
        };
        match c {
            '\n' | '\r' => out.push(' '),
            c if escape => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn markup_in_text_is_escaped_and_plain_text_left_alone() {
        assert_eq!(cell("checks.max_lost <= 0"), "checks.max_lost <= 0");
        assert_eq!(
            cell("a|b *c* <b>x</b> _y_ [z] &lt; & \nw"),
            "a\\|b \\*c\\* \\<b>x\\</b> \\_y\\_ \\[z\\] \\&lt; &  w"
        );
    }
}
