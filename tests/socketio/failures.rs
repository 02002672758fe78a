//! `socketio` when things go wrong on a real Socket.IO app: a node killed mid-run, the
//! target down, the auth middleware refusing, garbage packets from the server, and late or
//! churning users refused when the app cannot recover connections.

use std::time::{Duration, Instant};

use msgstorm::metrics::{Counter, ErrorKind};

use crate::common::peers::free_port;
use crate::common::run::{run_text, Work, RUN_LIMIT};
use crate::common::socketio::{shared, Cluster};
use crate::socketio::chat::run;

/// How many errors of `kind` the run counted.
fn errors(artifact: &msgstorm::artifact::Artifact, kind: ErrorKind) -> u64 {
    artifact
        .metrics
        .errors()
        .filter(|(k, _, _)| *k == kind)
        .map(|(_, n, _)| n)
        .sum()
}

/// Node B is killed (SIGKILL) in the middle of the traffic: its users' connections close
/// (`closed_by_peer`), they reconnect to node A, and the ledger accounts for every message:
/// delivered, repaired by recovery, or lost (a killed node keeps no session to recover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_killed_node_is_classified_and_users_reconnect() {
    let mut cluster = Cluster::start(2, "streams", &[]);
    let text = format!(
        "name = \"socketio-kill\"\nseed = 5\ndrain = \"2s\"\n\n{}\n{}",
        cluster.target(""),
        r#"
[population]
users = 20
login_rate = 400

[[traffic]]
name = "dm"
kind = "direct"
senders = 10
receivers = 10
duration = "5s"
interval = "50ms"
"#
    );
    let mut b = cluster.nodes.pop().expect("node B");
    let killer = std::thread::spawn(move || {
        // Once node B has routed a hundred of the 1,000 messages (its users logged in and
        // sending, about a second into the 5 s of traffic), however slowly the users log
        // in (a kill at a fixed time could come before the traffic).
        let deadline = Instant::now() + RUN_LIMIT;
        while b.stat("routed") < 100 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let routed = b.stat("routed");
        b.proc.kill();
        routed
    });
    let work = Work::new();
    let (ran, artifact) = run_text(&work, &text).await;
    let routed = killer.join().expect("killer");
    assert!(
        routed >= 100,
        "node B was killed during the traffic, after routing {routed}\n{ran}"
    );
    let d = artifact.ledger.summary();
    let closed = errors(&artifact, ErrorKind::ClosedByPeer);
    assert!(closed >= 10, "node B's 10 users were cut: {closed}\n{ran}");
    assert!(
        artifact.metrics.count(Counter::LoginOk) >= 30,
        "node B's users logged in again on node A\n{ran}"
    );
    assert_eq!(d.delivered + d.lost, d.expected, "{d:?}");
    assert_eq!(d.duplicated, 0, "{d:?}");
    assert!(
        ran.stdout.contains("closed_by_peer"),
        "the report names the disconnects\n{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socketio_server_down_exits_3() {
    let port = free_port();
    let text = format!(
        "[target]\ndriver = \"socketio\"\nurl = \"ws://127.0.0.1:{port}\"\n\n\
         [population]\nusers = 2\nlogin_rate = 10\n\n[[traffic]]\nkind = \"idle\"\nduration = \"1s\"\n"
    );
    let work = Work::new();
    let file = work.write("down.toml", &text);
    let ran = crate::common::run::msgstorm(&["run", &file.display().to_string(), "-q"]).await;
    ran.expect_code(3);
    assert!(ran.stderr.contains(&port.to_string()), "{ran}");
}

/// The app's auth middleware wants a token; every connect with a wrong one is refused with
/// `CONNECT_ERROR`, counted as `auth_failed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_refused_auth_is_auth_failed() {
    let cluster = Cluster::start(1, "none", &["--secret=right"]);
    let body = r#"
[target.auth]
username = "{user}"
password = "wrong"

[population]
users = 4
login_rate = 100

[[traffic]]
kind = "idle"
duration = "1s"
"#;
    let (ran, artifact, _) = run(&cluster, "", body).await;
    assert_ne!(ran.code, 0, "{ran}");
    let failed = errors(&artifact, ErrorKind::AuthFailed);
    assert!(failed >= 4, "auth_failed {failed}\n{ran}");
    let examples: Vec<String> = artifact
        .metrics
        .errors()
        .flat_map(|(_, _, ex)| ex.to_vec())
        .collect();
    assert!(
        examples.iter().any(|e| e.contains("unauthorized")),
        "{examples:?}"
    );
}

/// A user the app sends three malformed packets gets three protocol errors counted; its
/// connection stays and its messages still arrive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_garbage_packets_are_protocol_errors() {
    let cluster = Cluster::start(1, "none", &["--garbage=u1"]);
    let (ran, artifact, d) = run(
        &cluster,
        "",
        r#"
[population]
users = 4
login_rate = 100

[[traffic]]
kind = "direct"
senders = 2
receivers = 2
messages = 5
interval = "20ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(0);
    assert_eq!(errors(&artifact, ErrorKind::Protocol), 3, "{ran}");
    assert_eq!((d.lost, d.delivered), (0, d.expected), "{d:?}");
}

/// Without recovery the driver cannot fetch what a user missed: churn is refused up
/// front (exit 2) instead of being reported as loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_churn_without_recovery_is_refused() {
    let cluster = shared();
    let text = format!(
        "{}\n[population]\nusers = 10\nchurn = {{ count = 2, offline_at = \"1s\", back_at = \"2s\" }}\n\n\
         [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 2\nduration = \"2s\"\ninterval = \"100ms\"\n",
        cluster.target("recovery = false")
    );
    let work = Work::new();
    let file = work.write("churn.toml", &text);
    let ran = crate::common::run::msgstorm(&["validate", &file.display().to_string()]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("population.churn") && ran.stderr.contains("cannot fetch"),
        "{ran}"
    );
}

/// A bad option of `[target.socketio]` is an error naming its file, line and key (exit 2),
/// before anything connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socketio_bad_option_names_file_line_and_key() {
    let text = "[target]\ndriver = \"socketio\"\nurl = \"ws://127.0.0.1:1\"\n\n\
                [target.socketio]\nnamespace = \"chat\"\n\n\
                [population]\nusers = 2\nlogin_rate = 10\n\n[[traffic]]\nkind = \"idle\"\nduration = \"1s\"\n";
    let work = Work::new();
    let file = work.write("bad.toml", text);
    let path = file.display().to_string();
    let ran = crate::common::run::msgstorm(&["validate", &path]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains(&format!(
            "{path}:6: target.socketio.namespace: must start with `/`"
        )),
        "{ran}"
    );
}
