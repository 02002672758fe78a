//! XEP-0198 resumption: users whose TCP connections are cut mid-run resume their sessions,
//! send again what the server had not acknowledged, and the ledger shows nothing lost or
//! duplicated across the cut.

use std::time::{Duration, Instant};

use msgstorm::metrics::Counter;

use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, shared, CutProxy, Kind, Toward};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(90);
/// Users of the run.
const USERS: usize = 12;

fn connections_cut_mid_run_resume_without_loss(kind: Kind, prefix: &str) {
    let server = shared(kind);
    let proxy = CutProxy::start(server.port);
    let rest = format!(
        r#"[population]
users = {USERS}
login_rate = 500

[[traffic]]
kind = "direct"
senders = 6
receivers = 6
duration = "6s"
interval = "50ms"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
# The test holds the traffic and cuts every connection itself: the sends that wait on
# its hold and the time users spend coming back are its doing.
min_online = 0.8
max_send_lag = "30s"
"#
    );
    let text = scenario(server, prefix, "", &rest)
        .replace(&server.url(), &format!("xmpp://127.0.0.1:{}", proxy.port));
    // Cut everything in the middle of the traffic (720 sends): once a hundred sends have
    // gone through, the network first swallows the server's acks (sends it processes
    // stay unacknowledged), then, thirty sends later, the sends themselves (sends it never
    // has): both kinds are unacknowledged at the cut, thirty sends later, and only the
    // second must be sent again. Each step waits for the traffic itself, however slowly
    // the users log in (a cut at fixed times came before the traffic on a busy
    // machine, while users were still logging in).
    let cutter = std::thread::spawn(move || {
        let deadline = Instant::now() + LIMIT;
        let flowing = proxy.wait_messages(Toward::Server, 100, deadline);
        proxy.hold(Toward::Clients);
        let processed = proxy.wait_messages(Toward::Server, 30, deadline);
        proxy.hold(Toward::Server);
        let swallowed = proxy.wait_messages(Toward::Server, 30, deadline);
        (proxy.cut_all(), flowing && processed && swallowed)
    });
    let run = run_msgstorm(&text, &[], LIMIT);
    let (cut, in_traffic) = cutter.join().expect("the cutter thread");
    let report = run.stdout.clone();
    assert!(
        in_traffic,
        "the cut came in the middle of the traffic: {report}"
    );
    assert!(cut >= USERS, "every user's connection was cut: {cut}");
    let a = passed(run, server);
    let d = a.ledger.summary();
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    assert!(d.delivered > 0, "{d:?}");
    // Every send unacknowledged at the cut was accepted after the resumption (the ones
    // the server never had were sent again), none counted failed.
    let n = |c| a.metrics.count(c);
    assert_eq!(
        n(Counter::Refused) + n(Counter::SendErrors),
        0,
        "{}",
        report
    );
    assert_eq!(n(Counter::Accepted), n(Counter::Sent), "{}", report);
    assert!(
        a.metrics.count(Counter::LoginOk) > USERS as u64,
        "users logged in again after the cut: {}",
        report
    );
    // Every cut session came back by resumption, not by a new login.
    let marker = match kind {
        Kind::Ejabberd => format!("Resumed session for {prefix}-"),
        Kind::Prosody => "mod_smacks session resumed from".to_owned(),
    };
    let resumed = server.log().matches(&marker).count();
    assert!(resumed >= USERS, "{resumed} sessions resumed");
}

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_sessions_cut_mid_run_resume_without_loss() {
    connections_cut_mid_run_resume_without_loss(Kind::Ejabberd, "r-cut");
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_sessions_cut_mid_run_resume_without_loss() {
    connections_cut_mid_run_resume_without_loss(Kind::Prosody, "r-cut");
}
