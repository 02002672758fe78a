//! `msgstorm compare BASE NEW` on a real run's result: a table of every headline metric,
//! gates that fail with exit 1 naming the metric, runs of different scenarios refused with
//! exit 2 unless allowed, bad gates refused with exit 2, and `--html` writes the overlay page.

use crate::common::run::{msgstorm, Work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_gates_and_scenario_refusal() {
    let work = Work::new();
    let file = work.write(
        "s.toml",
        r#"name = "cmp"
drain = "2s"

[population]
users = 10
login_rate = 100

[[traffic]]
kind = "direct"
senders = 5
receivers = 5
rate = 50
duration = "1s"
"#,
    );
    let out = work.path("out");
    msgstorm(&[
        "run",
        file.to_str().expect("utf-8"),
        "-q",
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await
    .expect_code(0);
    let base = out.join("result.json").display().to_string();

    // A run against itself: unchanged, and the gates pass.
    let same = msgstorm(&[
        "compare",
        &base,
        &base,
        "--fail-on",
        "e2e_p99>+10%",
        "--fail-on",
        "lost>0",
    ])
    .await;
    same.expect_code(0);
    assert!(same.verdict().starts_with("PASS (2 gates)"), "{same}");
    assert!(same.stdout.contains("| e2e_p99 "), "{same}");
    assert!(same.stdout.contains("unchanged"), "{same}");

    // A gate whose condition holds fails the comparison and is named.
    let html = work.path("cmp.html");
    let failed = msgstorm(&[
        "compare",
        &base,
        &base,
        "--fail-on=e2e_p99>=+0%",
        "--html",
        html.to_str().expect("utf-8"),
    ])
    .await;
    failed.expect_code(1);
    assert!(
        failed.verdict().starts_with("FAIL: e2e_p99>=+0%"),
        "{failed}"
    );
    let page = std::fs::read_to_string(&html).expect("compare --html wrote the page");
    assert!(page.contains("base: users online") && page.contains("new: users online"));

    // Another scenario's result is refused unless allowed.
    let mut other: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&base).expect("read")).expect("json");
    other["scenario"] = "something-else".into();
    let other_file = work.write("other.json", &other.to_string());
    let other = other_file.display().to_string();
    let refused = msgstorm(&["compare", &base, &other]).await;
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("scenario `cmp`")
            && refused.stderr.contains("--allow-different-scenarios"),
        "{refused}"
    );
    msgstorm(&["compare", &base, &other, "--allow-different-scenarios"])
        .await
        .expect_code(0);

    // A gate that does not parse, or names no metric, is a usage error.
    let bad = msgstorm(&["compare", &base, &base, "--fail-on", "e2e_p99>+10 parsecs"]).await;
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("--fail-on `e2e_p99>+10 parsecs`"),
        "{bad}"
    );
    let unknown = msgstorm(&["compare", &base, &base, "--fail-on", "nonsense>1"]).await;
    unknown.expect_code(2);
    assert!(unknown.stderr.contains("no metric `nonsense`"), "{unknown}");
}
