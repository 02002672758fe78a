//! W4's optimisation run for real: the Socket.IO chat app of `peers/socketio` with
//! `socket.io-msgpack-parser` (binary MessagePack packets), two nodes behind Redis, spoken
//! by `scenarios/socketio-msgpack.lua` — the same ledger as the text parser on the same app
//! through the built-in `socketio` driver, and `compare` of the two runs.

use msgstorm::artifact::Artifact;

use crate::common::run::{msgstorm, Ran, Work};
use crate::common::socketio::Cluster;
use crate::ws_json::peer::repo;

/// Traffic both parsers carry: direct messages across the two nodes and rooms.
const BODY: &str = r#"
[population]
users = 40
prefix = "mp-"
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
"#;

/// The scenario's name is the same for both runs, so `compare` takes them as one scenario.
fn scenario(target: &str) -> String {
    format!("name = \"socketio-parsers\"\nseed = 3\ndrain = \"2s\"\n\n{target}\n{BODY}")
}

/// The script's target: the cluster's nodes with the Engine.IO path.
fn script_target(cluster: &Cluster) -> String {
    let url = |n: &crate::common::socketio::Node| {
        format!("{}/socket.io/?EIO=4&transport=websocket", n.url())
    };
    let more: Vec<String> = cluster.nodes[1..]
        .iter()
        .map(|n| format!("\"{}\"", url(n)))
        .collect();
    format!(
        "[target]\ndriver = \"script\"\nurl = \"{}\"\nconnect_timeout = \"3s\"\n\n\
         [target.script]\nfile = \"{}\"\nurls = [{}]\n",
        url(&cluster.nodes[0]),
        repo("scenarios/socketio-msgpack.lua").display(),
        more.join(", ")
    )
}

/// Runs `text`, keeping its result in `work`'s `name/`.
async fn run(work: &Work, name: &str, text: &str) -> (Ran, Artifact) {
    let file = work.write(&format!("{name}.toml"), text);
    crate::common::run::run_file(&file, &work.path(name), &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_socketio, peer_redis)),
    ignore = "redis-server, node or the Socket.IO app's modules are not installed (scripts/test installs them)"
)]
async fn msgpack_parser_gives_the_text_parsers_ledger_and_compares() {
    let work = Work::new();
    let text_app = Cluster::start(2, "redis", &["--recovery=0"]);
    let (tran, tart) = run(&work, "text", &scenario(&text_app.target(""))).await;
    let text_routed = text_app.stat("routed");
    drop(text_app);
    let msgpack_app = Cluster::start(2, "redis", &["--recovery=0", "--parser=msgpack"]);
    let (mran, mart) = run(&work, "msgpack", &scenario(&script_target(&msgpack_app))).await;
    let msgpack_routed = msgpack_app.stat("routed");
    drop(msgpack_app);
    tran.expect_code(0);
    mran.expect_code(0);
    assert_eq!(mart.driver, "script");
    let (t, m) = (tart.ledger.summary(), mart.ledger.summary());
    let counts = |d: &msgstorm::ledger::Delivery| {
        (
            d.expected,
            d.delivered,
            d.lost,
            d.duplicated,
            d.corrupted,
            d.unexpected,
        )
    };
    assert_eq!(counts(&t), counts(&m), "text {t:?}\nmsgpack {m:?}\n{mran}");
    assert_eq!((m.lost, m.duplicated), (0, 0), "{m:?}");
    assert!(m.delivered >= 100, "{m:?}");
    assert_eq!(
        text_routed, msgpack_routed,
        "the app routed the same messages"
    );
    let errors: Vec<_> = mart.metrics.errors().collect();
    assert!(errors.is_empty(), "{errors:?}");
    // W4's baseline-vs-optimised comparison.
    let (base, new) = (
        work.path("text/result.json").display().to_string(),
        work.path("msgpack/result.json").display().to_string(),
    );
    let cmp = msgstorm(&["compare", &base, &new]).await;
    cmp.expect_code(0);
    assert!(
        cmp.stdout.contains("socketio") && cmp.stdout.contains("script"),
        "both runs named\n{cmp}"
    );
}
