//! SIGTERM mid-run: the first signal stops sending, waits at most the scenario's `drain`
//! for in-flight deliveries and writes a result marked `interrupted` (exit 1, the report
//! fails `run.completed`); a second signal stops at once and still writes the result.
//!
//! The server drops a fifth of the pushes, so deliveries are always missing and the drain
//! runs to its bound unless a second signal cuts it short. With `--shards N` the
//! coordinator forwards the signal to every shard and merges their interrupted results.

use std::process::Stdio;
use std::time::{Duration, Instant};

use msgstorm::artifact::Artifact;
use msgstorm::metrics::Counter;
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::{ServeConfig, ServerHandle};

use crate::common::run::{msgstorm, msgstorm_sync, scenario, Work, BIN, RUN_LIMIT};
use crate::common::{config, http_get, metric, start};

/// 60 s of traffic, far longer than any test waits.
fn long_run(server: &ServerHandle, drain: &str) -> String {
    scenario(
        &format!("name = \"long\"\ndrain = \"{drain}\""),
        server,
        r#"
[population]
users = 20
login_rate = 200

[[traffic]]
name = "chat"
kind = "direct"
senders = 4
receivers = 8
rate = 40
duration = "60s"

[checks]
max_lost = 1000000
"#,
    )
}

async fn lossy_server() -> ServerHandle {
    start(ServeConfig {
        faults: FaultSpec::parse("drop=0.2").expect("valid fault spec"),
        fault_seed: Some(3),
        ..config()
    })
    .await
}

fn kill(pid: u32, signal: &str) {
    let ok = std::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .expect("run kill");
    assert!(ok.success(), "kill -{signal} {pid} failed");
}

/// Stops process `pid` with `msgstorm stop --pid`, which checks it is msgstorm and sends
/// it SIGTERM.
fn msgstorm_stop(pid: u32) {
    msgstorm_sync(&["stop", "--pid", &pid.to_string()]).expect_code(0);
}

/// SIGTERM to `pid` with `kill`.
pub(crate) fn sigterm(pid: u32) {
    kill(pid, "TERM");
}

/// How much slower than its bound a stopped run may end. A bound against a hang, not a
/// speed: far below the 30 s a stopped run would take without the bound under test (a
/// close grace, a connect timeout, a 30 s drain).
pub(crate) const SLACK: Duration = Duration::from_secs(10);

