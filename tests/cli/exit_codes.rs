//! Exit codes are a contract: 0 every check passed, 1 a check failed (and the report names
//! it), 2 bad usage or scenario (`error: FILE:LINE: KEY: …` on stderr, nothing connects),
//! 3 target unreachable (the message names the target), 4 msgstorm itself failed (e.g. the
//! result could not be written after the run). One test per class of mistake.

use crate::common::run::{msgstorm, msgstorm_sync, Ran, Work};

/// A valid scenario aimed at a port nothing listens on: if validation wrongly let a
/// mistake through, the run would end with exit 3, not 2.
const VALID: &str = r#"name = "exits"
seed = 1

[target]
url = "ws://127.0.0.1:1/ws"

[population]
users = 10
login_rate = 100

[[traffic]]
name = "chat"
kind = "direct"
senders = 2
receivers = 3
rate = 12
duration = "1s"
"#;

/// The 1-based line of `VALID` (or a variant) holding `needle`.
fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("`{needle}` not in the scenario"))
        + 1
}

/// Runs `msgstorm run` on `VALID` with `from` replaced by `to` (plus `extra` args), and
/// checks it exits 2 with `error: FILE:LINE: KEY:` where LINE is the line of `to`.
fn expect_scenario_error(from: &str, to: &str, extra: &[&str], key: &str) -> Ran {
    assert!(VALID.contains(from), "`{from}` not in the scenario");
    let text = VALID.replace(from, to);
    let work = Work::new();
    let file = work.write("s.toml", &text);
    let file = file.to_str().expect("utf-8 temp path");
    let mut args = vec!["run", file, "-q", "--out", "unused"];
    args.extend_from_slice(extra);
    let ran = msgstorm_sync(&args);
    ran.expect_code(2);
    let want = format!("error: {file}:{}: {key}: ", line_of(&text, to));
    assert!(
        ran.stderr.lines().any(|l| l.starts_with(&want)),
        "stderr lacks `{want}`:\n{ran}"
    );
    assert!(
        ran.stdout.is_empty(),
        "a bad scenario printed a report:\n{ran}"
    );
    ran
}

#[test]
fn unknown_key_exits_2_naming_file_line_and_key() {
    let ran = expect_scenario_error("rate = 12", "rat = 12", &[], "traffic[0].rat");
    assert!(ran.stderr.contains("unknown key"), "{ran}");
}

#[test]
fn negative_rate_exits_2_naming_the_rate() {
    let ran = expect_scenario_error("rate = 12", "rate = -5", &[], "traffic[0].rate");
    assert!(ran.stderr.contains("-5"), "{ran}");
}

#[test]
fn zero_rate_exits_2_naming_the_rate() {
    expect_scenario_error("rate = 12", "rate = 0", &[], "traffic[0].rate");
}

#[test]
fn malformed_url_exits_2_naming_target_url() {
    let ran = expect_scenario_error(
        "url = \"ws://127.0.0.1:1/ws\"",
        "url = \"ws//127.0.0.1:1/ws\"",
        &[],
        "target.url",
    );
    assert!(ran.stderr.contains("ws//127.0.0.1:1/ws"), "{ran}");
}

#[test]
fn more_senders_than_users_exits_2_naming_senders() {
    expect_scenario_error("senders = 2", "senders = 11", &[], "traffic[0].senders");
}

#[test]
fn tiny_rates_and_huge_durations_exit_2_not_101() {
    expect_scenario_error("rate = 12", "rate = 1e-300", &[], "traffic[0].rate");
    expect_scenario_error(
        "login_rate = 100",
        "login_rate = 1e-300",
        &[],
        "population.login_rate",
    );
    expect_scenario_error(
        "duration = \"1s\"",
        "duration = \"18446744073709551615s\"",
        &[],
        "traffic[0].duration",
    );
    expect_scenario_error(
        "name = \"exits\"",
        "drain = \"9999999999999s\"",
        &[],
        "drain",
    );
    let work = Work::new();
    let file = work.write("s.toml", VALID);
    let file = file.to_str().expect("utf-8 temp path");
    for set in [
        "population.login_rate=1e-300",
        "target.heartbeat=99999999999s",
    ] {
        let ran = msgstorm_sync(&["run", file, "-q", "--set", set]);
        ran.expect_code(2);
        assert!(ran.stderr.contains("error: --set:0: "), "{ran}");
    }
}

#[test]
fn duplicate_keys_and_non_utf8_files_exit_2_naming_the_line() {
    let work = Work::new();
    let text = VALID.replace("rate = 12", "rate = 12\nrate = 13");
    let file = work.write("dup.toml", &text);
    let file = file.to_str().expect("utf-8 temp path");
    let ran = msgstorm_sync(&["validate", file]);
    ran.expect_code(2);
    let want = format!(
        "error: {file}:{}: traffic[0].rate: duplicate key",
        line_of(&text, "rate = 13")
    );
    assert!(ran.stderr.contains(&want), "{ran}");

    let mut bytes = VALID.as_bytes().to_vec();
    let at = VALID.find("chat").expect("chat");
    bytes[at] = 0xC3; // a lead byte without its continuation
    let bad = work.path("latin1.toml");
    std::fs::write(&bad, &bytes).expect("write");
    let bad = bad.to_str().expect("utf-8 temp path");
    let ran = msgstorm_sync(&["validate", bad]);
    ran.expect_code(2);
    let want = format!(
        "error: {bad}:{}: encoding: byte 0xC3",
        line_of(VALID, "chat")
    );
    assert!(ran.stderr.contains(&want), "{ran}");
}

