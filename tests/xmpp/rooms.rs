//! Rooms on a server whose MUC service is not `conference.<domain>`. The driver
//! finds the service by service discovery; a room that cannot be joined is a setup failure
//! (`join_failed`), and its messages are not counted as lost. A join the room never
//! answers is sent again.

use std::time::Duration;

use msgstorm::metrics::ErrorKind;

use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, shared, CutProxy, Kind, Server};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(90);

/// 1:1 chat and rooms: 5 × 4 × 3 direct, 2 rooms × 2 senders × 5 messages × 5 others.
const CHAT: &str = r#"[population]
users = 20
login_rate = 500

[[traffic]]
kind = "direct"
senders = 5
receivers = 4
messages = 3
interval = "20ms"

[[traffic]]
kind = "group"
groups = 2
group_size = 6
senders_per_group = 2
messages = 5
interval = "20ms"
"#;

/// How many errors of `kind` the run counted, with their examples.
fn errors(a: &msgstorm::artifact::Artifact, kind: ErrorKind) -> (u64, Vec<String>) {
    a.metrics
        .errors()
        .find(|(k, _, _)| *k == kind)
        .map_or((0, Vec::new()), |(_, n, ex)| (n, ex.to_vec()))
}

fn rooms_on_a_muc_service_of_another_name(kind: Kind) {
    let server = Server::with_muc_service(kind, "rooms.localhost");
    // No `muc_domain`: discovery finds rooms.localhost, and every room message arrives.
    let checks = "[checks]\nmax_lost = 0\nmax_duplicated = 0\n";
    let found = format!("{CHAT}\n{checks}");
    let a = passed(
        run_msgstorm(&scenario(&server, "r-disco", "", &found), &[], LIMIT),
        &server,
    );
    let d = a.ledger.summary();
    assert_eq!(d.expected, 60 + 100, "{d:?}");
    assert_eq!((d.delivered, d.lost), (d.expected, 0), "{d:?}");
    assert_eq!(errors(&a, ErrorKind::JoinFailed).0, 0);
    // The guess of old, `conference.localhost`, names no service on this server: every
    // join fails, counted as `join_failed`; the rooms' messages are expected of nobody
    // and the 1:1 chat is verified as before.
    let xmpp = "muc_domain = \"conference.localhost\"";
    let run = run_msgstorm(&scenario(&server, "r-wrong", xmpp, CHAT), &[], LIMIT);
    let a = run.artifact.expect("result.json");
    let d = a.ledger.summary();
    let (failed, examples) = errors(&a, ErrorKind::JoinFailed);
    assert!(
        failed >= 12,
        "every member's join failed: {failed}\n{}",
        run.stdout
    );
    assert!(
        examples.iter().all(|e| e.contains("conference.localhost")),
        "{examples:?}"
    );
    assert_eq!((d.expected, d.delivered, d.lost), (60, 60, 0), "{d:?}");
    assert!(run.stdout.contains("join_failed"), "{}", run.stdout);
    // A setup failure, named first: the built-in check fails the run.
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(
        run.stdout.starts_with(&format!(
            "FAIL: checks.max_join_failures: {failed} group joins failed"
        )),
        "{}",
        run.stdout
    );
}

/// One room of six: 2 senders × 5 messages × 5 others.
const ROOM: &str = r#"[population]
users = 6
login_rate = 500

[[traffic]]
kind = "group"
groups = 1
group_size = 6
senders_per_group = 2
messages = 5
interval = "20ms"

[checks]
max_lost = 0
max_duplicated = 0
"#;

/// A room that lost a member's join presence (the proxy in front of the server swallows
/// it; without XEP-0198, whose counts would show the loss) is joined by sending the join
/// again after 5 s of silence: every message arrives, and the report names the join that
/// went twice.
#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn a_join_the_room_never_answered_is_sent_again_and_the_report_says_so() {
    let server = shared(Kind::Prosody);
    let proxy = CutProxy::start(server.port);
    proxy.swallow_presence("<presence to='j-lost-");
    let text = scenario(server, "j-lost", "stream_management = false", ROOM)
        .replace(&server.url(), &format!("xmpp://127.0.0.1:{}", proxy.port));
    let a = passed(run_msgstorm(&text, &[], LIMIT), server);
    let d = a.ledger.summary();
    assert_eq!((d.expected, d.delivered, d.lost), (50, 50, 0), "{d:?}");
    assert_eq!(errors(&a, ErrorKind::JoinFailed).0, 0);
    // The swallowed join, at least (a machine too busy to answer a join within 5 s would
    // name more).
    let (resent, examples) = errors(&a, ErrorKind::Timeout);
    assert!(resent >= 1, "{examples:?}");
    assert!(
        examples.iter().any(|e| e.contains("j-lost-")
            && e.ends_with("no answer within 5s, the join was sent again")),
        "{examples:?}"
    );
}

#[test]
fn ejabberd_rooms_are_found_by_discovery_and_unjoinable_rooms_are_no_loss() {
    rooms_on_a_muc_service_of_another_name(Kind::Ejabberd);
}

#[test]
fn prosody_rooms_are_found_by_discovery_and_unjoinable_rooms_are_no_loss() {
    rooms_on_a_muc_service_of_another_name(Kind::Prosody);
}

/// `msgstorm validate` warns (stderr, exit 0) when rooms get more messages while churning
/// members are away than a rejoin's history brings back — about 30 a room here, history
/// 20 — and says nothing once `muc_history` covers them.
#[test]
fn validate_warns_when_rooms_outrun_their_history() {
    let rest = r#"[population]
users = 20
login_rate = 500
churn = { count = 3, offline_at = "1s", back_at = "2500ms" }

[[traffic]]
name = "rooms"
kind = "group"
groups = 2
group_size = 6
senders_per_group = 2
duration = "3s"
interval = "100ms"
"#;
    let work = crate::common::run::Work::new();
    let head = "[target]\ndriver = \"xmpp\"\nurl = \"xmpp://127.0.0.1:1\"\n\n\
                [target.auth]\nusername = \"{user}\"\npassword = \"pw\"\n\n";
    for (xmpp, warned) in [("", true), ("[target.xmpp]\nmuc_history = 50\n\n", false)] {
        let file = work.write("rooms.toml", &format!("{head}{xmpp}{rest}"));
        let path = file.display().to_string();
        let ran = crate::common::run::msgstorm_sync(&["validate", &path]);
        ran.expect_code(0);
        let warning = format!("warning: {path}:12: population.churn: traffic `rooms` sends");
        assert_eq!(ran.stderr.contains(&warning), warned, "{ran}");
        assert_eq!(ran.stderr.contains("only the last 20"), warned, "{ran}");
    }
}
