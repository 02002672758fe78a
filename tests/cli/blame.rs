//! Errors blame the side that failed.
//!
//! - A server killed mid-run (SIGKILL of a `msgstorm serve` child) costs each connection
//!   one error, `closed_by_peer` — not also `protocol` for the stream that ended without a
//!   WebSocket close.
//! - The generator's own failures (here a source address this host does not have: the bind
//!   fails with `EADDRNOTAVAIL` before any packet leaves) are errors of kind `generator` and
//!   a finding, never `closed_by_peer`; a run in which every connection failed so exits 4
//!   (msgstorm failed, the target was never tried), with the result still written.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use msgstorm::artifact::Artifact;
use msgstorm::metrics::Counter;
use msgstorm::serve::ServerHandle;

use crate::cli::report::result_schema;
use crate::common::run::{msgstorm, run_text, Ran, Running, Work};
use crate::common::{config, http_get, metric, start, ChildServer, SECRET};

/// Error counts by kind name.
fn kinds(a: &Artifact) -> BTreeMap<&'static str, u64> {
    a.metrics.errors().map(|(k, n, _)| (k.name(), n)).collect()
}

/// Users of the killed-server runs.
const USERS: u64 = 8;

/// Polls the child server's `/metrics` until `USERS` are online and a message was accepted
/// (traffic runs), while `run` is still going; panics after 30 s.
async fn wait_for_traffic(server: &ChildServer, run: &mut Running) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(!run.exited(), "the run ended before the server was killed");
        let text = http_get(server.addr, "/metrics").await;
        let online = metric(&text, "serve_online_users").unwrap_or(0.0);
        let accepted = metric(&text, "serve_messages_accepted_total").unwrap_or(0.0);
        if online as u64 == USERS && accepted >= 1.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{online} of {USERS} users online, {accepted} accepted after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_costs_each_connection_one_closed_by_peer() {
    let server = ChildServer::start(&[]);
    let work = Work::new();
    // Traffic runs 5 s from the moment every user is in; the server dies as it starts.
    let file = work.write(
        "killed.toml",
        &format!(
            r#"name = "killed"
drain = "1s"

[target]
url = "{}"

[target.auth]
secret = "{SECRET}"

[population]
users = {USERS}
login_rate = 400

[[traffic]]
kind = "direct"
senders = 4
receivers = 4
interval = "20ms"
duration = "5s"
"#,
            server.ws_url()
        ),
    );
    let out = work.path("out");
    let (file, out_arg) = (file.display().to_string(), out.display().to_string());
    let mut run = Running::start(&["run", &file, "--out", &out_arg, "-q"]);
    wait_for_traffic(&server, &mut run).await;
    server.signal("KILL");
    let ran = run.finish().await;
    let a = Artifact::read(&out.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json: {e}\n{ran}"));
    let errors = kinds(&a);
    assert_eq!(
        errors.get("closed_by_peer"),
        Some(&USERS),
        "one closed_by_peer per lost connection: {errors:?}\n{ran}"
    );
    assert_eq!(a.metrics.count(Counter::Disconnects), USERS, "{ran}");
    // Reconnecting to a dead port is refused; nothing else went wrong.
    assert!(
        errors
            .keys()
            .all(|k| ["closed_by_peer", "connect_refused"].contains(k)),
        "{errors:?}\n{ran}"
    );
    // The target was reached and msgstorm did its work: neither exit 3 nor exit 4.
    assert!(matches!(ran.code, 0 | 1), "{ran}");
}

/// The in-process server's `[target]` with `source_addresses`, and a small direct traffic.
fn from_sources(server: &ServerHandle, sources: &str) -> String {
    format!(
        r#"name = "sources"
drain = "1s"

[target]
url = "{}"
source_addresses = [{sources}]

[target.auth]
secret = "{}"

[population]
users = 4
login_rate = 400

[[traffic]]
kind = "direct"
senders = 2
receivers = 2
interval = "50ms"
messages = 3
"#,
        server.ws_url(),
        server.secret()
    )
}

/// The text report's generator finding, if any.
fn generator_finding(ran: &Ran) -> Option<&str> {
    ran.stdout
        .lines()
        .find(|l| l.starts_with("note: the generator ran out of its own resources"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_out_of_addresses_is_no_server_failure_and_exits_4() {
    let server = start(config()).await;
    let work = Work::new();
    // 192.0.2.1 (TEST-NET-1) is on no host here: every bind fails before a packet leaves.
    let (ran, a) = run_text(&work, &from_sources(&server, "\"192.0.2.1\"")).await;
    ran.expect_code(4);
    assert!(
        ran.stderr
            .contains("the generator failed every connection on its own side"),
        "{ran}"
    );
    let errors = kinds(&a);
    let attempts = a.metrics.count(Counter::ConnectAttempts);
    assert!(attempts >= 4, "{ran}");
    assert_eq!(errors, BTreeMap::from([("generator", attempts)]), "{ran}");
    let finding = generator_finding(&ran).unwrap_or_else(|| panic!("no finding\n{ran}"));
    assert!(
        finding.contains("192.0.2.1") && finding.contains("EADDRNOTAVAIL"),
        "{finding}"
    );
    // The kind is in the result's schema, the finding in the JSON report.
    let (schemas, schema) = result_schema();
    let path = work.path("out").join("result.json");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("result.json")).expect("JSON");
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json does not match its schema: {e:#}");
    }
    let json = msgstorm(&["report", &path.display().to_string(), "--json"]).await;
    let report: serde_json::Value = serde_json::from_str(&json.stdout).expect("report JSON");
    assert_eq!(report["findings"][0]["kind"], "generator", "{json}");
    assert_eq!(report["findings"][0]["errors"], attempts, "{json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generator_short_of_addresses_for_some_users_still_measures_the_rest() {
    let server = start(config()).await;
    let work = Work::new();
    // User i binds source i mod 2: users 0 and 2 connect, users 1 and 3 cannot.
    let text = from_sources(&server, "\"127.0.0.1\", \"192.0.2.1\"");
    let (ran, a) = run_text(&work, &text).await;
    assert_ne!(ran.code, 4, "the target was measured\n{ran}");
    assert!(a.metrics.count(Counter::LoginOk) >= 2, "{ran}");
    let errors = kinds(&a);
    assert!(
        errors.get("generator").is_some_and(|&n| n >= 2),
        "{errors:?}\n{ran}"
    );
    assert_eq!(errors.get("closed_by_peer"), None, "{errors:?}\n{ran}");
    assert!(generator_finding(&ran).is_some(), "{ran}");
}
