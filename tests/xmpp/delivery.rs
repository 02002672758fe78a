//! XMPP traffic through real ejabberd and Prosody: 1:1 chat and MUC rooms, every message
//! exactly once, every send accepted by an XEP-0198 ack.

use std::time::Duration;

use msgstorm::metrics::Hist;

use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, shared, Kind};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(90);

/// 1:1 and group traffic.
const CHAT: &str = r#"[population]
users = 30
login_rate = 500

[[traffic]]
kind = "direct"
senders = 5
receivers = 10
messages = 6
interval = "10ms"

[[traffic]]
kind = "group"
groups = 3
group_size = 6
senders_per_group = 2
messages = 10
interval = "20ms"

[checks]
max_lost = 0
max_duplicated = 0
max_reordered = 0
"#;

fn chat_exactly_once(kind: Kind, prefix: &str, xmpp: &str) {
    let server = shared(kind);
    let a = passed(
        run_msgstorm(&scenario(server, prefix, xmpp, CHAT), &[], LIMIT),
        server,
    );
    assert_eq!(a.driver, "xmpp");
    assert!(a.acceptance);
    let d = a.ledger.summary();
    // 5 × 10 × 6 direct + 3 rooms × 2 senders × 10 messages × 5 other occupants.
    assert_eq!(d.expected, 300 + 300, "{d:?}");
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!(
        (d.lost, d.duplicated, d.reordered, d.corrupted),
        (0, 0, 0, 0),
        "{d:?}"
    );
    assert_eq!(a.metrics.hist(Hist::SendAck).len(), 360, "every send acked");
    assert!(a.metrics.hist(Hist::EndToEnd).len() >= 600);
}

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_chat_and_rooms_arrive_exactly_once_over_scram() {
    chat_exactly_once(Kind::Ejabberd, "d-scram", "sasl = \"scram-sha-1\"");
}

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_chat_and_rooms_arrive_exactly_once_over_plain() {
    chat_exactly_once(Kind::Ejabberd, "d-plain", "sasl = \"plain\"");
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_chat_and_rooms_arrive_exactly_once_over_scram() {
    chat_exactly_once(Kind::Prosody, "d-scram", "sasl = \"scram-sha-1\"");
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_chat_and_rooms_arrive_exactly_once_over_plain() {
    chat_exactly_once(Kind::Prosody, "d-plain", "sasl = \"plain\"");
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn without_stream_management_the_report_says_no_acceptance() {
    let server = shared(Kind::Prosody);
    let run = run_msgstorm(
        &scenario(server, "d-nosm", "stream_management = false", CHAT),
        &[],
        LIMIT,
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("no acceptance"), "{}", run.stdout);
    let a = run.artifact.expect("result.json");
    assert!(!a.acceptance);
    assert_eq!(a.metrics.hist(Hist::SendAck).len(), 0);
    let d = a.ledger.summary();
    assert_eq!(d.delivered, d.expected, "{d:?}");
}
