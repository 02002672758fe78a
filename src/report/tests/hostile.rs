//! Text from a hostile server or result file in every text rendering: whatever a server
//! answered, an adapter reported or a result file names, no line of the terminal report,
//! of Markdown, of HTML, of `compare` or of `find` holds a control character msgstorm did
//! not write
//! (it writes only line breaks: no colours off a terminal), each rendering has as many
//! lines as with plain text in the same places, and the first line names the failed
//! checks on that one line. The JSON keeps the exact text.

use proptest::prelude::*;

use super::super::compare::render::Compared;
use super::super::compare::Comparison;
use super::super::format::Format;
use super::super::model::Report;
use super::super::{html, json, markdown, text};
use super::built_in_fixture;
use crate::artifact::{Artifact, CheckMetric, CheckSpec, Op};
use crate::chaos::StepRecord;
use crate::find::{Answer, FindResult, Precision, Step};
use crate::ledger::{Example, Problem};
use crate::metrics::ErrorKind;
use crate::untrusted::{self, quote};

/// Places of outside text the renderings show.
const PLACES: usize = 16;

/// A run whose every outside text is one of `t`: names, a note, a protocol error's and
/// the generator's examples, a watched process, a chaos step that failed, a check of the
/// result file (that fails: nothing is lost, and it asks for less than nothing).
fn hostile(t: &[String]) -> Artifact {
    let mut a = built_in_fixture(100, 80);
    a.scenario = t[0].clone();
    a.target = t[1].clone();
    a.driver = t[2].clone();
    a.run_id = t[3].clone();
    a.started_at = t[4].clone();
    a.notes.push(t[5].clone());
    for _ in 0..20 {
        a.metrics.error(0, ErrorKind::Protocol, || t[6].clone());
    }
    a.metrics.error(0, ErrorKind::Generator, || t[7].clone());
    a.processes[0].name = t[8].clone();
    a.chaos.push(StepRecord {
        key: t[9].clone(),
        action: t[10].clone(),
        planned: String::new(),
        at_s: 1.0,
        duration_s: 1.0,
        began_s: Some(1.0),
        ended_s: Some(2.0),
        outcome: t[11].clone(),
        ok: false,
        pids: Vec::new(),
        exit_code: None,
        output: None,
        cut: None,
        back_after_s: None,
        max_lost: None,
        max_duplicated: None,
    });
    a.checks.push(CheckSpec {
        key: t[12].clone(),
        metric: CheckMetric::Lost,
        op: Op::AtMost,
        value: -1.0,
    });
    a
}

/// The report of [`hostile`], with a delivery problem whose detail is `t[13]`.
fn report(t: &[String]) -> Report {
    let mut r = Report::new(&hostile(t));
    r.delivery.examples.push(Example {
        kind: Problem::Lost,
        stream: 7,
        recipient: 2,
        seq: 3,
        detail: t[13].clone(),
    });
    r
}

/// A search over `t[14]` whose notes, failed checks and error kinds are outside text.
fn search(t: &[String]) -> FindResult {
    let mut step = Step {
        value: 10.0,
        passed: false,
        failed: vec![t[12].clone()],
        generator_limit: Some(t[7].clone()),
        row: Default::default(),
        result: String::new(),
    };
    step.row.errors_by_kind.insert(t[6].clone(), 3);
    FindResult {
        kind: crate::find::FIND_KIND.to_owned(),
        schema_version: crate::find::FIND_SCHEMA_VERSION,
        tool: "msgstorm test".to_owned(),
        scenario: t[0].clone(),
        target: t[1].clone(),
        vary: t[14].clone(),
        from: 10.0,
        to: 20.0,
        precision: Precision::Absolute(1.0),
        warmup_s: 1.0,
        steps: vec![step],
        answer: Answer {
            highest_pass: None,
            first_fail: Some(10.0),
            failed_checks: vec![t[12].clone()],
            generator_limited: false,
            words: t[15].clone(),
        },
        notes: vec![t[5].clone()],
    }
}

/// Every rendering a terminal, a Markdown or an HTML page (the live page's too) shows of
/// the texts `t`, by name.
fn renderings(t: &[String]) -> Vec<(&'static str, String)> {
    let r = report(t);
    let compared = Compared {
        comparison: Comparison::new(report(t), r.clone()),
        files: [t[15].clone(), t[14].clone()],
        gates: Vec::new(),
    };
    let comparison = |f: Format| {
        Compared::renderer(f)
            .and_then(|c| c.render(&compared))
            .expect("renders")
    };
    let found = crate::find::text::renderer(Format::Text)
        .and_then(|f| f.render(&search(t)))
        .expect("renders");
    vec![
        ("text", text::render(&r)),
        ("markdown", markdown::render(&r)),
        ("html", html::render(&r)),
        ("compare", comparison(Format::Text)),
        ("compare markdown", comparison(Format::Markdown)),
        ("find", found),
    ]
}

/// The characters of `out` msgstorm does not write: every control character but the line
/// break, and the bidirectional overrides and separators.
fn stray(out: &str) -> Vec<char> {
    out.chars()
        .filter(|&c| c != '\n' && untrusted::is_hidden(c))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_line_of_a_text_rendering_holds_what_a_server_sent(
        t in proptest::collection::vec(untrusted::text(), PLACES)
    ) {
        let plain: Vec<String> = (0..PLACES).map(|i| format!("x{i}")).collect();
        for ((name, out), (_, want)) in renderings(&t).into_iter().zip(renderings(&plain)) {
            prop_assert_eq!(stray(&out), Vec::<char>::new(), "{}:\n{}", name, out);
            prop_assert_eq!(
                out.lines().count(),
                want.lines().count(),
                "{} has other lines than with plain text:\n{}",
                name,
                out
            );
        }
        let out = text::render(&report(&t));
        let first = out.lines().next().unwrap_or_default();
        prop_assert!(first.starts_with("FAIL: "), "{}", first);
        for piece in [&t[0], &t[1], &t[12]] {
            let shown = quote(piece);
            prop_assert!(first.contains(&*shown), "{:?} not in {}", shown, first);
        }
        // The JSON is data: the exact text, JSON-escaped.
        let r = report(&t);
        let back: serde_json::Value =
            serde_json::from_str(&json::render(&r).expect("encodes")).expect("parses");
        prop_assert_eq!(back["scenario"].as_str(), Some(t[0].as_str()));
        prop_assert!(back["notes"].as_array().is_some_and(|n| n.iter().any(|n| n == &t[5])));
        prop_assert_eq!(back["errors"]["protocol"]["examples"][0].as_str(), Some(t[6].as_str()));
    }
}

/// The server text in the first line: one line, its escapes visible.
#[test]
fn the_first_line_quotes_a_servers_control_characters_as_escapes() {
    let evil = "bad\x1b[2J\x1b]0;pwned\x07 frame\n\rSECOND LINE".to_owned();
    let mut t: Vec<String> = (0..PLACES).map(|i| format!("x{i}")).collect();
    t[6] = evil;
    let out = text::render(&report(&t));
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.contains("e.g. protocol: \"bad\\x1b[2J\\x1b]0;pwned\\x07 frame\\n\\rSECOND LINE\""),
        "{first}"
    );
    assert!(!out.contains('\x1b') && !out.contains('\x07') && !out.contains('\r'));
}
