//! `ws-json` against a second real third-party server with a different JSON protocol: a
//! plain SocketCluster server (`peers/socketcluster`, npm `socketcluster-server` pinned by
//! its lockfile, installed by `scripts/test`), described by
//! `scenarios/ws-json-socketcluster.toml` alone: per-user inbox channels and group channels
//! with zero loss, server pings (empty frames) answered, and a server limit caught as a
//! join failure — past `socketChannelLimit` a subscription is refused: the run fails on
//! `checks.max_join_failures`, and that group's messages are not counted as the server's loss.

use msgstorm::artifact::Artifact;
use msgstorm::ledger::Delivery;
use msgstorm::metrics::ErrorKind;

use crate::common::run::Ran;
use crate::ws_json::peer::{installed, repo, run_shipped, Peer};

/// A SocketCluster server letting each socket subscribe to `channels` channels and pinging
/// every `ping_ms`; the test fails when node or the server's modules are missing (see
/// [`installed`]).
fn start_with(channels: u32, ping_ms: u32) -> Peer {
    let modules = repo("peers/socketcluster/node_modules/socketcluster-server");
    let node = crate::common::peers::node();
    installed("SocketCluster", &node);
    installed("SocketCluster", &modules);
    let script = repo("peers/socketcluster/server.js");
    let script = script.display().to_string();
    Peer::start(
        &node,
        &[
            &script,
            "127.0.0.1:0",
            &channels.to_string(),
            &ping_ms.to_string(),
        ],
    )
}

/// [`start_with`] the server's default ping interval.
fn start(channels: u32) -> Peer {
    start_with(channels, 8000)
}

/// The shipped scenario aimed at `server`, with `body` as its population and traffic.
async fn run(server: &Peer, body: &str) -> (Ran, Artifact, Delivery) {
    let text = include_str!("../../scenarios/ws-json-socketcluster.toml");
    let url = format!("ws://{}/socketcluster/", server.addr);
    run_shipped(text, "ws://127.0.0.1:8001/socketcluster/", &url, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketcluster),
    ignore = "node or the SocketCluster server's modules are not installed (scripts/test installs them)"
)]
async fn socketcluster_direct_and_group_chat_loses_nothing() {
    let server = start(1000);
    let (ran, artifact, d) = run(
        &server,
        r#"
[population]
users = 40
login_rate = 400

[[traffic]]
name = "chat"
kind = "direct"
senders = 10
receivers = 20
messages = 4
interval = "100ms"

[[traffic]]
name = "groups"
kind = "group"
groups = 3
group_size = 8
senders_per_group = 2
messages = 5
interval = "100ms"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
"#,
    )
    .await;
    ran.expect_code(0);
    assert!(artifact.acceptance, "publish replies are acks");
    assert!(d.expected > 100, "{d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}"
    );
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{ran}");
}

/// Four users in both of two groups; each socket may hold two channels: the inbox and the
/// first group. The second subscription is refused: four `join_failed` errors, named first
/// in the verdict (`checks.max_join_failures`), and the second group's messages (2 senders ×
/// 5 messages to 3 other members) are not expected of the server, so nothing is lost: the
/// first group's 30 deliveries are all there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketcluster),
    ignore = "node or the SocketCluster server's modules are not installed (scripts/test installs them)"
)]
async fn socketcluster_channel_limit_is_a_join_failure_not_a_loss() {
    let server = start(2);
    let (ran, artifact, d) = run(
        &server,
        r#"
[population]
users = 4
login_rate = 100

[[traffic]]
name = "groups"
kind = "group"
groups = 2
group_size = 4
senders_per_group = 2
messages = 5
interval = "20ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(1);
    assert!(
        ran.verdict().starts_with("FAIL: checks.max_join_failures"),
        "{ran}"
    );
    assert_eq!(d.expected, 30, "{d:?}\n{ran}");
    assert_eq!(d.delivered, 30, "{d:?}");
    assert_eq!(d.lost, 0, "{d:?}\n{ran}");
    let joins: Vec<_> = artifact.metrics.errors().collect();
    assert!(
        joins
            .iter()
            .any(|(kind, n, ex)| *kind == ErrorKind::JoinFailed
                && *n == 4
                && ex.iter().any(|e| e.contains("subscription limit"))),
        "{joins:?}"
    );
}

/// The server pings with empty frames every 100 ms and closes a socket that answers none
/// for 500 ms: idle users answering them (`[target.ws-json.ping]`) stay connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketcluster),
    ignore = "node or the SocketCluster server's modules are not installed (scripts/test installs them)"
)]
async fn socketcluster_pings_are_answered() {
    let server = start_with(1000, 100);
    let (ran, artifact, _) = run(
        &server,
        r#"
[population]
users = 5
login_rate = 100

[[traffic]]
kind = "idle"
duration = "2s"
"#,
    )
    .await;
    ran.expect_code(0);
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{ran}");
    assert!(
        ran.stdout
            .contains("| disconnects                           |       0 |"),
        "{ran}"
    );
}
