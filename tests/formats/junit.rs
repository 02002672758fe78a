//! `--format junit`: a real run's report as JUnit XML, valid against the JUnit schema
//! (`tests/junit/JUnit.xsd`, checked by `xmllint --schema`): one test case per check named
//! by its key, the failed ones with the measured value, the bound and the one-line reason;
//! the suite's counts and time are the run's. Text XML cannot carry is escaped or replaced.
//!
//! xmllint is Debian's `libxml2-utils` (`scripts/test` installs it); without it the tests
//! are ignored (`cfg(peer_xmllint)`), except under `CI=true`, where they fail.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::peers::required;
use crate::common::run::{msgstorm, Work};

/// The vendored schema.
const SCHEMA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/junit/JUnit.xsd");

/// The report fixture: a real run's result file with failed checks.
const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/report/testdata/result.json"
);

fn xmllint() -> PathBuf {
    required("xmllint")
}

/// `xmllint --schema JUnit.xsd FILE`: `Err` with xmllint's complaint when `file` is invalid.
fn validate(file: &Path) -> Result<(), String> {
    let out = Command::new(xmllint())
        .args(["--noout", "--schema", SCHEMA])
        .arg(file)
        .output()
        .expect("xmllint runs");
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// The value of an XPath expression over `file` (xmllint's `--xpath`).
fn xpath(file: &Path, expr: &str) -> String {
    let out = Command::new(xmllint())
        .args(["--xpath", expr])
        .arg(file)
        .output()
        .expect("xmllint runs");
    assert!(
        out.status.success(),
        "{expr}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_xmllint),
    ignore = "xmllint is not installed (scripts/test installs libxml2-utils)"
)]
async fn a_real_runs_checks_are_junit_test_cases_valid_against_the_schema() {
    let work = Work::new();
    let (_, out, xml) =
        crate::formats::cli::failing_run_writing(&work, "junit", "junit", "junit.xml").await;
    if let Err(e) = validate(&xml) {
        panic!(
            "--format junit does not match JUnit.xsd: {e}\n{}",
            std::fs::read_to_string(&xml).unwrap_or_default()
        );
    }
    // The same numbers as the JSON report of the result the run wrote.
    let result = out.join("result.json");
    let json = msgstorm(&["report", result.to_str().expect("utf-8"), "--json"]).await;
    let r: serde_json::Value = serde_json::from_str(&json.stdout).expect("JSON");
    let checks = r["checks"].as_array().expect("checks");
    let failed: Vec<&serde_json::Value> = checks.iter().filter(|c| c["passed"] == false).collect();
    assert!(!failed.is_empty(), "{json}");
    assert_eq!(
        xpath(&xml, "count(/testsuite/testcase)"),
        checks.len().to_string()
    );
    assert_eq!(
        xpath(&xml, "string(/testsuite/@failures)"),
        failed.len().to_string()
    );
    assert_eq!(
        xpath(&xml, "count(/testsuite/testcase/failure)"),
        failed.len().to_string()
    );
    assert_eq!(xpath(&xml, "string(/testsuite/@name)"), "msgstorm.junit");
    let time: f64 = xpath(&xml, "string(/testsuite/@time)")
        .parse()
        .expect("a time");
    let duration = r["duration_s"].as_f64().expect("duration");
    assert!((time - duration).abs() < 0.001, "{time} vs {duration}");
    for c in checks {
        let key = c["key"].as_str().expect("a key");
        let case = format!("/testsuite/testcase[@name='{key}']");
        assert_eq!(
            xpath(&xml, &format!("string({case}/@classname)")),
            "msgstorm.junit"
        );
        assert_eq!(
            xpath(&xml, &format!("count({case}/failure)")),
            if c["passed"] == false { "1" } else { "0" },
            "{key}"
        );
    }
    // A failure says why in one line, with the value against the bound, and gives both.
    let ack = "/testsuite/testcase[@name='checks.ack_p99']/failure";
    let message = xpath(&xml, &format!("string({ack}/@message)"));
    let reason = checks
        .iter()
        .find(|c| c["key"] == "checks.ack_p99")
        .and_then(|c| c["reason"].as_str())
        .expect("the ack check's reason");
    assert_eq!(message, reason);
    assert!(
        message.starts_with("p99 ") && message.ends_with("(bound <= 0.00 ms)"),
        "{message}"
    );
    let body = xpath(&xml, &format!("string({ack})"));
    assert!(
        body.contains("bound: <= 0.00 ms")
            && body.contains("measured: ")
            && body.contains("from: scenario"),
        "{body}"
    );
    let said = xpath(&xml, "string(/testsuite/system-out)");
    assert!(said.starts_with("FAIL: "), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_xmllint),
    ignore = "xmllint is not installed (scripts/test installs libxml2-utils)"
)]
async fn text_xml_cannot_carry_is_escaped_and_the_schema_is_strict() {
    let work = Work::new();
    let mut result: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).expect("the fixture"))
            .expect("JSON");
    result["notes"]
        .as_array_mut()
        .expect("notes")
        .push("a server said \u{1}<b>\"&'</b>]]> at\ttab".into());
    result["scenario"] = "a <scenario> & \"quotes\"".into();
    let file = work.write("result.json", &result.to_string());
    let ran = msgstorm(&["report", file.to_str().expect("utf-8"), "--format", "junit"]).await;
    ran.expect_code(1);
    let xml = work.write("junit.xml", &ran.stdout);
    if let Err(e) = validate(&xml) {
        panic!("{e}\n{}", ran.stdout);
    }
    assert_eq!(
        xpath(&xml, "string(/testsuite/@name)"),
        "msgstorm.a <scenario> & \"quotes\""
    );
    let said = xpath(&xml, "string(/testsuite/system-out)");
    // A note is one line, its control characters shown as escapes (`src/untrusted.rs`);
    // the XML escapes the markup on top.
    assert!(
        said.contains("a server said \\x01<b>\"&'</b>]]> at\\ttab"),
        "{said}"
    );
    // The schema rejects what the JUnit readers would: a suite without its hostname.
    let broken = work.write(
        "broken.xml",
        &ran.stdout.replacen(" hostname=\"localhost\"", "", 1),
    );
    assert!(
        validate(&broken).is_err(),
        "the schema accepts a suite without hostname"
    );
}
