//! `ws-json` against a real third-party server: a chat built on the Centrifuge library
//! (`peers/centrifuge`, built by `scripts/test` into `peers/centrifuge/centrifuge-chat`),
//! described by `scenarios/ws-json-centrifuge.toml` alone. Per-user inbox channels carry
//! direct messages, group channels group messages; late users page through the channels'
//! history — and a history smaller than what an offline user missed is loss, counted
//! exactly.

use msgstorm::artifact::Artifact;
use msgstorm::ledger::Delivery;

use crate::common::run::Ran;
use crate::ws_json::peer::{installed, repo, run_shipped, Peer};

/// A Centrifuge chat server keeping `history` publications per channel; the test fails
/// when it is not built (see [`installed`]).
fn start(history: u32) -> Peer {
    let bin = repo("peers/centrifuge/centrifuge-chat");
    installed("Centrifuge", &bin);
    Peer::start(
        &bin,
        &["-listen", "127.0.0.1:0", "-history", &history.to_string()],
    )
}

/// The shipped scenario aimed at `server`, with `body` as its population and traffic.
async fn run(server: &Peer, body: &str) -> (Ran, Artifact, Delivery) {
    let text = include_str!("../../scenarios/ws-json-centrifuge.toml");
    let url = format!("ws://{}/connection/websocket", server.addr);
    run_shipped(text, "ws://127.0.0.1:8000/connection/websocket", &url, body).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_centrifuge),
    ignore = "the Centrifuge test server is not built (scripts/test builds it)"
)]
async fn centrifuge_chat_with_late_users_loses_nothing() {
    let server = start(1000);
    let (ran, artifact, d) = run(
        &server,
        r#"
[population]
users = 40
login_rate = 400
late = { count = 4, at = "1500ms" }

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

[ledger]
verify_sync = true

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
    assert!(
        d.via_sync > 0,
        "late users fetched nothing from history: {d:?}"
    );
    let errors: Vec<_> = artifact.metrics.errors().collect();
    assert!(errors.is_empty(), "errors: {errors:?}\n{ran}");
}

/// One sender, three receivers that log in late: each misses 20 messages, of which the
/// server's history keeps the last 5, so exactly 15 per receiver are lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_centrifuge),
    ignore = "the Centrifuge test server is not built (scripts/test builds it)"
)]
async fn centrifuge_history_limit_is_loss_counted_exactly() {
    let server = start(5);
    let (ran, _, d) = run(
        &server,
        r#"
[population]
users = 4
login_rate = 100
late = { count = 3, at = "2s" }

[[traffic]]
name = "chat"
kind = "direct"
senders = 1
receivers = 3
messages = 20
interval = "10ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(1);
    assert!(ran.verdict().starts_with("FAIL: checks.max_lost"), "{ran}");
    assert_eq!(d.expected, 60, "{d:?}");
    assert_eq!(d.lost, 45, "{d:?}\n{ran}");
    assert_eq!(d.delivered, 15, "{d:?}");
    assert_eq!((d.duplicated, d.reordered, d.corrupted), (0, 0, 0), "{d:?}");
}
