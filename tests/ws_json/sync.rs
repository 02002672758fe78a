//! Fetching missed messages from the reference server through `native` and `ws-json`:
//! a fetch reads each conversation from where the user has everything, even when
//! the server's seqs skip; a second run against a reused server reads only its own messages;
//! a message the server stores twice counts as duplicated whether it came by push or by the
//! catch-up after a reconnect; and a `page_items` path that matches nothing is an error.

use msgstorm::artifact::Artifact;
use msgstorm::driver::native::NativeDriver;
use msgstorm::driver::ws_json::WsJsonDriver;
use msgstorm::driver::{Driver, Resume, Session, UserCtx};
use msgstorm::ledger::Delivery;
use msgstorm::metrics::Counter;
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::{SeqScope, ServeConfig, ServerHandle};

use crate::common::run::{run_text, Ran, Work};
use crate::common::{
    config, connect, driver, fault_log, http_get, metric, start, ChildServer, Client, SECRET,
};
use crate::ws_json::native::{scenario, ws_json_tables};

/// The `[target.ws-json]` options of the shipped scenario.
fn ws_json_options() -> toml::Table {
    let tables: toml::Table = toml::from_str(&ws_json_tables()).expect("ws-json tables");
    tables["target"]["ws-json"]
        .as_table()
        .expect("[target.ws-json]")
        .clone()
}

/// Messages the server has returned by `sync` so far.
async fn synced(server: &ServerHandle) -> f64 {
    let text = http_get(server.addr(), "/metrics").await;
    metric(&text, "serve_messages_synced_total").unwrap_or(0.0)
}

/// `a` sends `n` messages to `b` and as many to `c`, interleaved, so that with one counter
/// for the whole server `b`'s conversation gets every other seq.
async fn interleaved(a: &mut Client, n: usize, tag: &str) -> Vec<String> {
    let mut to_b = Vec::new();
    for i in 0..n {
        let body = format!("{tag}{i}");
        a.send_to("b", &body).await;
        a.send_to("c", &format!("{tag}{i} for c")).await;
        to_b.push(body);
    }
    to_b
}

/// Fetches `b`'s messages twice through `D`, `b` offline while they are sent: the second
/// fetch reads only the new ones, though `b`'s seqs skip (1, 3, 5, …).
async fn second_fetch_reads_only_what_is_new<D: Driver>(options: toml::Table) {
    let server = start(ServeConfig {
        seqs: SeqScope::Server,
        ..config()
    })
    .await;
    let driver: D = driver(&server, options);
    let b = UserCtx {
        ix: 1,
        id: "b".to_owned(),
    };
    let mut a = Client::login(&server.ws_url(), "a", server.secret()).await;
    let first = interleaved(&mut a, 4, "first").await;
    let mut session = connect(&driver, &b, Resume::<D>::default()).await;
    let mut out = Vec::new();
    session.fetch_missed(&mut out).await.expect("first fetch");
    assert_eq!(out, first);
    let resume = session.close().await;

    let second = interleaved(&mut a, 2, "second").await;
    let before = synced(&server).await;
    let mut session = connect(&driver, &b, resume).await;
    out.clear();
    session.fetch_missed(&mut out).await.expect("second fetch");
    assert_eq!(out, second);
    assert_eq!(
        synced(&server).await - before,
        2.0,
        "the second fetch read the conversation again from its start"
    );
    session.close().await;
    server.shutdown().await.expect("server stops");
}

/// A server numbering every message from one counter (seqs skip within a
/// conversation) must not make every fetch read the whole conversation again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_read_on_from_the_last_page_when_the_servers_seqs_skip() {
    second_fetch_reads_only_what_is_new::<NativeDriver>(toml::Table::new()).await;
    second_fetch_reads_only_what_is_new::<WsJsonDriver>(ws_json_options()).await;
}

/// Direct and group chat; some users log in late and fetch what they missed.
const LATE: &str = r#"
[population]
users = 40
login_rate = 400
late = { count = 5, at = "1500ms" }

[[traffic]]
name = "chat"
kind = "direct"
senders = 8
receivers = 16
messages = 2
interval = "100ms"

[[traffic]]
name = "groups"
kind = "group"
groups = 3
group_size = 8
senders_per_group = 2
messages = 4
interval = "100ms"

[ledger]
verify_sync = true

[checks]
max_lost = 0
max_duplicated = 0
"#;

/// The scenario `body` through `driver` against the `msgstorm serve` child `server`.
fn against(driver: &str, server: &ChildServer, body: &str) -> String {
    let tables = if driver == "ws-json" {
        ws_json_tables()
    } else {
        String::new()
    };
    format!(
        "name = \"reuse\"\nseed = 9\ndrain = \"2s\"\n\n[target]\ndriver = \"{driver}\"\n\
         url = \"{}\"\n\n[target.auth]\nsecret = \"{SECRET}\"\n\n{tables}\n{body}",
        server.ws_url()
    )
}

