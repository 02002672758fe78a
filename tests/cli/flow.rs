//! `kind = "flow"` end to end against the reference server: every user thinks, then loops
//! {send, think}; every message of users × loops arrives and the verdict passes.

use crate::common::run::{run_text, scenario, Work};
use crate::common::{config, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flow_delivers_users_times_loops_and_passes() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario(
        "name = \"flow\"\nseed = 11\ndrain = \"3s\"",
        &server,
        r#"
[population]
users = 12
login_rate = 200

[[traffic]]
name = "chat"
kind = "flow"
users = 4
loops = 5
think = { uniform = ["20ms", "80ms"] }

[[traffic]]
name = "room"
kind = "flow"
users = 3
to = "group"
group_size = 5
loops = 4
think = { exponential = "40ms" }

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
min_login_success = 1.0
max_send_error_rate = 0
"#,
    );
    let (ran, artifact) = run_text(&work, &text).await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let d = artifact.ledger.summary();
    // Direct: 4 users × 5 loops to one receiver each; group: 3 users × 4 loops, each
    // message to the 4 other members of the room.
    assert_eq!(d.sent, 4 * 5 + 3 * 4, "{d:?}");
    assert_eq!(d.expected, 4 * 5 + 3 * 4 * 4, "{d:?}");
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    server.shutdown().await.expect("server stops");
}
