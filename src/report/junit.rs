//! JUnit XML (`--format junit`): the run as one test suite, each check a test case, for the
//! test reporters of GitLab, Jenkins and GitHub. A failed check is a `<failure>` whose
//! message is its one-line reason (the measured value against the bound) and whose text
//! gives bound, measured value and origin; the run's pseudo-checks (`run.logins`,
//! `run.completed`, …) are test cases like the others. The shape is Apache Ant's, as pinned
//! by the JUnit schema the tests validate against (`tests/junit/JUnit.xsd`): `<properties>`
//! with the run's facts, then the test cases, then `<system-out>` with the verdict,
//! findings and notes, each one line ([`crate::untrusted`]).

use std::fmt::Write;

use super::model::Report;
use super::present::{check, finding, origin, verdict};
use super::renderer::Renderer;
use crate::error::Result;

/// The JUnit XML format.
#[derive(Debug, Clone, Copy)]
pub struct Junit;

impl Renderer<Report> for Junit {
    fn render(&self, r: &Report) -> Result<String> {
        Ok(render(r))
    }
}

/// Renders `r` as a JUnit XML `<testsuite>`.
pub fn render(r: &Report) -> String {
    let suite = format!("msgstorm.{}", r.scenario);
    let failures = r.checks.iter().filter(|c| !c.passed).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        r#"<testsuite name="{}" timestamp="{}" hostname="localhost" tests="{}" failures="{failures}" errors="0" skipped="0" time="{:.3}">"#,
        esc(&suite),
        esc(r.started_at.trim_end_matches('Z')),
        r.checks.len(),
        r.duration_s
    );
    out.push_str("  <properties>\n");
    for (name, value) in [
        ("run_id", r.run_id.as_str()),
        ("scenario", &r.scenario),
        ("target", &r.target),
        ("driver", &r.driver),
        ("started_at", &r.started_at),
    ] {
        let _ = writeln!(
            out,
            r#"    <property name="{name}" value="{}"/>"#,
            esc(value)
        );
    }
    out.push_str("  </properties>\n");
    for c in &r.checks {
        let _ = write!(
            out,
            r#"  <testcase name="{}" classname="{}" time="0">"#,
            esc(&c.key),
            esc(&suite)
        );
        if c.passed {
            out.push_str("</testcase>\n");
            continue;
        }
        let (bound, measured) = check(r, c);
        let message = c.reason.clone().unwrap_or_else(|| measured.clone());
        let _ = writeln!(
            out,
            "\n    <failure message=\"{}\" type=\"{}\">bound: {}\nmeasured: {}\nfrom: {}</failure>\n  </testcase>",
            esc(&message),
            esc(&c.key),
            esc(&bound),
            esc(&measured),
            esc(&origin(c))
        );
    }
    let lines: Vec<String> = std::iter::once(verdict(r))
        .chain(r.findings.iter().map(|f| format!("note: {}", finding(f))))
        .chain(r.notes.iter().map(|n| format!("note: {n}")))
        .map(|line| esc(&crate::untrusted::line(&line)))
        .collect();
    let _ = writeln!(out, "  <system-out>{}</system-out>", lines.join("\n"));
    out.push_str("  <system-err></system-err>\n</testsuite>\n");
    out
}

/// Escapes text for XML content and attribute values; characters XML 1.0 cannot carry at
/// all (most control characters, e.g. from a server's garbage frame in an error example)
/// become U+FFFD.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // Attribute values would fold a raw line break into a space.
            '\n' => out.push_str("&#10;"),
            '\t' | '\r' => {
                let _ = write!(out, "&#{};", u32::from(c));
            }
            c if c < ' ' || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_xml_cannot_carry_is_escaped_or_replaced() {
        assert_eq!(
            esc("a<b & \"c\"\n\u{1}'"),
            "a&lt;b &amp; &quot;c&quot;&#10;\u{FFFD}&apos;"
        );
    }
}
