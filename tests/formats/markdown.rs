//! `--format markdown`: a real run's report as GitHub-flavoured Markdown (a CI job summary
//! or a pull-request comment), parsed back with pulldown-cmark: the verdict as a heading, the
//! checks, latency and delivery tables whole (a cell's `|` or markup escaped), numbers as in
//! the other formats.

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

use crate::common::run::{msgstorm, Work};

/// What a Markdown document holds, as read by a CommonMark + GFM parser.
#[derive(Debug, Default)]
struct Doc {
    /// Each heading's level and text.
    headings: Vec<(u8, String)>,
    /// Each table: its header cells, then its rows' cells.
    tables: Vec<(Vec<String>, Vec<Vec<String>>)>,
    /// Each list item's text.
    items: Vec<String>,
}

impl Doc {
    fn parse(text: &str) -> Doc {
        let mut doc = Doc::default();
        let (mut cell, mut row) = (None::<String>, Vec::new());
        let mut heading: Option<(u8, String)> = None;
        let mut item: Option<String> = None;
        for event in Parser::new_ext(text, Options::ENABLE_TABLES) {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level as u8, String::new()));
                }
                Event::End(TagEnd::Heading(_)) => doc.headings.extend(heading.take()),
                Event::Start(Tag::Table(_)) => doc.tables.push((Vec::new(), Vec::new())),
                Event::End(TagEnd::TableHead) => {
                    if let Some(t) = doc.tables.last_mut() {
                        t.0 = std::mem::take(&mut row);
                    }
                }
                Event::End(TagEnd::TableRow) => {
                    if let Some(t) = doc.tables.last_mut() {
                        t.1.push(std::mem::take(&mut row));
                    }
                }
                Event::Start(Tag::TableCell) => cell = Some(String::new()),
                Event::End(TagEnd::TableCell) => row.extend(cell.take()),
                Event::Start(Tag::Item) => item = Some(String::new()),
                Event::End(TagEnd::Item) => doc.items.extend(item.take()),
                Event::Text(t) | Event::Code(t) => {
                    if let Some((_, h)) = heading.as_mut() {
                        h.push_str(&t);
                    } else if let Some(i) = item.as_mut() {
                        i.push_str(&t);
                    } else if let Some(c) = cell.as_mut() {
                        c.push_str(&t);
                    }
                }
                _ => {}
            }
        }
        doc
    }

    /// The table with this header.
    fn table(&self, header: &[&str]) -> &[Vec<String>] {
        self.tables
            .iter()
            .find(|(h, _)| h.iter().map(String::as_str).eq(header.iter().copied()))
            .map(|(_, rows)| rows.as_slice())
            .unwrap_or_else(|| panic!("no table {header:?} in {self:#?}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_runs_report_is_a_job_summary_with_its_verdict_and_tables() {
    let work = Work::new();
    let (ran, out, md) =
        crate::formats::cli::failing_run_writing(&work, "summary | *pr*", "markdown", "summary.md")
            .await;
    let text = std::fs::read_to_string(&md).expect("the summary");
    let doc = Doc::parse(&text);
    let json = msgstorm(&[
        "report",
        out.join("result.json").to_str().expect("utf-8"),
        "--json",
    ])
    .await;
    let r: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");

    // The verdict first, as the text report's first words.
    let (level, verdict) = &doc.headings[0];
    assert_eq!(*level, 2, "{text}");
    let first_line = ran.stdout.lines().next().unwrap_or_default();
    let words = first_line.split(" — ").next().unwrap_or_default();
    assert_eq!(verdict, &format!("❌ {words}"), "{text}");
    assert!(verdict.contains("checks.ack_p99: p99 "), "{verdict}");

    // Every check a row, its key, bound, measured value and result as the JSON has them.
    let checks = r["checks"].as_array().expect("checks");
    let rows = doc.table(&["check", "from", "bound", "measured", "result"]);
    assert_eq!(rows.len(), checks.len(), "{text}");
    for (row, c) in rows.iter().zip(checks) {
        assert_eq!(row.len(), 5, "{row:?}");
        assert_eq!(row[0], c["key"].as_str().expect("key"));
        let result = match c["reason"].as_str() {
            Some(why) => format!("❌ FAIL: {why}"),
            None => "✅ pass".to_owned(),
        };
        assert_eq!(row[4], result, "{row:?}");
    }

    let latency = doc.table(&[
        "latency", "count", "p50", "p95", "p99", "p99.9", "max", "mean",
    ]);
    let e2e = latency
        .iter()
        .find(|row| row[0] == "end-to-end (due → received)")
        .expect("an end-to-end row");
    let p99 = r["latency_us"]["end_to_end"]["p99"].as_f64().expect("p99");
    assert_eq!(e2e[4], format!("{:.2} ms", p99 / 1000.0));
    let delivery = doc.table(&["delivery", "count", "share of expected"]);
    let lost = delivery.iter().find(|row| row[0] == "lost").expect("lost");
    assert_eq!(lost[1], r["delivery"]["lost"].to_string());

    // The scenario's name arrives as written, its `|` and `*` escaped.
    assert!(
        doc.tables
            .iter()
            .all(|(h, rows)| rows.iter().all(|row| row.len() == h.len())),
        "{text}"
    );
    assert!(text.contains("summary \\| \\*pr\\*"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notes_are_a_list_and_the_fixture_renders_through_report() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/report/testdata/result.json"
    );
    let ran = msgstorm(&["report", fixture, "--format", "markdown"]).await;
    ran.expect_code(1);
    let doc = Doc::parse(&ran.stdout);
    let headings: Vec<&str> = doc.headings.iter().map(|(_, h)| h.as_str()).collect();
    assert_eq!(headings[1..], ["Checks", "Latency", "Delivery", "Notes"]);
    assert!(
        doc.items
            .iter()
            .any(|i| i.contains("Little's law does not hold")),
        "{:?}",
        doc.items
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_as_markdown_heads_with_its_gates_verdict_and_tables_the_gates() {
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/report/testdata/result.json"
    );
    let args = [
        "compare",
        fixture,
        fixture,
        "--fail-on",
        "e2e_p99>1us",
        "--fail-on",
        "lost>0",
        "--format",
        "markdown",
    ];
    let ran = msgstorm(&args).await;
    ran.expect_code(1);
    let doc = Doc::parse(&ran.stdout);
    let text = msgstorm(&args[..7]).await;
    let first = text.stdout.lines().next().unwrap_or_default();
    assert_eq!(doc.headings[0], (2, format!("❌ {first}")), "{ran}");
    let gates = doc.table(&["gate", "measured", "result"]);
    assert_eq!(gates.len(), 2);
    assert_eq!(
        (gates[0][0].as_str(), gates[0][2].as_str()),
        ("e2e_p99>1us", "❌ FAIL")
    );
    assert_eq!(
        (gates[1][0].as_str(), gates[1][2].as_str()),
        ("lost>0", "✅ pass")
    );
    // A run against itself changed nothing beyond noise: only the table of every metric.
    let metrics = doc.table(&["metric", "base", "new", "change", "relative", "verdict"]);
    assert!(metrics.len() > 30, "{ran}");
    assert!(!doc
        .headings
        .iter()
        .any(|(_, h)| h == "Changed beyond noise"));
}
