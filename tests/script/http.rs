//! The script driver's HTTP transports against a real HTTP server (Python's `http.server`
//! running `peers/httpchat/server.py`, shaped like Matrix's client-server API): sends as
//! requests whose answers are their acceptance, messages by long polling or by a
//! Server-Sent Events stream, late users catching up — the ledger exact either way. With
//! `[signals]`, read receipts, typing notices and presence through the script's signal
//! entry points, verified against the server's own counts.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use msgstorm::artifact::Artifact;
use msgstorm::ledger::signals::SignalDelivery;
use msgstorm::metrics::wires::Wire;
use msgstorm::metrics::Counter;
use msgstorm::vocab::SignalKind;

use crate::common::nginx::Nginx;
use crate::common::run::{msgstorm, run_file, Ran, Work};
use crate::run::transports::only_transport;

/// The HTTP chat server, on a free loopback port; killed on drop.
pub(super) struct HttpChat {
    child: Child,
    /// Its port on 127.0.0.1.
    pub(super) port: u16,
}

impl HttpChat {
    /// The server, with no options.
    pub(super) fn start() -> HttpChat {
        HttpChat::with(&[])
    }

    /// The server started with `args` after its port.
    fn with(args: &[&str]) -> HttpChat {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/httpchat/server.py");
        let mut child = Command::new("python3")
            .args([script, "0"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3 peers/httpchat/server.py");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("the server says its port");
        let port = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}"));
        HttpChat { child, port }
    }

    /// The server's own counts (`GET /stats`): receipts taken and dropped, typing notices
    /// and presence changes taken and the copies fanned out.
    fn stats(&self) -> serde_json::Value {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).expect("connect for stats");
        let ask = "GET /stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test\r\n\
                   Connection: close\r\n\r\n";
        s.write_all(ask.as_bytes()).expect("ask for stats");
        let mut answer = String::new();
        s.read_to_string(&mut answer).expect("read stats");
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        serde_json::from_str(body).unwrap_or_else(|e| panic!("stats {answer:?}: {e}"))
    }
}

impl Drop for HttpChat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The chat server writes an answer's head and body at once, as HTTP servers write a small
/// answer: the first read of each answer on a keep-alive connection holds all of it (two
/// writes, the head's and the body's, cost the bench's client a system call an answer).
#[test]
fn each_answer_of_the_chat_server_arrives_whole_in_one_read() {
    let server = HttpChat::start();
    let mut s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    let ask = "GET /stats HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer test\r\n\r\n";
    let mut buf = [0u8; 8192];
    for i in 0..20 {
        s.write_all(ask.as_bytes()).expect("ask for stats");
        let n = s.read(&mut buf).expect("read an answer");
        let answer = String::from_utf8_lossy(&buf[..n]);
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("answer {i}: the first read ends in the head: {answer:?}"));
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or_else(|| panic!("answer {i}: no Content-Length in {head:?}"));
        assert_eq!(body.len(), length, "answer {i}: {answer:?}");
    }
}

/// `scenarios/http-chat.toml` against a fresh server, with `mode` (poll or sse).
async fn run(mode: &str) -> (Ran, Artifact) {
    run_set(&[&format!("target.script.vars.mode=\"{mode}\"")]).await
}

/// `scenarios/http-chat.toml` against a fresh server, with the overrides `sets`.
async fn run_set(sets: &[&str]) -> (Ran, Artifact) {
    run_on(&HttpChat::start(), sets).await
}

/// `scenarios/http-chat.toml` against `server`, with the overrides `sets`.
async fn run_on(server: &HttpChat, sets: &[&str]) -> (Ran, Artifact) {
    let work = Work::new();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/http-chat.toml");
    let url = format!("target.url=\"http://127.0.0.1:{}\"", server.port);
    let args: Vec<&str> = std::iter::once(url.as_str())
        .chain(sets.iter().copied())
        .flat_map(|set| ["--set", set])
        .collect();
    run_file(std::path::Path::new(file), &work.path("out"), &args).await
}

