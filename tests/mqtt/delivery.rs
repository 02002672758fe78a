//! MQTT traffic through a real mosquitto: 1:1 and group at QoS 1, QoS 2 over MQTT 5,
//! QoS 0 without acceptance.

use std::time::Duration;

use msgstorm::metrics::wires::Wire;
use msgstorm::metrics::{Counter, Hist};

use crate::common::mosquitto::Mosquitto;
use crate::common::run::run_msgstorm;
use crate::run::transports::only_transport;

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(60);

/// A scenario of 1:1 and group traffic against `url` with `[target.mqtt]` lines `mqtt`.
fn chat(url: &str, mqtt: &str, late: &str) -> String {
    format!(
        r#"name = "mqtt-chat"
drain = "3s"

[target]
driver = "mqtt"
url = "{url}"

[target.mqtt]
{mqtt}

[population]
users = 30
login_rate = 1000
{late}

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
"#
    )
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn qos1_direct_and_group_arrive_exactly_once() {
    let broker = Mosquitto::start("");
    let run = run_msgstorm(&chat(&broker.url(), "qos = 1", ""), &[], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let a = run.artifact.expect("result.json");
    assert_eq!(a.driver, "mqtt");
    assert!(a.acceptance);
    let d = a.ledger.summary();
    // 5 × 10 × 6 direct + 3 groups × 2 senders × 10 messages × 5 other members.
    assert_eq!(d.expected, 300 + 300, "{d:?}");
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.corrupted), (0, 0, 0), "{d:?}");
    assert!(a.metrics.hist(Hist::EndToEnd).len() >= 600);
    assert_eq!(a.metrics.hist(Hist::SendAck).len(), 360);
    assert!(a.metrics.hist(Hist::Connect).len() >= 30);
    // MQTT is a framed TCP stream: every connection and byte counted as `tcp` (read by
    // the driver's own readiness loop), among them the users' sessions.
    let connections = a.metrics.count(Counter::TcpConnections);
    assert!(
        connections >= a.metrics.count(Counter::Connected),
        "{connections}"
    );
    only_transport(&a, Wire::Tcp, connections);
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn qos2_over_mqtt5_has_no_duplicates() {
    let broker = Mosquitto::start("");
    let late = r#"late = { count = 4, at = "2s" }"#;
    let run = run_msgstorm(
        &chat(&broker.url(), "version = 5\nqos = 2", late),
        &[],
        LIMIT,
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let d = run.artifact.expect("result.json").ledger.summary();
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated), (0, 0), "{d:?}");
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn qos0_reports_no_acceptance() {
    let broker = Mosquitto::start("");
    let run = run_msgstorm(&chat(&broker.url(), "qos = 0", ""), &[], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("no acceptance"),
        "the report must say so: {}",
        run.stdout
    );
    let a = run.artifact.expect("result.json");
    assert!(!a.acceptance);
    assert_eq!(a.metrics.hist(Hist::SendAck).len(), 0);
    assert!(a.ledger.summary().delivered > 0);
}
