//! W3 (`scenarios/netty-request.toml`) scaled down to a few seconds: every request pattern
//! keeps its steps in the result and in the report, each step with Little's law checked
//! and the knee named.

use msgstorm::report::Report;

use crate::common::run::{msgstorm, Work};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn w3_keeps_every_request_pattern_and_names_the_knee() {
    let work = Work::new();
    let out = work.path("out");
    let scenario = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/netty-request.toml");
    let ran = msgstorm(&[
        "run",
        scenario,
        "--out",
        out.to_str().expect("utf-8 path"),
        "-q",
        "--set",
        "population.users=40",
        "--set",
        "traffic[0].concurrency=20",
        "--set",
        "traffic[0].duration=2s",
        "--set",
        "traffic[1].start=2s",
        "--set",
        "traffic[1].sweep=[5, 10, 20, 40]",
        "--set",
        "traffic[1].step_duration=2s",
    ])
    .await;
    ran.expect_code(0);
    let a = msgstorm::artifact::Artifact::read(&out.join("result.json")).expect("result.json");
    let names: Vec<(&str, &str, &[u32])> = a
        .request_sweeps
        .iter()
        .map(|s| (s.name.as_str(), s.kind.as_str(), &s.steps[..]))
        .collect();
    assert_eq!(
        names,
        [
            ("time", "time", &[20][..]),
            ("kv-sweep", "kv_get", &[5, 10, 20, 40][..])
        ]
    );
    let report = Report::new(&a);
    let tables: Vec<(&str, Vec<u32>)> = report
        .sweeps
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.rows.iter().map(|r| r.concurrency).collect(),
            )
        })
        .collect();
    assert_eq!(
        tables,
        [("time", vec![20]), ("kv-sweep", vec![5, 10, 20, 40])],
        "{ran}"
    );
    for row in report.sweeps.iter().flat_map(|s| &s.rows) {
        assert!(row.tps > 0.0 && row.little > 0.0, "{row:?}");
    }
    let text = &ran.stdout;
    assert!(text.contains("REQUESTS time (time)"), "{ran}");
    assert!(text.contains("REQUESTS kv-sweep (kv_get)"), "{ran}");
    assert!(text.contains("| Little's law"), "{ran}");
    assert!(
        text.contains("kv-sweep: knee at concurrency ")
            || text.contains("kv-sweep: throughput still grows at concurrency 40"),
        "the knee is not named:\n{ran}"
    );
}
