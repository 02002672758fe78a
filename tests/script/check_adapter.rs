//! `msgstorm check-adapter`: the conformance cases run against a user's own adapter and
//! server. The shipped adapter passes every case against the reference server; an adapter
//! that drops the conv/seq of its pushes is caught (a fetch after a reconnect hands out
//! again what was pushed: duplicates), naming the case.

use super::native::scenario_with;
use crate::common::run::{msgstorm, target, Work};
use crate::common::{config, start};

/// `check-adapter` of the shipped adapter with `edit` applied, against a fresh server.
async fn check(edit: impl Fn(String) -> String) -> crate::common::run::Ran {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario_with(&work, &target(&server), edit);
    let file = work.write("scenario.toml", &text);
    let out = work.path("checks");
    let ran = msgstorm(&[
        "check-adapter",
        &file.display().to_string(),
        "--out",
        &out.display().to_string(),
    ])
    .await;
    server.shutdown().await.expect("server stops");
    ran
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_adapter_passes_every_case_against_its_server() {
    let ran = check(|s| s).await;
    ran.expect_code(0);
    for case in [
        "login",
        "direct",
        "group",
        "late-fetch",
        "reconnect",
        "unreachable",
    ] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with(&format!("pass {case:<12}"))),
            "{case}\n{ran}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_adapter_that_drops_push_positions_fails_naming_the_case_and_the_duplicates() {
    let ran = check(|s| {
        s.replace(
            "return { push = f.body, conv = f.conv, seq = f.seq, from = f.from }",
            "return { push = f.body, from = f.from }",
        )
    })
    .await;
    ran.expect_code(1);
    let failed = ran
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL reconnect"))
        .unwrap_or_else(|| panic!("the reconnect case fails\n{ran}"));
    assert!(failed.contains("checks.max_duplicated"), "{failed}");
}
