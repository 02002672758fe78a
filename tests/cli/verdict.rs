//! No PASS without the work: scenarios that cannot do what they claim — a template the
//! server refuses, a reply id that never matches, a push rule that never matches — fail
//! with their reason in the report's first line, and the right scenario still passes. Each
//! runs `scenarios/ws-json-native.toml` against the embedded reference server.

use crate::common::run::{msgstorm, Ran, Work};

const SCENARIO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/ws-json-native.toml");

/// Runs the scenario with `sets` (each a `--set KEY=VALUE`); replies are awaited 2 s at most
/// so a reply id that never matches does not hold the run for long.
async fn run(sets: &[&str]) -> Ran {
    let work = Work::new();
    let out = work.path("out");
    let out = out.display().to_string();
    let mut args = vec![
        "run",
        SCENARIO,
        "-q",
        "--out",
        &out,
        "--set",
        "target.connect_timeout=\"2s\"",
    ];
    for s in sets {
        args.extend(["--set", s]);
    }
    msgstorm(&args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_scenario_passes_every_built_in_check() {
    let ran = run(&[]).await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS (14 checks) — "), "{ran}");
    for key in [
        "checks.max_send_lag",
        "checks.min_offered",
        "checks.min_online",
        "checks.min_verified",
        "checks.max_send_error_rate",
        "checks.max_protocol_errors",
        "checks.max_repaired_rate",
        "checks.max_foreign",
        "checks.max_join_failures",
    ] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with(&format!("| {key} ")) && l.contains("built-in")),
            "{key}:\n{ran}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_the_server_refuses_fail_the_run() {
    let ran = run(&[
        r#"target.ws-json.direct={"type":"bogus","ref":{req_id},"to":{"user":"{to}"},"body":"{body}"}"#,
    ])
    .await;
    ran.expect_code(1);
    let first = ran.verdict();
    assert!(first.starts_with("FAIL: checks.min_verified: "), "{ran}");
    assert!(
        first.contains("; checks.max_send_error_rate: 80.000% of sends refused or failed, e.g. send_failed: \"unknown type `bogus`\""),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_id_that_never_matches_fails_the_run() {
    let ran = run(&["target.ws-json.reply_id=\"nope\""]).await;
    ran.expect_code(1);
    let first = ran.verdict();
    assert!(
        first.starts_with("FAIL: checks.min_verified: 0 of "),
        "nothing was confirmed, so nothing verified:\n{ran}"
    );
    assert!(
        first.contains("checks.max_send_error_rate: 100.000% of sends refused or failed"),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_rule_that_never_matches_fails_the_run() {
    let ran = run(&["target.ws-json.push.when.type=\"nomatch\""]).await;
    ran.expect_code(1);
    let first = ran.verdict();
    assert!(
        first.starts_with("FAIL: checks.max_protocol_errors: ")
            && first.contains(r#"e.g. protocol: "unmatched frame: {"type":"msg""#),
        "{ran}"
    );
    assert!(
        first.contains("; checks.max_repaired_rate: ")
            && first.contains("deliveries arrived only through the final verification sync"),
        "{ran}"
    );
}
