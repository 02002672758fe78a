//! Signals through `socketio` against the real Socket.IO app of `peers/socketio` (one node):
//! contacts stored by the app, `read` relayed to the sender (kept by connection state
//! recovery for a sender that is away), `typing` to the peer and `presence` to the contacts
//! online — every one owed arrives once and the app's `/stats` agree; receipts the app
//! drops (`--drop-receipts`) are lost exactly as often as it counts, and fail the run.

use msgstorm::ledger::signals::SignalDelivery;

use super::chat::run;
use crate::common::socketio::Cluster;
use crate::signals::{deliveries, owed_arrived_once, DAY, SIGNALS};

/// The app's signal events.
const EVENTS: &str = r#"receipt_event = "read"
typing_event = "typing"
presence_event = "presence"
contacts_event = "contacts"
presence_ack = true
"#;

/// Runs the day of [`DAY`] with every signal on a one-node app started with `args`: the
/// run, the signal rows (read, typing, presence) and the app.
async fn day(
    args: &[&str],
    checks: &str,
) -> (crate::common::run::Ran, [SignalDelivery; 3], Cluster) {
    let cluster = Cluster::start(1, "none", args);
    let (ran, a, _) = run(&cluster, EVENTS, &format!("{DAY}{SIGNALS}{checks}")).await;
    let rows = deliveries(&a);
    (ran, rows, cluster)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_signals_arrive_once_and_the_app_counts_the_same() {
    let (ran, [read, typing, presence], app) = day(&[], "").await;
    ran.expect_code(0);
    owed_arrived_once(&[read, typing, presence]);
    assert!(
        read.via_sync > 0,
        "some receipts came by recovery: {read:?}"
    );
    assert_eq!(app.stat("receipts"), read.sent, "{read:?}");
    assert!(app.stat("contacts") > 0, "the app stored contacts");
    // A push to a connection that closes before reading it never arrives: what arrived,
    // owed or not, is at most what the app emitted.
    for (d, name) in [(typing, "typing"), (presence, "presence")] {
        let emitted = app.stat(name);
        let got = d.arrived + d.extra;
        assert!(
            got > 0 && got <= emitted,
            "{name}: {emitted} emitted, {d:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_socketio),
    ignore = "node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn socketio_dropped_receipts_are_lost_exactly_and_fail_the_run() {
    let checks = "\n[checks]\nmax_receipts_lost = 0\n";
    let (ran, [read, ..], app) = day(&["--drop-receipts=9"], checks).await;
    ran.expect_code(1);
    let dropped = app.stat("receipts_dropped");
    assert!(dropped >= 10, "the app dropped {dropped}: {read:?}");
    assert_eq!(read.missing, dropped, "{read:?}");
    assert_eq!(read.arrived + read.missing, read.expected, "{read:?}");
    assert_eq!(app.stat("receipts"), read.sent, "{read:?}");
    assert!(
        ran.verdict().starts_with("FAIL") && ran.verdict().contains("max_receipts_lost"),
        "{ran}"
    );
}
