//! What connection state recovery replays is accounted exactly, against the real
//! Socket.IO app — a second copy the app emitted is a duplicate whichever way it came (live
//! or replayed), and a late user the app sent nothing before it went offline is counted and
//! explained instead of silently losing everything.

use msgstorm::metrics::Counter;

use crate::common::run::Work;
use crate::common::socketio::Cluster;
use crate::socketio::chat::run;

/// Churning and late users receive direct messages: while they are away, recovery must
/// bring them back.
const AWAY: &str = r#"
[population]
users = 20
login_rate = 400
late = { count = 3, at = "3s" }
churn = { count = 5, offline_at = "1s", back_at = "2500ms" }

[[traffic]]
name = "dm"
kind = "direct"
senders = 8
receivers = 12
duration = "3s"
interval = "100ms"

[checks]
max_lost = 0
"#;

/// The app emits every direct message twice; users away get both copies back from
/// recovery. Every second copy is counted as duplicated — as many as the app emitted,
/// the replayed ones included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_second_copies_replayed_by_recovery_are_duplicated() {
    let cluster = Cluster::start(1, "none", &["--twice"]);
    let (ran, artifact, d) = run(&cluster, "", AWAY).await;
    // Every second copy breaks the promise of exactly once: the built-in check says so.
    ran.expect_code(1);
    assert!(
        ran.verdict().starts_with("FAIL: checks.max_duplicated: "),
        "{ran}"
    );
    let twice = cluster.stat("twice");
    assert!(twice >= 200, "the app emitted {twice} second copies\n{ran}");
    assert_eq!((d.delivered, d.lost), (d.expected, 0), "{d:?}\n{ran}");
    assert!(d.via_sync > 0, "recovery replayed missed messages: {d:?}");
    assert_eq!(d.duplicated, twice, "{d:?}\n{ran}");
    assert!(
        d.examples
            .iter()
            .any(|e| e.detail == "another copy via sync"),
        "a replayed copy is among the examples: {:?}",
        d.examples
    );
    assert_eq!(artifact.metrics.count(Counter::ResumesWithoutOffset), 0);
}

/// The app sends a new connection nothing (`--welcome=0`): late users go offline without
/// an offset, so the app cannot recover their sessions and every message sent to them
/// while away is lost. The run counts those reconnects, the connections table shows them,
/// a note says what to do, and the loss is exactly what was sent to them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_late_users_without_an_offset_are_counted_and_explained() {
    let cluster = Cluster::start(1, "none", &["--welcome=0"]);
    // One sender online; the three receivers are the late users.
    let (ran, artifact, d) = run(
        &cluster,
        "",
        r#"
[population]
users = 4
late = { count = 3, at = "2s" }

[[traffic]]
kind = "direct"
senders = 1
receivers = 3
messages = 5
interval = "20ms"

[checks]
max_lost = 0
"#,
    )
    .await;
    ran.expect_code(1);
    assert!(
        ran.stderr.contains(": population.late: driver `socketio`"),
        "`run` warns as `validate` does\n{ran}"
    );
    assert_eq!(
        artifact.metrics.count(Counter::ResumesWithoutOffset),
        3,
        "{ran}"
    );
    assert_eq!((d.expected, d.lost), (15, 15), "{d:?}");
    assert!(
        ran.stdout
            .contains("reconnects without an offset (missed not fetchable)"),
        "{ran}"
    );
    assert!(
        ran.stdout.contains("3 reconnect(s) had no offset") && ran.stdout.contains("first message"),
        "the notes say why and what to do\n{ran}"
    );
}

/// `msgstorm validate` warns (on stderr, exit 0) that late users of a Socket.IO scenario
/// need the app to send them a first message, until the scenario names that event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socketio_validate_warns_about_late_users_without_a_first_message() {
    let text = format!("[target]\ndriver = \"socketio\"\nurl = \"ws://127.0.0.1:1\"\n{AWAY}");
    let work = Work::new();
    let file = work.write("late.toml", &text);
    let path = file.display().to_string();
    let ran = crate::common::run::msgstorm(&["validate", &path]).await;
    ran.expect_code(0);
    assert!(
        ran.stderr
            .contains(&format!("warning: {path}:8: population.late:"))
            && ran.stderr.contains("first message"),
        "{ran}"
    );
    // Naming the app's welcome event says every user gets an offset: no warning.
    let welcomed = text.replace(
        "[population]",
        "[target.socketio]\nwelcome_event = \"welcome\"\n\n[population]",
    );
    let file = work.write("welcomed.toml", &welcomed);
    let ran = crate::common::run::msgstorm(&["validate", &file.display().to_string()]).await;
    ran.expect_code(0);
    assert!(!ran.stderr.contains("warning:"), "{ran}");
    // Without recovery there is nothing to warn about: late users are refused (exit 2).
    let off = text.replace(
        "[population]",
        "[target.socketio]\nrecovery = false\n\n[population]",
    );
    let file = work.write("off.toml", &off);
    let ran = crate::common::run::msgstorm(&["validate", &file.display().to_string()]).await;
    ran.expect_code(2);
    assert!(!ran.stderr.contains("warning:"), "{ran}");
}
