//! The scenario is a promise, checked by default: a run that did not do what its scenario
//! asked fails with the reason in its first line, also when the scenario writes no checks —
//! a lossy server, a server that holds half the users an idle test asked for, a rate the
//! generator cannot keep (which is msgstorm's failure, exit 4, never the target's).

use crate::common::run::{msgstorm, run_text, Work};
use crate::common::{ChildServer, SECRET};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lossy_server_fails_a_scenario_without_checks() {
    let text = r#"name = "lossy"
seed = 3
drain = "2s"

[target]
driver = "loopback"

[target.loopback]
loss = 0.3
duplicate = 0.1
seed = 9

[population]
users = 40
login_rate = 400

[[traffic]]
kind = "direct"
senders = 8
receivers = 8
rate = 200
duration = "2s"
"#;
    let (ran, artifact) = run_text(&Work::new(), text).await;
    ran.expect_code(1);
    let first = ran.verdict();
    assert!(first.starts_with("FAIL: checks.max_lost: "), "{ran}");
    assert!(first.contains("checks.max_duplicated: "), "{ran}");
    let d = artifact.ledger.summary();
    assert!(d.lost > 0 && d.duplicated > 0, "{d:?}");
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("| checks.max_lost ") && l.contains("built-in")),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_test_passes_only_when_every_user_was_held_online() {
    let server = ChildServer::start(&["--max-connections", "25"]);
    let text = |users: u32| {
        format!(
            r#"name = "idle"
seed = 1
drain = "1s"

[target]
url = "{}"
connect_timeout = "2s"
auth = {{ secret = "{SECRET}" }}

[population]
users = {users}
login_rate = 100

[[traffic]]
kind = "idle"
duration = "3s"
"#,
            server.ws_url()
        )
    };
    let (ran, artifact) = run_text(&Work::new(), &text(50)).await;
    ran.expect_code(1);
    let first = ran.verdict();
    assert!(
        first.starts_with("FAIL: checks.min_login_success: "),
        "{ran}"
    );
    assert!(first.contains("checks.min_online: "), "{ran}");
    let m = &artifact.metrics;
    use msgstorm::metrics::Counter;
    let held = m.count(Counter::OnlineUserMs) as f64 / m.count(Counter::PlannedUserMs) as f64;
    assert!(held < 0.6, "25 of 50 users held: {held}");
    // The same test within the server's capacity holds every user and passes.
    let (ran, _) = run_text(&Work::new(), &text(20)).await;
    ran.expect_code(0);
    assert!(
        ran.stdout
            .lines()
            .any(|l| l.starts_with("| checks.min_online ") && l.contains("100.000%")),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_the_generator_cannot_keep_is_exit_4_and_no_verdict_on_the_target() {
    let text = r#"name = "too-fast"
seed = 3
drain = "1s"

[target]
driver = "loopback"

[population]
users = 40
login_rate = 2000

[[traffic]]
kind = "direct"
senders = 20
receivers = 20
rate = 1000000
duration = "1s"
"#;
    let work = Work::new();
    let (ran, artifact) = run_text(&work, text).await;
    ran.expect_code(4);
    let first = ran.verdict();
    assert!(
        first.starts_with("FAIL: run.generator: the generator fell behind: "),
        "{ran}"
    );
    assert!(
        first.contains("this run did not offer the asked load"),
        "{ran}"
    );
    // Planned deliveries are what the schedule made due, not what was sent.
    use msgstorm::metrics::Counter;
    let d = artifact.ledger.summary();
    let due = artifact.metrics.count(Counter::Due);
    assert_eq!(due, 1_000_000);
    assert_eq!(d.planned, due, "{d:?}");
    assert_eq!(d.unsent + d.expected, d.planned, "{d:?}");
    assert!(
        !ran.stderr.contains("unresponsive target"),
        "the generator blamed the target: {ran}"
    );
    // `size` takes no capacity from it.
    let result = work.path("out").join("result.json");
    let sized = msgstorm(&[
        "size",
        &result.display().to_string(),
        "--users",
        "1000",
        "--online",
        "0.1",
        "--rate",
        "100",
    ])
    .await;
    sized.expect_code(2);
    assert!(
        sized.stderr.contains("the generator fell behind"),
        "{sized}"
    );
}