#[test]
fn bad_set_override_exits_2_quoting_the_override() {
    let text = VALID;
    let work = Work::new();
    let file = work.write("s.toml", text);
    let file = file.to_str().expect("utf-8 temp path");
    let ran = msgstorm_sync(&["run", file, "-q", "--set", "traffic[0].rate=-5"]);
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("--set:0: traffic[0].rate: ")
            && ran.stderr.contains("traffic[0].rate=-5"),
        "{ran}"
    );
    // The same key set to a good value runs (and finds nothing listening: exit 3).
    msgstorm_sync(&["run", file, "-q", "--set", "traffic[0].rate=20"]).expect_code(3);
}

#[test]
fn validate_exits_0_for_a_good_scenario_and_2_for_a_bad_one() {
    let work = Work::new();
    let good = work.write("good.toml", VALID);
    let ran = msgstorm_sync(&["validate", good.to_str().expect("utf-8")]);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok"), "{ran}");
    let text = VALID.replace("users = 10", "users = -3");
    let bad = work.write("bad.toml", &text);
    let bad = bad.to_str().expect("utf-8");
    let ran = msgstorm_sync(&["validate", bad]);
    ran.expect_code(2);
    let want = format!(
        "error: {bad}:{}: population.users: ",
        line_of(&text, "users = -3")
    );
    assert!(ran.stderr.contains(&want), "{ran}");
    // Every shipped example validates (the adapter scripts and .proto files beside them
    // are validated through the scenarios that name them).
    for entry in std::fs::read_dir("scenarios").expect("scenarios/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let ran = msgstorm_sync(&["validate", path.to_str().expect("utf-8")]);
        ran.expect_code(0);
    }
}

#[test]
fn unreachable_target_exits_3_naming_it() {
    let work = Work::new();
    let file = work.write("s.toml", VALID);
    let ran = msgstorm_sync(&["run", file.to_str().expect("utf-8"), "-q"]);
    ran.expect_code(3);
    assert!(
        ran.stderr.contains("unreachable") && ran.stderr.contains("ws://127.0.0.1:1/ws"),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_check_exits_1_and_the_report_names_it() {
    // The embedded server (no [target]), a second of traffic, an impossible latency bound.
    let text = r#"name = "too-strict"
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

[checks]
max_lost = 0
e2e_p99 = "1us"
"#;
    let work = Work::new();
    let file = work.write("s.toml", text);
    let out = work.path("out");
    let ran = msgstorm(&[
        "run",
        file.to_str().expect("utf-8"),
        "-q",
        "--out",
        out.to_str().expect("utf-8"),
    ])
    .await;
    ran.expect_code(1);
    assert!(
        ran.verdict().starts_with("FAIL: checks.e2e_p99"),
        "the summary line must name the failed check:\n{ran}"
    );
    assert!(!ran.verdict().contains("checks.max_lost"), "{ran}");
    assert!(
        out.join("result.json").is_file(),
        "a failed run still writes its result"
    );
}

#[test]
fn unusable_out_folder_exits_2_before_running() {
    let work = Work::new();
    let file = work.write("not-a-folder", "");
    let out = file.join("results");
    let ran = msgstorm_sync(&["run", "--out", out.to_str().expect("utf-8 path"), "-q"]);
    ran.expect_code(2);
    assert!(ran.stderr.contains("Not a directory"), "{ran}");
    assert!(
        ran.took < std::time::Duration::from_secs(5),
        "refused before the run: {ran}"
    );
    assert!(ran.stdout.is_empty(), "{ran}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unwritable_result_after_the_run_exits_4_and_still_prints_the_report() {
    // The embedded server, a second of traffic, checks that pass.
    let text = r#"name = "unwritable"
drain = "2s"

[population]
users = 6
login_rate = 200

[[traffic]]
name = "chat"
kind = "direct"
senders = 2
receivers = 3
rate = 20
duration = "1s"

[checks]
max_lost = 0
"#;
    let work = Work::new();
    let file = work.write("s.toml", text);
    let out = work.path("out");
    // Once the run has created its folder, `result.json` becomes a folder: renaming the
    // finished result onto it fails even for root.
    let blocker = out.join("result.json");
    let block = async {
        let start = std::time::Instant::now();
        while !out.is_dir() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(20),
                "the run never created {}",
                out.display()
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        std::fs::create_dir(&blocker).expect("a folder in the place of result.json");
    };
    let args = [
        "run",
        file.to_str().expect("utf-8"),
        "-q",
        "--out",
        out.to_str().expect("utf-8"),
    ];
    let (ran, ()) = tokio::join!(msgstorm(&args), block);
    ran.expect_code(4);
    assert!(
        ran.verdict().starts_with("PASS"),
        "the report is printed first:\n{ran}"
    );
    assert!(
        ran.stderr.contains("error: cannot write") && ran.stderr.contains("result.json"),
        "the error names the file:\n{ran}"
    );
}