/// The same scenario run twice through `driver` against one server started with
/// `server_args`: the second run receives what the first did, all verified, and nothing from
/// the first run. A catch-up or final verification that re-read every conversation from
/// its start would show received ×2 and thousands of "body not from this run".
async fn second_run_reads_only_its_own_messages(driver: &str, server_args: &[&str]) {
    let server = ChildServer::start(server_args);
    let text = against(driver, &server, LATE);
    let mut runs: Vec<(Ran, Artifact, Delivery)> = Vec::new();
    for _ in 0..2 {
        let work = Work::new();
        let (ran, artifact) = run_text(&work, &text).await;
        let d = artifact.ledger.summary();
        runs.push((ran, artifact, d));
    }
    for (ran, artifact, d) in &runs {
        ran.expect_code(0);
        let errors: Vec<_> = artifact.metrics.errors().collect();
        assert!(errors.is_empty(), "{driver}: errors {errors:?}\n{ran}");
        assert!(d.expected > 100, "{d:?}");
        assert_eq!(
            (d.delivered, d.lost, d.duplicated),
            (d.expected, 0, 0),
            "{d:?}"
        );
        assert!(d.via_sync > 0, "late users fetched nothing: {d:?}");
    }
    let received = |i: usize| runs[i].1.metrics.count(Counter::Received);
    assert_eq!(received(1), received(0), "{driver}: {}", runs[1].0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_against_a_reused_server_reads_only_its_own_messages() {
    second_run_reads_only_its_own_messages("native", &[]).await;
    second_run_reads_only_its_own_messages("ws-json", &["--seqs", "server"]).await;
}

/// Churning receivers: what is sent while they are away comes by the catch-up sync when
/// they are back, the rest by push. 4 senders × 16 receivers × 2 messages, one send per
/// sender every 50 ms: 1.6 s of traffic, most of it while they are away (even when the
/// logins before it are slow).
const CHURN: &str = r#"
[population]
users = 20
login_rate = 400
churn = { count = 8, offline_at = "300ms", back_at = "2s" }

[[traffic]]
name = "chat"
kind = "direct"
senders = 4
receivers = 16
messages = 2
interval = "50ms"

[ledger]
verify_sync = true
"#;

/// Runs [`CHURN`] through `driver` against a server that stores about a fifth of the
/// messages twice; returns the ledger and how many second copies the server's fault log
/// lists.
async fn stored_twice(driver: &str) -> (Delivery, u64, Ran) {
    let logs = Work::new();
    let log = logs.path("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse("dup_store=0.2").expect("fault spec"),
        fault_seed: Some(24),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    let (ran, artifact) = run_text(&Work::new(), &scenario(driver, &server, CHURN)).await;
    server.shutdown().await.expect("server stops");
    let copies = fault_log(&log)
        .iter()
        .filter(|r| r["kind"] == "dup_store")
        .count() as u64;
    (artifact.ledger.summary(), copies, ran)
}

/// A second copy the server stored counts as duplicated, by push or by the
/// catch-up sync (a synced second copy used to be ignored), and nothing else does (an
/// overlap between pushes and a sync is not a duplicate).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_stored_twice_count_as_duplicated_by_push_and_by_sync() {
    for driver in ["native", "ws-json"] {
        let (d, copies, ran) = stored_twice(driver).await;
        assert!(
            copies >= 5,
            "{driver}: too few copies ({copies}) to show anything"
        );
        assert_eq!(d.expected, 128, "{driver}: {d:?}");
        assert!(
            d.via_sync > 0,
            "{driver}: nothing came by the catch-up: {d:?}"
        );
        assert_eq!(d.duplicated, copies, "{driver}: {d:?}\n{ran}");
        assert_eq!(
            (d.delivered, d.lost, d.reordered),
            (d.expected, 0, 0),
            "{driver}: {d:?}"
        );
    }
}

/// A `page_items` path that matches nothing in a page reply is a protocol error
/// naming the path and the reply, not an empty page (which would pass for "nothing missed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_items_path_that_matches_nothing_is_a_protocol_error() {
    let server = start(config()).await;
    let text = scenario("ws-json", &server, LATE)
        .replace("page_items = \"msgs\"", "page_items = \"messages\"");
    assert!(text.contains("\"messages\""), "{text}");
    let (ran, artifact) = run_text(&Work::new(), &text).await;
    server.shutdown().await.expect("server stops");
    let (_, count, examples) = artifact
        .metrics
        .errors()
        .find(|(kind, _, _)| kind.name() == "protocol")
        .unwrap_or_else(|| panic!("no protocol error\n{ran}"));
    assert!(count > 0);
    assert!(
        examples.iter().any(|e| e.contains(
            "`page_items` = `messages` matches nothing in the page reply {\"type\":\"sync_page\""
        )),
        "{examples:?}"
    );
}