/// Checks a run: it passed, every expected delivery arrived exactly once (late users'
/// included: by their fetch, or by their first poll, which goes on from where the user's
/// log stood), no error of any kind.
pub(super) fn exact(ran: &Ran, a: &Artifact) {
    ran.expect_code(0);
    let d = a.ledger.summary();
    assert!(d.expected > 500, "{d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated, d.reordered),
        (d.expected, 0, 0, 0),
        "{d:?}\n{ran}"
    );
    let errors: Vec<_> = a.metrics.errors().collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sends_and_long_polls_give_an_exact_ledger() {
    let (ran, a) = run("poll").await;
    exact(&ran, &a);
    // HTTP/1.1 alone: a connection for the sends and one for the long polls a login (and
    // one for the calls of those who make any), no other transport.
    let logins = a.metrics.count(Counter::LoginOk);
    let opened = a.metrics.count(Counter::Http1Connections);
    assert!(
        (2 * logins..=3 * logins).contains(&opened),
        "{opened} for {logins} logins"
    );
    only_transport(&a, Wire::Http1, opened);
}

/// Through nginx, which sends every answer with a body in chunked transfer coding (its
/// access log says so), the ledger is as exact as against the chat server itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_nginx, peer_openssl)),
    ignore = "nginx or openssl is not installed (scripts/test installs them)"
)]
async fn answers_in_chunked_transfer_coding_give_an_exact_ledger() {
    let server = HttpChat::start();
    let nginx = Nginx::chunked_proxy(server.port);
    let work = Work::new();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/http-chat.toml");
    let url = format!("target.url=\"http://127.0.0.1:{}\"", nginx.port);
    let (ran, a) = run_file(
        std::path::Path::new(file),
        &work.path("out"),
        &["--set", &url],
    )
    .await;
    exact(&ran, &a);
    let access = nginx.access();
    let sends = access
        .iter()
        .filter(|l| l.starts_with("PUT /send/"))
        .count() as u64;
    assert_eq!(sends, a.metrics.count(Counter::Sent), "{access:?}");
    let with_body: Vec<&String> = access.iter().filter(|l| l.contains(" 200 ")).collect();
    assert!(
        with_body.len() as u64 >= sends && with_body.iter().all(|l| l.ends_with(" chunked")),
        "{access:?}"
    );
}

/// The final verification fetches a user's whole log in one answer: a page of ~40
/// messages of 3,000 bytes, twice what one message and its wrapping may take (the bound of
/// a frame or an event), is read whole, not cut off as an oversized frame would be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_holding_a_page_of_many_messages_is_read_whole() {
    let (ran, a) = run_set(&["traffic[0].size=3000", "traffic[1].size=3000"]).await;
    exact(&ran, &a);
}

/// A server that closes keep-alive connections idle for 3 s, as servers and proxies do:
/// each connection it closed is made again for the next request (the calls' connection,
/// idle from a login to the final verification, and the requests' over the 8 s drain), and
/// the ledger stays exact. During the traffic no connection idles for more than 1.2 s (a
/// group sender's interval), far from the close: a request that met the close on its way
/// would fail, as it does on any HTTP client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_the_server_closes_when_idle_are_made_again_for_the_next_request() {
    let server = HttpChat::with(&["--idle-close", "3000"]);
    let (ran, a) = run_on(&server, &["drain=\"8s\""]).await;
    exact(&ran, &a);
    let logins = a.metrics.count(Counter::LoginOk);
    let opened = a.metrics.count(Counter::Http1Connections);
    assert!(opened > 3 * logins, "{opened} for {logins} logins");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sends_and_server_sent_events_give_an_exact_ledger() {
    let (ran, a) = run("sse").await;
    exact(&ran, &a);
}

/// `scenarios/http-chat-signals.toml` (users who come and go, with receipts, typing and
/// presence) against a fresh server started with `args`; the server's counts after.
async fn run_signals(args: &[&str]) -> (Ran, Artifact, serde_json::Value) {
    let server = HttpChat::with(args);
    let work = Work::new();
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/scenarios/http-chat-signals.toml"
    );
    let (ran, a) = run_file(
        std::path::Path::new(file),
        &work.path("out"),
        &[
            "--set",
            &format!("target.url=\"http://127.0.0.1:{}\"", server.port),
            // Two cores shared with the rest of the suite: the schedule is not the point.
            "--set",
            "checks.max_send_lag=\"10s\"",
        ],
    )
    .await;
    let stats = server.stats();
    (ran, a, stats)
}

/// The row of signal `kind`.
fn row(a: &Artifact, kind: SignalKind) -> SignalDelivery {
    let record = a.signals.as_ref().expect("the run asked for signals");
    record
        .summary()
        .into_iter()
        .find(|r| r.kind == kind)
        .unwrap_or_else(|| panic!("no {kind:?} row"))
        .delivery
}

