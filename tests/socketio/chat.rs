//! `socketio` against the real Socket.IO app of `peers/socketio`: two nodes behind Redis
//! (users spread over both URLs, so node A's users message node B's users and rooms), 1:1
//! and rooms without loss, churning and late users repaired by connection state recovery,
//! and a known server-side loss counted exactly.

use msgstorm::artifact::Artifact;
use msgstorm::ledger::Delivery;
use msgstorm::metrics::Counter;

use crate::common::run::{run_text, Ran, Work};
use crate::common::socketio::{shared, Cluster};

/// Runs `body` (population, traffic, checks) against `cluster` with `options` in
/// `[target.socketio]`.
pub async fn run(cluster: &Cluster, options: &str, body: &str) -> (Ran, Artifact, Delivery) {
    let text = format!(
        "name = \"socketio-test\"\nseed = 3\ndrain = \"2s\"\n\n{}\n{body}",
        cluster.target(options)
    );
    let work = Work::new();
    let (ran, artifact) = run_text(&work, &text).await;
    let d = artifact.ledger.summary();
    (ran, artifact, d)
}

/// `[target.socketio]` options naming rooms with `prefix`, so tests on the shared cluster
/// keep apart.
fn rooms(prefix: &str) -> String {
    format!(
        "group = '{{\"room\":\"{prefix}{{to}}\",\"body\":\"{{body}}\"}}'\njoin = '\"{prefix}{{group}}\"'"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_two_nodes_direct_and_rooms_lose_nothing() {
    let cluster = shared();
    let routed = [
        cluster.nodes[0].stat("routed"),
        cluster.nodes[1].stat("routed"),
    ];
    let (ran, artifact, d) = run(
        cluster,
        &rooms("chat-"),
        r#"
[population]
users = 40
prefix = "chat-"
login_rate = 400

[[traffic]]
name = "dm"
kind = "direct"
senders = 10
receivers = 20
messages = 4
interval = "50ms"

[[traffic]]
name = "rooms"
kind = "group"
groups = 3
group_size = 8
senders_per_group = 2
messages = 5
interval = "50ms"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
"#,
    )
    .await;
    ran.expect_code(0);
    assert!(artifact.acceptance, "acks are the acceptance");
    assert!(d.expected >= 150, "{d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}"
    );
    assert_eq!(
        artifact.metrics.count(Counter::Accepted),
        artifact.metrics.count(Counter::Sent)
    );
    // Both nodes routed messages: the users were spread over both URLs.
    for (i, before) in routed.into_iter().enumerate() {
        assert!(
            cluster.nodes[i].stat("routed") > before,
            "node {i} routed nothing"
        );
    }
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{ran}");
}

/// Churning users drop their connections mid-traffic and come back within the recovery
/// window; late users connected once before the traffic.
const OFFLINE_USERS: &str = r#"
[population]
users = 30
prefix = "rec-"
login_rate = 300
late = { count = 3, at = "3s" }
churn = { count = 6, offline_at = "1s", back_at = "2500ms" }

[[traffic]]
name = "dm"
kind = "direct"
senders = 10
receivers = 20
duration = "3s"
interval = "100ms"

[[traffic]]
name = "rooms"
kind = "group"
groups = 2
group_size = 8
senders_per_group = 2
duration = "3s"
interval = "200ms"

[checks]
max_lost = 0
max_duplicated = 0
"#;

/// On one node (the in-memory session store), what [`OFFLINE_USERS`] missed comes back by
/// connection state recovery and the ledger verifies it: nothing lost, something repaired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_recovery_returns_what_offline_users_missed() {
    let cluster = Cluster::start(1, "none", &[]);
    let (ran, _artifact, d) = run(&cluster, &rooms("rec-"), OFFLINE_USERS).await;
    ran.expect_code(0);
    assert!(d.via_sync > 0, "recovery replayed missed messages: {d:?}");
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}");
}

/// On two nodes, sessions are restored from Redis streams on either node. The adapter
/// (`@socket.io/redis-streams-adapter` 0.3.1) reads the missed entries and only then joins
/// the socket to its rooms while its stream reader goes on, so an entry can fall between
/// the two (lost) or be both replayed and pushed (duplicated) — now and then, under load.
/// The ledger counts whatever happens; the test pins the accounting, not the race.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_recovery_across_two_nodes_is_accounted() {
    let cluster = shared();
    let (ran, _artifact, d) = run(
        cluster,
        &rooms("rec2-"),
        &OFFLINE_USERS.replace("rec-", "rec2-"),
    )
    .await;
    assert!(
        d.via_sync > 0,
        "recovery replayed missed messages: {d:?}\n{ran}"
    );
    assert_eq!(d.delivered + d.lost, d.expected, "{d:?}");
    assert!(d.lost + d.duplicated <= d.expected / 20, "{d:?}\n{ran}");
}

/// The app drops every 7th message it routes (and counts it): the ledger's lost count is
/// exactly the app's, and `max_lost = 0` fails the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_dropped_messages_are_lost_exactly() {
    let cluster = Cluster::start(1, "none", &["--drop-every=7"]);
    let (ran, _artifact, d) = run(
        &cluster,
        "",
        r#"
[population]
users = 20
login_rate = 400

[[traffic]]
name = "dm"
kind = "direct"
senders = 10
receivers = 10
messages = 10
interval = "20ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(1);
    let dropped = cluster.stat("dropped");
    assert!(dropped >= 10, "the app dropped {dropped}");
    assert_eq!(d.lost, dropped, "{d:?}");
    assert_eq!(d.delivered + d.lost, d.expected, "{d:?}");
}

/// The app keeps sessions for 0.5 s, and churning users stay away 1.5 s: recovery fails,
/// and every direct message sent to them while they were away is lost — the messages the
/// app routed to a user with no connection, plus those it wrote to a socket whose user was
/// just leaving (in flight at the cut; about one per churning user at this rate, and the
/// app cannot count them: to it they went to a connected socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_outage_longer_than_the_recovery_window_is_lost_exactly() {
    let cluster = Cluster::start(1, "none", &["--recovery=500"]);
    let (ran, _artifact, d) = run(
        &cluster,
        "",
        r#"
[population]
users = 20
login_rate = 400
churn = { count = 5, offline_at = "1500ms", back_at = "3s" }

[[traffic]]
name = "dm"
kind = "direct"
senders = 10
receivers = 10
duration = "3s"
interval = "50ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(1);
    let offline = cluster.stat("offline");
    assert!(offline > 0, "no message was sent to an offline user\n{ran}");
    let in_flight = 5 * 2;
    assert!(
        (offline..=offline + in_flight).contains(&d.lost),
        "lost {} for {offline} routed to nobody: {d:?}\n{ran}",
        d.lost
    );
    assert_eq!(d.via_sync, 0, "nothing was recovered: {d:?}");
}