/// Waits until `server` has accepted `n` messages: the traffic is flowing.
pub(crate) async fn accepted(server: std::net::SocketAddr, n: f64) {
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        let text = http_get(server, "/metrics").await;
        if metric(&text, "serve_messages_accepted_total").is_some_and(|a| a >= n) {
            return;
        }
        assert!(Instant::now() < deadline, "no traffic: {text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts `msgstorm run` on `text` (with `extra` arguments), stops it with `stop` once
/// `ready` resolves, and, when `twice`, again once it said it is draining (at
/// fixed times from the start, a busy machine could signal before the traffic, or twice
/// before the first signal was handled). Returns the exit code, the time from the first
/// signal to the exit, stdout+stderr and the result file.
pub(crate) async fn interrupt(
    text: &str,
    extra: &[&str],
    ready: impl std::future::Future<Output = ()>,
    twice: bool,
    stop: fn(u32),
) -> (i32, Duration, String, Artifact) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
    let work = Work::new();
    let file = work.write("s.toml", text);
    let out = work.path("out");
    let mut child = tokio::process::Command::new(BIN)
        .args(["run", "-q", "--out"])
        .arg(&out)
        .arg(&file)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start msgstorm run");
    let pid = child.id().expect("a running child has a pid");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let stdout = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text).await;
        text
    });
    let (draining_tx, mut draining) = tokio::sync::watch::channel(false);
    let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
    let stderr = tokio::spawn(async move {
        let mut text = String::new();
        while let Ok(Some(line)) = lines.next_line().await {
            if line.starts_with("stopping: draining") {
                draining_tx.send_replace(true);
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    tokio::time::timeout(RUN_LIMIT, ready)
        .await
        .expect("the moment to stop the run came");
    stop(pid);
    let first = Instant::now();
    if twice {
        tokio::time::timeout(RUN_LIMIT, draining.wait_for(|d| *d))
            .await
            .expect("msgstorm says it is draining")
            .expect("stderr is read");
        stop(pid);
    }
    let status = tokio::time::timeout(RUN_LIMIT, child.wait())
        .await
        .expect("msgstorm exits after SIGTERM")
        .expect("wait for msgstorm");
    let took = first.elapsed();
    let text = format!(
        "--- stdout\n{}\n--- stderr\n{}",
        stdout.await.expect("stdout task"),
        stderr.await.expect("stderr task")
    );
    let artifact = Artifact::read(&out.join("result.json"))
        .unwrap_or_else(|e| panic!("no result after SIGTERM: {e}\n{text}"));
    (status.code().unwrap_or(-1), took, text, artifact)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_sending_drains_within_bound_and_writes_an_interrupted_result() {
    let server = lossy_server().await;
    // A second of traffic, then SIGTERM.
    let (code, took, out, a) = interrupt(
        &long_run(&server, "3s"),
        &[],
        accepted(server.addr(), 40.0),
        false,
        sigterm,
    )
    .await;
    assert_eq!(code, 1, "an interrupted run fails\n{out}");
    assert!(
        out.contains("run.completed"),
        "the report names run.completed\n{out}"
    );
    assert!(
        took < Duration::from_secs(3) + SLACK,
        "exit {took:?} after SIGTERM, drain is 3 s\n{out}"
    );
    // Missing deliveries kept the drain waiting for (most of) its bound.
    assert!(
        took >= Duration::from_millis(2500),
        "no drain: {took:?}\n{out}"
    );
    assert!(a.interrupted, "{out}");
    let sent = a.metrics.count(Counter::Sent);
    // 40 msgs/s for ~1 s of traffic; nothing after the signal (the full run sends 2,400).
    assert!((40..400).contains(&sent), "sent {sent}\n{out}");
    assert_eq!(a.ledger.summary().sent, sent);
    server.shutdown().await.expect("server stops");
}

/// Here both stops come from `msgstorm stop --pid` (what the Kubernetes launcher runs in a
/// pod with `kubectl exec`): the first drains, the second stops at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_sigterm_exits_at_once_and_still_writes_the_result() {
    let server = lossy_server().await;
    let (code, took, out, a) = interrupt(
        &long_run(&server, "30s"),
        &[],
        accepted(server.addr(), 40.0),
        true,
        msgstorm_stop,
    )
    .await;
    assert_eq!(code, 1, "{out}");
    assert!(
        took < SLACK,
        "exit {took:?} after the first signal, the drain was 30 s\n{out}"
    );
    assert!(a.interrupted, "{out}");
    assert!(a.metrics.count(Counter::Sent) > 0, "{out}");
    server.shutdown().await.expect("server stops");
}

/// SIGTERM to `--shards 2`: the coordinator forwards it to both generator processes (no
/// `kill` binary involved), each drains and writes an interrupted result, and the merged
/// report fails `run.completed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_to_a_sharded_run_reaches_every_shard() {
    let server = lossy_server().await;
    let (code, took, out, a) = interrupt(
        &long_run(&server, "2s"),
        &["--shards", "2"],
        accepted(server.addr(), 40.0),
        false,
        sigterm,
    )
    .await;
    assert_eq!(code, 1, "an interrupted run fails\n{out}");
    assert!(out.contains("run.completed"), "{out}");
    assert!(
        took < Duration::from_secs(2) + SLACK,
        "exit {took:?} after SIGTERM, drain is 2 s\n{out}"
    );
    assert!(a.interrupted, "{out}");
    assert_eq!(a.shards.len(), 2, "both shards wrote a result\n{out}");
    let sent = a.metrics.count(Counter::Sent);
    // 40 msgs/s for ~1 s of traffic; the full run sends 2,400.
    assert!((40..400).contains(&sent), "sent {sent}\n{out}");
    server.shutdown().await.expect("server stops");
}

/// `msgstorm stop` signals only a msgstorm: another process, or none, is a usage error
/// naming it, and the process is left alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn msgstorm_stop_refuses_a_process_that_is_not_msgstorm() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .expect("start sleep");
    let pid = sleeper.id().to_string();
    let ran = msgstorm(&["stop", "--pid", &pid]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr
            .contains(&format!("--pid {pid}: that process is `sleep`")),
        "{ran}"
    );
    assert!(
        sleeper.try_wait().expect("poll sleep").is_none(),
        "sleep was signalled"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let ran = msgstorm(&["stop", "--pid", "4000000000"]).await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("no such process"), "{ran}");
}

/// A target that stops answering mid-run (its process is stopped): the run still ends
/// within its own bounds — requests time out after `connect_timeout` instead of waiting
/// for ever — and writes its result. Without the bound, the final sync would hold the run
/// until the 30 s close grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_that_stops_answering_does_not_hang_the_run() {
    let server = crate::common::ChildServer::start(&[]);
    let work = Work::new();
    let text = format!(
        r#"drain = "1s"
[target]
url = "{}"
connect_timeout = "1s"
[target.auth]
secret = "{}"

[population]
users = 12
login_rate = 200

[[traffic]]
kind = "direct"
senders = 4
receivers = 8
rate = 40
duration = "3s"
"#,
        server.ws_url(),
        crate::common::SECRET
    );
    let file = work.write("stall.toml", &text);
    let out = work.path("out");
    let run = tokio::spawn({
        let (file, out) = (file.clone(), out.clone());
        async move {
            msgstorm(&[
                "run",
                file.to_str().expect("utf-8 path"),
                "--out",
                out.to_str().expect("utf-8 path"),
                "-q",
            ])
            .await
        }
    });
    // Stopped once the traffic flows (a second of it), not at a fixed time.
    accepted(server.addr, 40.0).await;
    server.signal("STOP");
    let stopped = Instant::now();
    let ran = run.await.expect("the run task");
    let took = stopped.elapsed();
    server.signal("CONT");
    assert!(
        took < Duration::from_secs(20),
        "the run ended {took:?} after the target stopped:\n{ran}"
    );
    let a = Artifact::read(&out.join("result.json")).expect("result.json is written");
    let d = a.ledger.summary();
    // Sends the stopped server never acknowledged are failures, expected nowhere; every
    // acknowledged one was delivered before the stop.
    assert!(d.refused > 0 && d.delivered == d.expected, "{d:?}");
}

