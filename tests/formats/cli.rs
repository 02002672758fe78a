//! `--format` wherever a report is printed or written: `run`, `report`, `compare`, `find`
//! and `collect` take it; the older `--json` and `--html` are its aliases and give the same
//! bytes; a format a command does not offer, or two formats on standard output, are usage
//! errors (exit 2) before any work.

use std::path::PathBuf;

use crate::common::run::{msgstorm, Ran, Work};

/// The report fixture: a real run's result file.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/report/testdata/result.json"
);

/// A one-second run against the embedded server that fails its ack check.
const SHORT: &str = r#"name = "formats"
drain = "1s"

[population]
users = 8
login_rate = 200

[[traffic]]
kind = "direct"
senders = 2
receivers = 4
rate = 40
duration = "1s"

[checks]
ack_p99 = "1us"
"#;

/// Runs [`SHORT`] named `name` with `max_lost = 0` added (exit 1: its ack check fails),
/// writing `format` to `file` in `work`: the run, the output folder and the file.
pub async fn failing_run_writing(
    work: &Work,
    name: &str,
    format: &str,
    file: &str,
) -> (Ran, PathBuf, PathBuf) {
    let text = SHORT
        .replace("name = \"formats\"", &format!("name = {name:?}"))
        .replace("[checks]\n", "[checks]\nmax_lost = 0\n");
    let scenario = work.write("s.toml", &text);
    let out = work.path("out");
    let written = work.path(file);
    let arg = format!("{format}={}", written.display());
    let ran = msgstorm(&[
        "run",
        scenario.to_str().expect("utf-8"),
        "--quiet",
        "--out",
        out.to_str().expect("utf-8"),
        "--format",
        &arg,
    ])
    .await;
    ran.expect_code(1);
    (ran, out, written)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_older_flags_are_aliases_of_format_and_give_the_same_bytes() {
    let work = Work::new();
    let json = msgstorm(&["report", FIXTURE, "--json"]).await;
    let format_json = msgstorm(&["report", FIXTURE, "--format", "json"]).await;
    json.expect_code(1);
    format_json.expect_code(1);
    assert_eq!(json.stdout, format_json.stdout);
    let text = msgstorm(&["report", FIXTURE]).await;
    let format_text = msgstorm(&["report", FIXTURE, "--format=text"]).await;
    assert_eq!(text.stdout, format_text.stdout);

    let (a, b) = (work.path("a.html"), work.path("b.html"));
    let html_arg = format!("--html={}", a.display());
    msgstorm(&["report", FIXTURE, &html_arg])
        .await
        .expect_code(1);
    let format_arg = format!("html={}", b.display());
    let written = msgstorm(&["report", FIXTURE, "--format", &format_arg, "--json"]).await;
    written.expect_code(1);
    assert_eq!(
        written.stdout, json.stdout,
        "--json still prints with a file written"
    );
    assert!(written.stderr.contains("report: "), "{written}");
    let read = |p: &std::path::Path| std::fs::read_to_string(p).expect("the page");
    assert_eq!(read(&a), read(&b));

    let cmp_html = work.path("cmp.html");
    let cmp_arg = format!("html={}", cmp_html.display());
    let cmp = msgstorm(&["compare", FIXTURE, FIXTURE, "--format", &cmp_arg]).await;
    cmp.expect_code(0);
    let old = work.path("old.html");
    let old_arg = old.display().to_string();
    msgstorm(&["compare", FIXTURE, FIXTURE, "--html", &old_arg])
        .await
        .expect_code(0);
    assert_eq!(read(&cmp_html), read(&old));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_prints_its_report_in_the_format_asked_and_writes_the_others() {
    let work = Work::new();
    let file = work.write("s.toml", SHORT);
    let out = work.path("out");
    let text_file = work.path("report.txt");
    let text_arg = format!("text={}", text_file.display());
    let ran = msgstorm(&[
        "run",
        file.to_str().expect("utf-8"),
        "--quiet",
        "--out",
        out.to_str().expect("utf-8"),
        "--format",
        "json",
        "--format",
        &text_arg,
    ])
    .await;
    ran.expect_code(1);
    let r: serde_json::Value = serde_json::from_str(&ran.stdout).expect("run printed JSON");
    assert_eq!(r["verdict"], "fail", "{ran}");
    assert!(out.join("report.html").is_file() && out.join("result.json").is_file());
    // The text file is what `report` prints of the result the run wrote.
    let again = msgstorm(&["report", out.join("result.json").to_str().expect("utf-8")]).await;
    let written = std::fs::read_to_string(&text_file).expect("the text report");
    assert_eq!(Some(written.as_str()), again.stdout.strip_suffix('\n'));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_find_render_through_the_same_formats() {
    let cmp = msgstorm(&[
        "compare",
        FIXTURE,
        FIXTURE,
        "--format",
        "json",
        "--fail-on",
        "lost>0",
    ])
    .await;
    cmp.expect_code(0);
    let c: serde_json::Value = serde_json::from_str(&cmp.stdout).expect("compare JSON");
    assert_eq!(c["verdict"], "pass", "{cmp}");
    assert_eq!(c["gates"][0]["gate"], "lost>0");
    assert_eq!(c["gates"][0]["failed"], false);
    let rows = c["rows"].as_array().expect("rows");
    assert!(rows.len() > 30, "{} rows", rows.len());
    assert!(rows
        .iter()
        .all(|r| r["change"] == "unchanged" || r["change"] == "not_comparable"));
    assert_eq!(c["base"]["run_id"], c["new"]["run_id"]);

    let work = Work::new();
    let file = work.write("s.toml", SHORT);
    let refused = msgstorm(&[
        "find",
        file.to_str().expect("utf-8"),
        "--vary",
        "traffic[0].rate",
        "--format",
        "html",
    ])
    .await;
    refused.expect_code(2);
    assert!(
        refused
            .stderr
            .contains("a search (find.json) is rendered as text, json"),
        "{refused}"
    );
    assert!(
        !refused.stderr.contains("find: step"),
        "no step ran: {refused}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_formats_on_standard_output_are_refused() {
    let two = msgstorm(&["report", FIXTURE, "--json", "--format", "text"]).await;
    two.expect_code(2);
    assert!(
        two.stderr.contains("both print to standard output"),
        "{two}"
    );
    let bad = msgstorm(&["report", FIXTURE, "--format", "yaml"]).await;
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("expected one of text, json, html"),
        "{bad}"
    );
}
