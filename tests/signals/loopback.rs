//! Signals through `msgstorm run` over the in-process loopback hub: the report's signal
//! rows, the built-in checks, and `result.json` re-read by `msgstorm report`.

use msgstorm::artifact::SignalRecord;
use msgstorm::vocab::SignalKind;

use super::{every_owed_arrived_once, DAY, SIGNALS};
use crate::common::run::{msgstorm, run_text, Work};

/// `DAY` over the loopback hub with `options` in `[target.loopback]`.
fn scenario(options: &str) -> String {
    format!("name = \"signals\"\nseed = 5\ndrain = \"2s\"\n[target]\ndriver = \"loopback\"\n[target.loopback]\n{options}\n{DAY}{SIGNALS}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_with_signals_reports_each_kind_owed_and_arrived_and_passes() {
    let work = Work::new();
    let (ran, a) = run_text(&work, &scenario("")).await;
    ran.expect_code(0);
    let file = work.path("scenario.toml").display().to_string();
    let validated = msgstorm(&["validate", &file]).await;
    assert!(
        validated
            .stdout
            .contains("signals: read receipts for 50% of the messages received"),
        "validate says what the users will signal:\n{validated}"
    );
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let record = a.signals.as_ref().expect("signals in result.json");
    let rows = SignalRecord::summary(record);
    let kinds: Vec<SignalKind> = rows.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [SignalKind::Read, SignalKind::Typing, SignalKind::Presence]
    );
    every_owed_arrived_once(&rows);
    for line in [
        "receipts",
        "typing",
        "read → receipt at sender",
        "contacts notified per login or logout",
    ] {
        assert!(ran.stdout.contains(line), "{line} in the report:\n{ran}");
    }
    for check in ["checks.max_receipts_lost", "checks.max_presence_missed"] {
        assert!(
            a.checks.iter().all(|c| c.key != check),
            "built in, not written"
        );
    }
    let html = std::fs::read_to_string(work.path("out").join("report.html")).expect("report.html");
    assert!(
        html.contains("Signals per second"),
        "the presence storm's chart"
    );
    // The file holds what the report needs: `report` draws the contacts again and says
    // the same.
    let result = work.path("out").join("result.json");
    let json = std::fs::read_to_string(&result).expect("result.json");
    let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let (schemas, schema) = crate::cli::report::result_schema();
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json does not match schema/result.schema.json: {e:#}");
    }
    let again = msgstorm(&["report", &result.display().to_string(), "--format", "json"]).await;
    again.expect_code(0);
    let report: serde_json::Value = serde_json::from_str(&again.stdout).expect("report JSON");
    let presence = &report["signals"][2];
    assert_eq!(presence["kind"], "presence", "{presence}");
    assert_eq!(presence["missing"], 0, "{presence}");
    assert_eq!(
        presence["expected"].as_u64(),
        Some(rows[2].delivery.expected),
        "{presence}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_a_server_loses_fail_the_run_by_their_own_check() {
    let work = Work::new();
    let (ran, a) = run_text(&work, &scenario("loss = 0.02\nseed = 9")).await;
    ran.expect_code(1);
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals"));
    let read = rows[0].delivery;
    assert!(read.missing > 0, "{read:?}");
    assert_eq!(read.arrived + read.missing, read.expected, "{read:?}");
    let json = msgstorm(&[
        "report",
        &work.path("out").join("result.json").display().to_string(),
        "--format",
        "json",
    ])
    .await;
    let report: serde_json::Value = serde_json::from_str(&json.stdout).expect("report JSON");
    let check = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["key"] == "checks.max_receipts_lost")
        .expect("the built-in receipts check")
        .clone();
    assert_eq!(check["passed"], false, "{check}");
    assert_eq!(
        check["value"].as_f64(),
        Some(read.missing as f64),
        "{check}"
    );
    assert!(
        check["reason"]
            .as_str()
            .is_some_and(|r| r.contains("read receipts never reached")),
        "{check}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_no_recipient_was_owed_fails_as_not_measured() {
    let work = Work::new();
    // Nobody stays online a minute after a typing notice in a 10 s day.
    let text = scenario("").replace("within = \"1s\"", "within = \"60s\"");
    let (ran, a) = run_text(&work, &text).await;
    ran.expect_code(1);
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals"));
    assert!(rows[1].delivery.sent > 0, "typing was sent: {:?}", rows[1]);
    assert_eq!(
        rows[1].delivery.expected, 0,
        "and owed to nobody: {:?}",
        rows[1]
    );
    assert!(
        ran.stdout.contains("checks.max_typing_missed")
            && ran
                .stdout
                .contains("not measured: no recipient was owed one"),
        "{ran}"
    );
}
