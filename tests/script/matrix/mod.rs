//! The script driver against Matrix Synapse (PyPI's `matrix-synapse`, SQLite, a free
//! loopback port) through `scenarios/matrix.lua`: users registered on their first login
//! through the homeserver's shared-secret registration, group rooms and 1:1 rooms (a room
//! per pair created with `is_direct`, the receiver invited and joining), messages sent with
//! `PUT` and received by long polling `/sync`, late users paging their rooms back with
//! `/messages`, churning users catching up from their kept since token, and a Synapse
//! killed and started again mid-run. Each run delivers every message exactly once, and
//! Synapse's own database holds exactly what msgstorm saw accepted.

mod restart;
mod synapse;

use std::path::{Path, PathBuf};

use msgstorm::envelope::{decode, Decoded};
use msgstorm::metrics::Counter;

use crate::common::run::{run_file, run_text, Work};
use synapse::Synapse;

/// The shipped adapter.
fn adapter() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/matrix.lua")
}

/// How many distinct messages of this run `bodies` (from Synapse's database) carry, and
/// how many bodies carry none.
fn distinct(bodies: &[String]) -> (usize, usize) {
    let mut seen = std::collections::BTreeSet::new();
    let mut other = 0;
    for body in bodies {
        match decode(body) {
            Decoded::Intact(env) => {
                seen.insert((env.stream, env.seq));
            }
            _ => other += 1,
        }
    }
    (seen.len(), other)
}

/// The `[target]` of a scenario run against `synapse` with the shipped adapter.
fn target(synapse: &Synapse) -> String {
    format!(
        "[target]\ndriver = \"script\"\nurl = \"http://127.0.0.1:{}\"\nheartbeat = \"0s\"\n\
         connect_timeout = \"20s\"\n\n[target.auth]\nusername = \"{{user}}\"\n\
         password = \"pw-{{user}}\"\n\n[target.script]\nfile = \"{}\"\n\
         vars = {{ server_name = \"localhost\", shared_secret = \"{}\" }}\n",
        synapse.port,
        adapter().display(),
        synapse.secret
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_synapse),
    ignore = "Synapse (peers/synapse/venv) is not installed (scripts/test installs it)"
)]
async fn the_shipped_matrix_scenario_delivers_exactly_once_and_synapse_agrees() {
    let (synapse, _turn) = synapse::shared().await;
    let work = Work::new();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/matrix.toml");
    let (ran, a) = run_file(
        &file,
        &work.path("out"),
        &[
            "--set",
            &format!("target.url=\"http://127.0.0.1:{}\"", synapse.port),
            "--set",
            &format!("target.script.vars.shared_secret=\"{}\"", synapse.secret),
            // What this test pins is the ledger, not Synapse's pace on a shared machine.
            "--set",
            "checks.max_send_lag=\"60s\"",
            "--set",
            "drain=\"10s\"",
        ],
    )
    .await;
    ran.expect_code(0);
    let d = a.ledger.summary();
    assert!(d.expected > 0, "{d:?}");
    assert_eq!(
        (d.delivered, d.lost, d.duplicated),
        (d.expected, 0, 0),
        "{d:?}\n{ran}"
    );
    assert!(
        d.via_sync > 0,
        "the late and churning users caught nothing up: {d:?}\n{ran}"
    );
    let bodies = synapse.messages("u");
    assert_eq!(
        (bodies.len() as u64, distinct(&bodies)),
        (a.metrics.count(Counter::Accepted), (bodies.len(), 0)),
        "Synapse holds exactly the accepted messages, each once\n{ran}"
    );
    // 3 senders × 5 receivers: a room per pair, both of them joined.
    assert_eq!(
        synapse.direct_rooms("u"),
        vec![(2, 2); 15],
        "one 1:1 room per pair, the invited receiver joined\n{ran}"
    );
}

/// Users that go away mid-traffic and come back (`population.churn`, no late users) get
/// what they missed — in group rooms and in 1:1 rooms, invitations that came meanwhile
/// included — from one `/sync` from the since token they kept, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_synapse),
    ignore = "Synapse (peers/synapse/venv) is not installed (scripts/test installs it)"
)]
async fn churning_matrix_users_catch_up_exactly_from_their_kept_since_token() {
    let (synapse, _turn) = synapse::shared().await;
    let work = Work::new();
    let text = format!(
        "name = \"matrix-churn\"\nseed = 12\ndrain = \"10s\"\n\n{}\n\
         [population]\nusers = 12\nprefix = \"c\"\nlogin_rate = 50\n\
         churn = {{ count = 4, offline_at = \"2s\", back_at = \"4s\" }}\n\n\
         [[traffic]]\nname = \"rooms\"\nkind = \"group\"\ngroups = 1\ngroup_size = 8\n\
         senders_per_group = 2\nrate = 5\nduration = \"5s\"\n\n\
         [[traffic]]\nname = \"dm\"\nkind = \"direct\"\nsenders = 2\nreceivers = 4\n\
         rate = 5\nduration = \"5s\"\n\n\
         [checks]\nmax_lost = 0\nmax_duplicated = 0\nmax_reordered = 0\nmax_send_lag = \"60s\"\n",
        target(synapse)
    );
    let (ran, a) = run_text(&work, &text).await;
    ran.expect_code(0);
    assert_eq!(
        a.metrics.count(Counter::LoginOk),
        16,
        "12 logins, then the 4 churning users again\n{ran}"
    );
    let d = a.ledger.summary();
    assert_eq!(
        (d.delivered, d.lost, d.duplicated, d.repaired),
        (d.expected, 0, 0, 0),
        "{d:?}\n{ran}"
    );
    assert!(
        d.via_sync > 0,
        "the returning users caught nothing up: {d:?}\n{ran}"
    );
    let bodies = synapse.messages("c");
    assert_eq!(
        bodies.len() as u64,
        a.metrics.count(Counter::Accepted),
        "Synapse holds exactly the accepted messages\n{ran}"
    );
}