/// The server's count under `key`.
fn count(stats: &serde_json::Value, key: &str) -> u64 {
    stats[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {stats}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_typing_and_presence_through_a_script_reach_everyone_owed_once() {
    let (ran, a, stats) = run_signals(&[]).await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}\n{ran}");
    let read = row(&a, SignalKind::Read);
    assert!(read.expected > 50, "{read:?}");
    assert_eq!(
        (read.arrived, read.missing, read.duplicated, read.refused),
        (read.expected, 0, 0, 0),
        "{read:?}"
    );
    assert!(
        read.via_sync > 0,
        "senders away fetch their receipts: {read:?}"
    );
    assert_eq!(read.sent, count(&stats, "receipts"), "{stats}");
    for kind in [SignalKind::Typing, SignalKind::Presence] {
        let r = row(&a, kind);
        assert!(r.expected > 20, "{kind:?}: {r:?}");
        assert_eq!(
            (r.arrived, r.missing, r.duplicated),
            (r.expected, 0, 0),
            "{kind:?}: {r:?}"
        );
    }
    // Everything that arrived was fanned out by the server (a few fanned out to a user that
    // logged out before its next poll never arrive).
    let typing = row(&a, SignalKind::Typing);
    let presence = row(&a, SignalKind::Presence);
    assert!(
        typing.arrived + typing.extra <= count(&stats, "typing"),
        "{typing:?} {stats}"
    );
    assert!(
        presence.arrived + presence.extra <= count(&stats, "presence"),
        "{presence:?} {stats}"
    );
    // Every one published reached the server, those made just before a logout included.
    assert_eq!(typing.sent, count(&stats, "typing_notices"), "{stats}");
    assert_eq!(presence.sent, count(&stats, "presence_changes"), "{stats}");
    let errors: Vec<_> = a.metrics.errors().collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_presence_made_behind_a_slow_answer_reaches_the_server_before_the_logout() {
    // Each presence change answered 2.5 s late: a user leaving sooner after its login has
    // its going-offline presence waiting behind its coming-online one (and its sends) when
    // it closes, and a contact online is owed it.
    let (_, a, stats) = run_signals(&["--slow-presence", "2500"]).await;
    let presence = row(&a, SignalKind::Presence);
    assert_eq!(presence.sent, count(&stats, "presence_changes"), "{stats}");
    assert!(presence.expected > 20, "{presence:?}");
    assert_eq!(
        (presence.arrived, presence.missing),
        (presence.expected, 0),
        "{presence:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_a_server_accepts_and_drops_are_counted_missing_one_for_one() {
    let (ran, a, stats) = run_signals(&["--drop-receipts", "7"]).await;
    let read = row(&a, SignalKind::Read);
    let dropped = count(&stats, "receipts_dropped");
    assert!(dropped > 5, "{stats}");
    assert_eq!(read.missing, dropped, "{read:?} {stats}");
    assert_eq!(read.arrived + read.missing, read.expected, "{read:?}");
    ran.expect_code(1);
}

/// `scenarios/http-chat-signals.toml` (its URL replaced by `url`) and its adapter, with
/// `edit` applied to the adapter, written to `work`; the scenario's path.
pub(super) fn signals_scenario(work: &Work, url: &str, edit: impl Fn(String) -> String) -> String {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}{name}")).expect(name);
    work.write("http-chat.lua", &edit(read("http-chat.lua")));
    let scenario = read("http-chat-signals.toml").replace("http://127.0.0.1:8008", url);
    let file = work.write("scenario.toml", &scenario);
    file.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_offers_the_signals_it_defines_and_validate_refuses_the_others() {
    let work = Work::new();
    let url = "http://127.0.0.1:8008";
    let file = signals_scenario(&work, url, |s| s);
    let ran = msgstorm(&["validate", "--frames", &file]).await;
    ran.expect_code(0);
    for shown in [
        "receipt with token R",
        "typing with token T",
        "presence with token P",
    ] {
        assert!(ran.stdout.contains(shown), "{shown}: {}", ran.stdout);
    }
    let file = signals_scenario(&work, url, |s| {
        s.replace("function receipt(", "function unused(")
    });
    let ran = msgstorm(&["validate", &file]).await;
    ran.expect_code(2);
    let line = format!("{file}:");
    assert!(
        ran.stderr.contains(&line) && ran.stderr.contains("signals.receipts"),
        "{}",
        ran.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_adapter_passes_the_signal_cases_of_an_adapter_that_has_them() {
    let server = HttpChat::start();
    let work = Work::new();
    let url = format!("http://127.0.0.1:{}", server.port);
    let file = signals_scenario(&work, &url, |s| s);
    let out = work.path("checks").display().to_string();
    let ran = msgstorm(&["check-adapter", &file, "--out", &out]).await;
    ran.expect_code(0);
    for case in ["receipts", "typing", "presence"] {
        let line = ran
            .stderr
            .lines()
            .chain(ran.stdout.lines())
            .find(|l| l.split_whitespace().nth(1) == Some(case))
            .unwrap_or_else(|| panic!("no line for {case}: {ran}"));
        assert!(line.starts_with("pass"), "{line}");
        assert!(!line.contains(" 0 of 0 owed"), "{line}");
    }
}
