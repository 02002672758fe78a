//! `msgstorm report result.json` is a pure function of the result file: it prints exactly
//! the report the run printed and exits with the run's exit code; a result file of another
//! format version is refused with exit 2 and a message naming the file and the version.
//! Shards merge only once each and only within one run (exit 2 otherwise); a result missing
//! shards is reported INCOMPLETE with exit 1, never PASS.

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

/// `result` rewritten as shard `index` of `count` of run `run_id`, saved as `name`.
fn as_shard(work: &Work, result: &str, name: &str, index: u32, count: u32, run_id: &str) -> String {
    let mut value = read_json(result);
    value["run_id"] = run_id.into();
    value["shards"][0]["index"] = index.into();
    value["shards"][0]["count"] = count.into();
    for p in value["processes"].as_array_mut().expect("processes") {
        p["shard"] = index.into();
    }
    let text = serde_json::to_string(&value).expect("serialize");
    work.write(name, &text).to_str().expect("utf-8").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_refuses_a_shard_twice_and_marks_missing_shards_incomplete() {
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0").await;
    ran.expect_code(0);
    let run_id = read_json(&result)["run_id"]
        .as_str()
        .expect("run_id")
        .to_owned();

    // The same file twice: refused, naming it, nothing printed on stdout.
    let twice = msgstorm(&["report", &result, &result]).await;
    twice.expect_code(2);
    assert!(twice.stdout.is_empty(), "{twice}");
    assert!(
        twice.stderr.contains(&format!(
            "{result}: shard 0/1 of run {run_id} is also in {result}: the same shard given twice"
        )),
        "{twice}"
    );

    // A lone shard 0/2 is not the run's result.
    let half = as_shard(&work, &result, "half0.json", 0, 2, &run_id);
    let lone = msgstorm(&["report", &half]).await;
    lone.expect_code(1);
    assert!(
        lone.verdict()
            .starts_with("INCOMPLETE: 1 of 2 shards: missing shard 1; FAIL: run.shards — "),
        "{lone}"
    );
    let json = msgstorm(&["report", &half, "--json"]).await;
    json.expect_code(1);
    let r: serde_json::Value = serde_json::from_str(&json.stdout).expect("report --json is JSON");
    assert_eq!(r["verdict"], "incomplete", "{json}");

    // Shards 0 and 2 of 3: shard 1 is missing.
    let (s0, s2) = (
        as_shard(&work, &result, "s0.json", 0, 3, &run_id),
        as_shard(&work, &result, "s2.json", 2, 3, &run_id),
    );
    let gap = msgstorm(&["report", &s0, &s2]).await;
    gap.expect_code(1);
    assert!(
        gap.verdict()
            .starts_with("INCOMPLETE: 2 of 3 shards: missing shard 1; FAIL: "),
        "{gap}"
    );

    // Shard 1 of another run, or of a run of 3 shards: refused, naming both files.
    let other = as_shard(&work, &result, "other.json", 1, 2, "0000beef");
    let mixed = msgstorm(&["report", &half, &other]).await;
    mixed.expect_code(2);
    assert!(
        mixed.stderr.contains(&format!(
            "{other}: run 0000beef is not {run_id}: only shards of one run merge (as in {half})"
        )),
        "{mixed}"
    );
    let counts = msgstorm(&["report", &half, &s2]).await;
    counts.expect_code(2);
    assert!(
        counts
            .stderr
            .contains(&format!("{s2}: shard count 3 is not 2")),
        "{counts}"
    );
}

/// `schema/result.schema.json`, compiled (the schema itself is checked against its
/// metaschema on the way).
pub fn result_schema() -> (boon::Schemas, boon::SchemaIndex) {
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.enable_format_assertions();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/schema/result.schema.json");
    let index = compiler
        .compile(path, &mut schemas)
        .unwrap_or_else(|e| panic!("{path}: {e:#}"));
    (schemas, index)
}

fn read_json(path: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_json_matches_its_schema() {
    let (schemas, schema) = result_schema();
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0\ne2e_p99 = \"1s\"").await;
    ran.expect_code(0);
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/report/testdata/result.json"
    );
    for path in [result.as_str(), fixture] {
        let value = read_json(path);
        if let Err(e) = schemas.validate(&value, schema) {
            panic!("{path} does not match schema/result.schema.json: {e:#}");
        }
    }
    // A watched target's TCP byte counts are part of it.
    let mut with_tcp = read_json(&result);
    let mut target = with_tcp["processes"][0].clone();
    target["generator"] = false.into();
    target["tcp"] = serde_json::json!([[1, 100, 200], [2, 300, 400]]);
    with_tcp["processes"]
        .as_array_mut()
        .expect("processes")
        .push(target);
    if let Err(e) = schemas.validate(&with_tcp, schema) {
        panic!("a target's tcp does not match schema/result.schema.json: {e:#}");
    }
    // The schema is strict enough to notice a wrong field.
    let mut value = read_json(&result);
    value["checks"][0]["op"] = "<".into();
    assert!(schemas.validate(&value, schema).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_json_gives_checks_and_latencies_as_numbers() {
    let work = Work::new();
    let (ran, result) = short_run(&work, "max_lost = 0\nack_p99 = \"1us\"").await;
    ran.expect_code(1);
    let json = msgstorm(&["report", &result, "--json"]).await;
    json.expect_code(1);
    let r: serde_json::Value = serde_json::from_str(&json.stdout).expect("report --json is JSON");
    assert_eq!(r["verdict"], "fail", "{json}");
    let ack = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["key"] == "checks.ack_p99")
        .expect("the ack check");
    assert_eq!(ack["metric"], "ack_p99_us");
    assert_eq!(ack["op"], "<=");
    assert_eq!(ack["bound"], 1.0);
    assert_eq!(ack["unit"], "us");
    assert_eq!(ack["passed"], false);
    let p99 = r["latency_us"]["send_ack"]["p99"]
        .as_u64()
        .expect("send_ack p99");
    assert_eq!(ack["value"].as_f64(), Some(p99 as f64));
    assert!(r["delivery"]["delivered"].as_u64().expect("delivered") > 0);
    assert!(r["series"].as_array().is_some_and(|s| !s.is_empty()));
}
