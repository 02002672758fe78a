//! The script driver's HTTP transports against a real HTTP server (Python's `http.server`
//! running `peers/httpchat/server.py`, shaped like Matrix's client-server API): sends as
//! requests whose answers are their acceptance, messages by long polling or by a
//! Server-Sent Events stream, late users catching up — the ledger exact either way.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use msgstorm::artifact::Artifact;

use crate::common::run::{run_file, Ran, Work};

/// The HTTP chat server, on a free loopback port; killed on drop.
struct HttpChat {
    child: Child,
    port: u16,
}

impl HttpChat {
    fn start() -> HttpChat {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/peers/httpchat/server.py");
        let mut child = Command::new("python3")
            .args([script, "0"])
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
}

impl Drop for HttpChat {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `scenarios/http-chat.toml` against a fresh server, with `mode` (poll or sse).
async fn run(mode: &str) -> (Ran, Artifact) {
    let server = HttpChat::start();
    let work = Work::new();
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/http-chat.toml");
    let out = work.path("out");
    run_file(
        std::path::Path::new(file),
        &out,
        &[
            "--set",
            &format!("target.url=\"http://127.0.0.1:{}\"", server.port),
            "--set",
            &format!("target.script.vars.mode=\"{mode}\""),
        ],
    )
    .await
}

/// Checks a run: it passed, every expected delivery arrived exactly once (late users'
/// included: by their fetch, or by their first poll, which goes on from where the user's
/// log stood), no error of any kind.
fn exact(ran: &Ran, a: &Artifact) {
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sends_and_server_sent_events_give_an_exact_ledger() {
    let (ran, a) = run("sse").await;
    exact(&ran, &a);
}