/// A target that accepts TCP connections but never answers holds every user in
/// its login for the whole `connect_timeout` (30 s here). The first SIGTERM still ends the
/// run within `drain` (1 s) plus the 2 s users get to disconnect — not after the 30 s close
/// grace — and writes an interrupted result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_against_a_silent_target_ends_within_drain() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    // Accepts and holds every connection, reading nothing and answering nothing.
    let (count, mut connections) = tokio::sync::watch::channel(0usize);
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
            count.send_replace(held.len());
        }
    });
    let text = format!(
        r#"name = "silent"
drain = "1s"
[target]
url = "ws://{addr}/ws"
connect_timeout = "30s"
[target.auth]
secret = "s"

[population]
users = 20
login_rate = 200

[[traffic]]
kind = "direct"
senders = 4
receivers = 8
rate = 40
duration = "10s"
"#
    );
    // SIGTERM once every user is held in its login (20 users, after the reachability
    // probe's connection).
    let held = async move {
        let _ = connections.wait_for(|n| *n > 20).await;
    };
    let (code, took, out, a) = interrupt(&text, &[], held, false, sigterm).await;
    assert_eq!(code, 1, "an interrupted run fails\n{out}");
    assert!(
        took < Duration::from_secs(1) + Duration::from_secs(2) + SLACK,
        "exit {took:?} after SIGTERM, drain is 1 s\n{out}"
    );
    assert!(a.interrupted, "{out}");
    silent.abort();
}

/// Checks a run stopped by signals (`twice`: a second one once it drained): exit 1 within
/// `drain` plus the 2 s users get to disconnect (a second signal: at once), with an
/// interrupted result.
pub(crate) fn stopped_in_time(
    (code, took, out, a): &(i32, Duration, String, Artifact),
    twice: bool,
    drain: Duration,
) {
    assert_eq!(*code, 1, "an interrupted run fails\n{out}");
    let bound = if twice {
        SLACK
    } else {
        drain + Duration::from_secs(2) + SLACK
    };
    assert!(
        *took < bound,
        "exit {took:?} after SIGTERM (twice: {twice})\n{out}"
    );
    assert!(a.interrupted, "{out}");
}

