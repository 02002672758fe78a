//! `msgstorm report result.json` is a pure function of the result file: it prints exactly
//! the report the run printed and exits with the run's exit code; a result file of another
//! format version is refused with exit 2 and a message naming the file and the version.

use crate::common::run::{msgstorm, Ran, Work};

/// A short run against the embedded server; `checks` decides whether it passes.
async fn short_run(work: &Work, checks: &str) -> (Ran, String) {
    let text = format!(
        r#"name = "reprint"
drain = "2s"

[population]
users = 12
login_rate = 200

[[traffic]]
name = "chat"
kind = "direct"
senders = 3
receivers = 6
rate = 60
duration = "1s"

[[traffic]]
name = "groups"
kind = "group"
groups = 2
group_size = 4
rate = 10
duration = "1s"

[checks]
{checks}
"#
    );
    let file = work.write("s.toml", &text);
    let out = work.path("out");
    let ran = msgstorm(&[
        "run",
        file.to_str().expect("utf-8"),
        "-q",
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    let result = out.join("result.json");
    assert!(result.is_file(), "no result file\n{ran}");
    (ran, result.to_str().expect("utf-8").to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_reprints_a_passing_run_exactly_with_exit_0() {
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0\nmax_duplicated = 0").await;
    ran.expect_code(0);
    let again = msgstorm(&["report", &result]).await;
    again.expect_code(0);
    assert_eq!(again.stdout, ran.stdout, "the reprinted report differs");
    assert!(again.verdict().starts_with("PASS"), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_reprints_a_failing_run_exactly_with_exit_1() {
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0\nack_p99 = \"1us\"").await;
    ran.expect_code(1);
    assert!(ran.verdict().starts_with("FAIL: checks.ack_p99"), "{ran}");
    let again = msgstorm(&["report", &result]).await;
    again.expect_code(1);
    assert_eq!(again.stdout, ran.stdout, "the reprinted report differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_refuses_another_schema_version_with_exit_2() {
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0").await;
    ran.expect_code(0);
    let text = std::fs::read_to_string(&result).expect("read result");
    let mut value: serde_json::Value = serde_json::from_str(&text).expect("result is JSON");
    value["schema_version"] = 999.into();
    let future = work.write(
        "future.json",
        &serde_json::to_string(&value).expect("serialize"),
    );
    let future = future.to_str().expect("utf-8");
    let refused = msgstorm(&["report", future]).await;
    refused.expect_code(2);
    assert!(refused.stdout.is_empty(), "{refused}");
    assert!(
        refused.stderr.contains(future)
            && refused.stderr.contains("schema_version")
            && refused.stderr.contains("999"),
        "the message must name the file and the version:\n{refused}"
    );
    // Merging it with a good shard is refused the same way.
    msgstorm(&["report", &result, future]).await.expect_code(2);
    // Not a result at all: exit 2 too.
    let junk = work.write("junk.json", "{\"hello\": 1}");
    msgstorm(&["report", junk.to_str().expect("utf-8")])
        .await
        .expect_code(2);
}
