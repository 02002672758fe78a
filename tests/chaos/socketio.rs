//! One node of a two-node Socket.IO app (Redis adapter, no connection state recovery)
//! killed by a `[[chaos]]` step: its users reconnect to the other node, and what the ledger
//! counts lost equals what the app itself logged as routed to nobody.
//!
//! The kill falls in a 150 ms pause of the traffic: a message the killed node held at that
//! instant (accepted, not yet written to its recipient) is lost too, and no surviving node
//! can log it; with nothing in flight, every loss is one the app routed to nobody.

use msgstorm::metrics::Counter;
use msgstorm::report::Report;

use crate::common::run::{run_text, Work};
use crate::common::socketio::Cluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn a_killed_node_loses_exactly_what_the_app_routed_to_nobody() {
    let cluster = Cluster::start(2, "redis", &["--recovery=0", "--nobody=1"]);
    let text = format!(
        "name = \"socketio-chaos\"\nseed = 5\ndrain = \"3s\"\n\n{}\n{}",
        cluster.target("recovery = false\n"),
        format_args!(
            r#"
[population]
users = 20
login_rate = 400

[[traffic]]
name = "before"
kind = "direct"
senders = 10
receivers = 10
rate = 100
duration = "2s"

[[traffic]]
name = "after"
kind = "direct"
senders = 10
receivers = 10
rate = 200
start = "2150ms"
duration = "4s"

[[chaos]]
action = "kill"
pid = {}
at = "2100ms"
"#,
            cluster.nodes[1].proc.pid()
        )
    );
    let work = Work::new();
    let (ran, artifact) = run_text(&work, &text).await;
    let a = &cluster.nodes[0];
    let nobody = a.stat("nobody");
    let d = artifact.ledger.summary();
    let r = Report::new(&artifact);
    let step = &r.chaos[0];
    assert!(step.step.ok, "{:?}\n{ran}", step.step);
    assert!(
        artifact.metrics.count(Counter::LoginOk) >= 30,
        "the killed node's users logged in again on the other\n{ran}"
    );
    assert_eq!(
        d.lost, nobody,
        "lost = what node A routed to nobody while node B's users were away\n{d:?}\n{ran}"
    );
    assert_eq!(d.duplicated, 0, "{d:?}");
    let spans: u64 = artifact.ledger.spans(&[]).iter().map(|s| s.lost).sum();
    assert_eq!(spans, d.lost, "every loss placed by its due time");
    assert_eq!(
        step.during.lost + step.after.lost,
        d.lost,
        "all lost after the kill"
    );
    assert!(step.effect.recovery_s.is_some(), "recovery stated\n{ran}");
}
