//! The `script` driver over raw TCP with protobuf: W3's request/response sweep against
//! Netty's own WorldClock example server (`io.netty:netty-example`, run with Java from the
//! class path `scripts/test` resolves), spoken by `scenarios/netty-worldclock.lua` with
//! its `.proto` compiled at run time and varint32 length framing.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use msgstorm::metrics::Counter;

use crate::common::detect;
use crate::common::peers::{free_port, installed, required};
use crate::ws_json::peer::{repo, run_shipped};

/// The longest the JVM may take to start the server (a loaded CI machine is slow).
const START_WAIT: Duration = Duration::from_secs(60);

/// Netty's WorldClock server on a free loopback port, killed on drop.
struct WorldClock {
    child: Child,
    port: u16,
}

impl WorldClock {
    /// Starts the server and waits for Netty to report its channel active.
    fn start() -> WorldClock {
        let java = required("java");
        let cp_file = repo(detect::NETTY_CLASSPATH);
        installed("Netty's WorldClock example server", &cp_file);
        let cp = std::fs::read_to_string(&cp_file).expect("class path");
        let port = free_port();
        let mut child = Command::new(java)
            .arg(format!("-Dport={port}"))
            .args([
                "-cp",
                cp.trim(),
                "io.netty.example.worldclock.WorldClockServer",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start java");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Netty's LoggingHandler logs the bound channel becoming active; the rest
            // of its log is read and dropped so the server never blocks on it.
            let mut told = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !told && line.contains(" ACTIVE") {
                    told = true;
                    let _ = tx.send(());
                }
            }
        });
        let server = WorldClock { child, port };
        rx.recv_timeout(START_WAIT).unwrap_or_else(|_| {
            panic!("the WorldClock server did not start within {START_WAIT:?}")
        });
        server
    }
}

impl Drop for WorldClock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A short sweep: every request answered, none failed, Little's law reported per step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_netty),
    ignore = "Java or Netty's WorldClock example (peers/netty-worldclock) is not installed (scripts/test installs it)"
)]
async fn a_request_sweep_against_nettys_worldclock_server() {
    let server = WorldClock::start();
    let shipped = include_str!("../../scenarios/netty-worldclock.toml")
        .replace(
            "file = \"netty-worldclock.lua\"",
            &format!(
                "file = \"{}\"",
                repo("scenarios/netty-worldclock.lua").display()
            ),
        )
        .replace(
            "proto = \"netty-worldclock.proto\"",
            &format!(
                "proto = \"{}\"",
                repo("scenarios/netty-worldclock.proto").display()
            ),
        );
    let body = r#"
[population]
users = 8
login_rate = 500

[[traffic]]
name = "worldclock"
kind = "request"
request = "call"
sweep = [1, 8]
step_duration = "2s"

[checks]
min_login_success = 1.0
"#;
    let url = format!("tcp://127.0.0.1:{}", server.port);
    let (ran, artifact, _) = run_shipped(&shipped, "tcp://127.0.0.1:8463", &url, body).await;
    drop(server);
    ran.expect_code(0);
    let requests = artifact.metrics.count(Counter::Requests);
    let replies = artifact.metrics.count(Counter::Replies);
    assert!(requests > 100, "too few requests: {requests}\n{ran}");
    assert!(
        replies + 8 >= requests,
        "every request but those in flight at the end answered: {replies} of {requests}\n{ran}"
    );
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{ran}");
    assert!(
        ran.stdout.contains("| concurrency | TPS (req/s) |") && ran.stdout.contains("| 8 "),
        "the sweep's table with both steps\n{ran}"
    );
}
