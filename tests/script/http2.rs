//! The script driver's HTTP/2 (`[target.script] http = "2"`) against a real HTTP/2
//! server: nginx (Debian's package) serving h2 over TLS by ALPN and cleartext h2c by prior
//! knowledge in front of `peers/httpchat/server.py`. nginx's access log names each
//! request's protocol and connection, so the chat traffic is seen to go through HTTP/2
//! frames, one connection a user multiplexing its sends, calls and long poll.

use std::collections::BTreeSet;

use msgstorm::artifact::Artifact;
use msgstorm::metrics::wires::Wire;
use msgstorm::metrics::Counter;

use super::http::{exact, HttpChat};
use crate::common::nginx::Nginx;
use crate::common::run::{msgstorm, run_file, Ran, Work};
use crate::run::transports::only_transport;

/// `scenarios/http-chat.toml` over HTTP/2 through nginx (TLS or h2c) to a fresh chat
/// server; nginx's access log after the run.
async fn run(tls: bool) -> (Ran, Artifact, Vec<String>) {
    let server = HttpChat::start();
    let nginx = Nginx::h2_proxy(server.port, tls);
    let work = Work::new();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/http-chat.toml");
    let scheme = if tls { "https" } else { "http" };
    let mut args = vec![
        "--set".to_owned(),
        format!("target.url=\"{scheme}://127.0.0.1:{}\"", nginx.port),
        "--set".to_owned(),
        "target.script.http=\"2\"".to_owned(),
    ];
    if tls {
        args.push("--set".to_owned());
        args.push(format!(
            "target.script.ca_file=\"{}\"",
            nginx.ca_file().display()
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (ran, a) = run_file(std::path::Path::new(file), &work.path("out"), &args).await;
    let access = nginx.access();
    (ran, a, access)
}

/// Every request nginx served came over HTTP/2, on as many connections as the run had
/// logins (one a user, its requests multiplexed), and the sends are among them.
fn all_http2_one_connection_a_user(a: &Artifact, access: &[String]) {
    let lines: Vec<Vec<&str>> = access.iter().map(|l| l.split(' ').collect()).collect();
    assert!(
        lines.iter().all(|l| l.get(1) == Some(&"HTTP/2.0")),
        "{access:?}"
    );
    let sends = lines
        .iter()
        .filter(|l| l.get(2) == Some(&"PUT") && l.get(3).is_some_and(|p| p.starts_with("/send/")))
        .count() as u64;
    assert_eq!(sends, a.metrics.count(Counter::Sent), "sends seen by nginx");
    let connections: BTreeSet<&str> = lines.iter().map(|l| l[0]).collect();
    let logins = a.metrics.count(Counter::LoginOk);
    assert_eq!(connections.len() as u64, logins, "one connection a login");
    only_transport(a, Wire::Http2, logins);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_nginx, peer_openssl)),
    ignore = "nginx or openssl is not installed (scripts/test installs them)"
)]
async fn http2_over_tls_multiplexes_a_users_requests_and_long_poll_on_one_connection() {
    let (ran, a, access) = run(true).await;
    exact(&ran, &a);
    all_http2_one_connection_a_user(&a, &access);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_nginx, peer_openssl)),
    ignore = "nginx or openssl is not installed (scripts/test installs them)"
)]
async fn http2_cleartext_by_prior_knowledge_gives_an_exact_ledger() {
    let (ran, a, access) = run(false).await;
    exact(&ran, &a);
    all_http2_one_connection_a_user(&a, &access);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_version_other_than_1_1_or_2_or_on_a_socket_url_is_refused_at_its_line() {
    let work = Work::new();
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/");
    let read = |name: &str| std::fs::read_to_string(format!("{dir}{name}")).expect(name);
    work.write("http-chat.lua", &read("http-chat.lua"));
    let scenario = read("http-chat.toml");
    for (url, version, why) in [
        ("http://127.0.0.1:8008", "3", "\"1.1\""),
        (
            "ws://127.0.0.1:8008/ws",
            "2",
            "only for http:// and https://",
        ),
    ] {
        let text = scenario.replace("http://127.0.0.1:8008", url).replace(
            "[target.script]\n",
            &format!("[target.script]\nhttp = \"{version}\"\n"),
        );
        let file = work.write("scenario.toml", &text);
        let line = text
            .lines()
            .position(|l| l.starts_with("http ="))
            .expect("line")
            + 1;
        let ran = msgstorm(&["validate", &file.display().to_string()]).await;
        ran.expect_code(2);
        let at = format!("{}:{line}:", file.display());
        assert!(
            ran.stderr.contains(&at) && ran.stderr.contains("http") && ran.stderr.contains(why),
            "{at} … {why}: {}",
            ran.stderr
        );
    }
}