/// A scenario of 60 s of traffic against `url` with `secret`, a 1 s drain and a 30 s
/// connect timeout (which no stop should wait for).
fn against(url: &str, secret: &str) -> String {
    format!(
        r#"name = "stuck"
drain = "1s"
[target]
url = "{url}"
connect_timeout = "30s"
[target.auth]
secret = "{secret}"

[population]
users = 12
login_rate = 200

[[traffic]]
kind = "direct"
senders = 4
receivers = 8
rate = 40
duration = "60s"

[checks]
max_lost = 1000000
"#
    )
}

/// A listener that accepts every connection and never answers; the watch counts them.
async fn mute_listener() -> (
    std::net::SocketAddr,
    tokio::sync::watch::Receiver<usize>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (count, connections) = tokio::sync::watch::channel(0usize);
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
            count.send_replace(held.len());
        }
    });
    (addr, connections, task)
}

/// Users stuck in their TLS handshake (the server accepts TCP and never sends its
/// ServerHello): the first SIGTERM ends the run within the drain plus the 2 s users get to
/// disconnect, not after the 30 s connect timeout, with an interrupted result; so does a
/// second at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_stop_a_run_whose_users_hang_in_the_tls_handshake() {
    for twice in [false, true] {
        let (addr, mut connections, task) = mute_listener().await;
        let held = async move {
            let _ = connections.wait_for(|n| *n > 12).await;
        };
        let text = against(&format!("wss://localhost:{}/ws", addr.port()), "s");
        let ran = interrupt(&text, &[], held, twice, sigterm).await;
        stopped_in_time(&ran, twice, Duration::from_secs(1));
        task.abort();
    }
}

/// A target whose process is stopped (SIGSTOP) mid-run, so that every socket to it stays
/// open and silent: the first SIGTERM ends the run within the drain plus 2 s, a second at
/// once, and both write an interrupted result with what was measured before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_stop_a_run_against_a_stopped_target() {
    for twice in [false, true] {
        let server = crate::common::ChildServer::start(&[]);
        let text = against(&server.ws_url(), crate::common::SECRET);
        let addr = server.addr;
        let frozen = async {
            accepted(addr, 40.0).await;
            server.signal("STOP");
        };
        let ran = interrupt(&text, &[], frozen, twice, sigterm).await;
        server.signal("CONT");
        stopped_in_time(&ran, twice, Duration::from_secs(1));
        let (_, _, out, a) = ran;
        assert!(
            a.metrics.count(Counter::Sent) >= 40,
            "what was measured is kept\n{out}"
        );
    }
}

/// The pid of the running process whose arguments hold every one of `words` (bounded wait).
async fn process_with(words: &[&str]) -> u32 {
    let deadline = Instant::now() + RUN_LIMIT;
    loop {
        let found = std::fs::read_dir("/proc")
            .expect("/proc")
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                    let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
                    words.iter().all(|w| args.contains(&w.as_bytes()))
                })
            });
        if let Some(pid) = found {
            return pid;
        }
        assert!(Instant::now() < deadline, "no process with {words:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A shard that hangs (its process stopped): the coordinator's first SIGTERM reaches the
/// shards, the second ends the run anyway — the hung shard killed with its process group
/// after 2 s — and the result of the other shard is written, marked interrupted, with a
/// note naming the killed one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_sigterm_ends_a_sharded_run_whose_shard_hangs() {
    let server = lossy_server().await;
    let name = format!("name=\"hang-{}\"", std::process::id());
    let addr = server.addr();
    let name_set = name.clone();
    let hung = async move {
        accepted(addr, 40.0).await;
        let shard = process_with(&["--shard", "1/2", &name_set]).await;
        kill(shard, "STOP");
    };
    let (code, took, out, a) = interrupt(
        &long_run(&server, "30s"),
        &["--shards", "2", "--set", &name],
        hung,
        true,
        sigterm,
    )
    .await;
    assert_eq!(code, 1, "an interrupted run fails\n{out}");
    assert!(
        took < Duration::from_secs(2) + SLACK,
        "exit {took:?} after the first signal\n{out}"
    );
    assert!(a.interrupted, "{out}");
    assert_eq!(
        a.shards.len(),
        1,
        "the shard that ended wrote its result\n{out}"
    );
    assert!(
        a.notes
            .iter()
            .any(|n| n.contains("shard(s) 1 of 2") && n.contains("killed")),
        "{:?}",
        a.notes
    );
    server.shutdown().await.expect("server stops");
}
