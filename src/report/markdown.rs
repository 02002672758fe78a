//! GitHub-flavoured Markdown (`--format markdown`): a CI job summary or a pull-request
//! comment — the verdict as a heading, the run in one line, then the checks, latency and
//! delivery tables, and the findings and notes. Numbers as in the text report. Every
//! piece of text is shown through [`crate::untrusted`] (no control character, no line
//! break of a server's) before its Markdown escaping ([`cell`], [`code`]).

use std::fmt::Write;

use super::model::{Report, Verdict};
use super::present::{finding, ms, thousands, verdict};
use super::renderer::Renderer;
use super::tables::{
    check_rows, delivery_rows, latency_rows, presence_fanout, signal_rows, CheckResult,
    CHECKS_HEADER, DELIVERY_HEADER, LATENCY_HEADER, SIGNALS_HEADER,
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
         {:.1} s against {} ({}); run {} started {}.",
        cell(&r.scenario),
        thousands(r.count(Counter::LoginOk)),
        thousands(r.count(Counter::Sent)),
        thousands(r.delivery.delivered),
        thousands(r.delivery.lost),
        r.duration_s,
        cell(&r.target),
        cell(&r.driver),
        code(&r.run_id),
        cell(&r.started_at)
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
            vec![c.key.to_owned(), c.from, c.bound, c.measured, result]
        })
        .collect();
    table(&mut out, "Checks", &CHECKS_HEADER, &rows, code);
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
    table(&mut out, "Latency", &LATENCY_HEADER, &rows, cell);
    let d = &r.delivery;
    let rows: Vec<Vec<String>> = delivery_rows(d).into_iter().map(Vec::from).collect();
    table(&mut out, "Delivery", &DELIVERY_HEADER, &rows, cell);
    if !r.signals.is_empty() {
        let rows: Vec<Vec<String>> = signal_rows(r).into_iter().map(Vec::from).collect();
        table(&mut out, "Signals", &SIGNALS_HEADER, &rows, cell);
        if let Some(line) = presence_fanout(r) {
            let _ = writeln!(out, "\n{line}");
        }
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
/// The cells are text, written through [`cell`]; those of the first column through `first`
/// ([`code`] for a column of names).
pub(super) fn table(
    out: &mut String,
    title: &str,
    header: &[&str],
    rows: &[Vec<String>],
    first: fn(&str) -> String,
) {
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
            .map(|(i, c)| if i == 0 { first(c) } else { cell(c) })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// A name (a check's key, a gate, a run id) as a code span, unless it holds what a code
/// span cannot show as it is — a backtick, a pipe (it would end the table cell), anything
/// [`crate::untrusted`] escapes — or is too long: then as [`cell`] text.
pub(super) fn code(s: &str) -> String {
    let plain = !s.trim().is_empty()
        && !s.contains(['`', '|'])
        && matches!(crate::untrusted::line(s), std::borrow::Cow::Borrowed(_));
    if plain {
        format!("`{s}`")
    } else {
        cell(s)
    }
}

/// Text as inline Markdown on one line: shown through [`crate::untrusted::line`] (control
/// characters and line breaks as visible escapes, long text cut), then the characters that
/// would start markup or end a table cell are backslash-escaped (`<` only where it could
/// open an HTML tag, `&` an entity, `_` only where it could start emphasis: not inside a
/// word, as in `checks.max_lost`). A backslash of an escape is escaped too, so the reader
/// sees `\x1b`.
pub(super) fn cell(s: &str) -> String {
    let s = crate::untrusted::line(s);
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
        if escape {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{cell, code};

    #[test]
    fn markup_in_text_is_escaped_and_plain_text_left_alone() {
        assert_eq!(cell("checks.max_lost <= 0"), "checks.max_lost <= 0");
        assert_eq!(
            cell("a|b *c* <b>x</b> _y_ [z] &lt; & \nw"),
            "a\\|b \\*c\\* \\<b>x\\</b> \\_y\\_ \\[z\\] \\&lt; & \\\\nw"
        );
    }

    #[test]
    fn a_servers_controls_and_line_breaks_show_as_escapes() {
        assert_eq!(
            cell("bad\x1b[2J\x1b]0;pwned\x07 frame\n\rSECOND LINE"),
            "bad\\\\x1b\\[2J\\\\x1b\\]0;pwned\\\\x07 frame\\\\n\\\\rSECOND LINE"
        );
    }

    #[test]
    fn only_plain_names_are_code_spans() {
        assert_eq!(code("checks.max_lost"), "`checks.max_lost`");
        assert_eq!(code("chaos[0]"), "`chaos[0]`");
        assert_eq!(code("e2e_p99>+10%"), "`e2e_p99>+10%`");
        assert_eq!(code("a\x1bb"), "a\\\\x1bb");
        assert_eq!(code("a`b|c"), "a\\`b\\|c");
        assert_eq!(code(""), "");
    }
}
