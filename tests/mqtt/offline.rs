//! Offline users and persistent sessions: what mosquitto queued arrives after the
//! reconnect, what it dropped is counted as lost, and what it queued twice as duplicated,
//! exactly.

use std::time::Duration;

use crate::common::mosquitto::{Mosquitto, Republisher};
use crate::common::run::run_msgstorm;

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(60);

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn late_and_churning_users_receive_what_was_queued() {
    let broker = Mosquitto::start("");
    let scenario = format!(
        r#"name = "mqtt-away"
drain = "3s"

[target]
driver = "mqtt"
url = "{}"

[population]
users = 24
login_rate = 1000
late = {{ count = 4, at = "2500ms" }}
churn = {{ count = 4, offline_at = "500ms", back_at = "1500ms" }}

[[traffic]]
kind = "direct"
senders = 4
receivers = 12
duration = "2s"
interval = "25ms"

[[traffic]]
kind = "group"
groups = 2
group_size = 10
duration = "2s"
interval = "50ms"

[checks]
max_lost = 0
max_duplicated = 0
"#,
        broker.url()
    );
    let run = run_msgstorm(&scenario, &[], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let d = run.artifact.expect("result.json").ledger.summary();
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    assert!(d.via_sync > 0, "queued messages arrive after login: {d:?}");
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn messages_mosquitto_drops_past_its_queue_limit_are_lost_exactly() {
    const KEPT: u64 = 10;
    let broker = Mosquitto::start(&format!("max_queued_messages {KEPT}"));
    // One sender online; every other user is late and receives its messages while away.
    let (late, messages) = (4u64, 25u64);
    let scenario = format!(
        r#"name = "mqtt-queue-limit"
drain = "1s"

[target]
driver = "mqtt"
url = "{}"

[population]
users = {}
late = {{ count = {late}, at = "2500ms" }}

[[traffic]]
kind = "direct"
senders = 1
receivers = {late}
messages = {messages}
interval = "5ms"

[checks]
max_lost = 0
"#,
        broker.url(),
        late + 1
    );
    let run = run_msgstorm(&scenario, &[], LIMIT);
    assert_eq!(run.code, 1, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("checks.max_lost"),
        "the report names the failed check: {}",
        run.stdout
    );
    let d = run.artifact.expect("result.json").ledger.summary();
    // All of it was sent while the receivers were away; mosquitto kept the first KEPT
    // for each of them and dropped the rest.
    assert_eq!(d.expected, late * messages, "{d:?}");
    assert_eq!(d.lost, late * (messages - KEPT), "{d:?}");
    assert_eq!(d.via_sync, late * KEPT, "{d:?}");
    assert_eq!(d.duplicated, 0, "{d:?}");
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn a_run_leaves_no_persistent_sessions_on_the_broker() {
    let broker = Mosquitto::start("");
    let scenario = format!(
        r#"[target]
driver = "mqtt"
url = "{}"

[population]
users = 6

[[traffic]]
kind = "direct"
senders = 2
receivers = 4
duration = "500ms"
interval = "50ms"
"#,
        broker.url()
    );
    let run = run_msgstorm(&scenario, &["--run-id", "0000abcd"], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    // Resuming a user's session with the run's client id finds nothing stored.
    let port = broker
        .url()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse::<u16>().ok())
        .expect("broker port");
    let rt = tokio::runtime::Runtime::new().unwrap();
    for user in ["u0", "u5"] {
        let present = rt.block_on(async {
            let mut o = rumqttc::MqttOptions::new(format!("ms-0000abcd-{user}"), "127.0.0.1", port);
            o.set_clean_session(false);
            let (_client, mut events) = rumqttc::AsyncClient::new(o, 10);
            loop {
                let ev = tokio::time::timeout(Duration::from_secs(5), events.poll())
                    .await
                    .expect("CONNACK within 5 s")
                    .expect("connect");
                if let rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(ack)) = ev {
                    return ack.session_present;
                }
            }
        });
        assert!(!present, "{user}'s session was left on the broker");
    }
}

/// A second publisher sends every direct message again; mosquitto queues both
/// copies for the late receivers' persistent sessions and replays both after their login.
/// Every second copy is duplicated, the ones a catch-up brings included.
#[test]
fn copies_queued_twice_for_offline_users_are_duplicated() {
    let broker = Mosquitto::start("");
    let republisher = Republisher::start(broker.port, "msgstorm/u/+");
    // One sender online; every other user is late and receives its messages while away.
    let (late, messages) = (4u64, 10u64);
    let scenario = format!(
        r#"name = "mqtt-twice"
drain = "1s"

[target]
driver = "mqtt"
url = "{}"

[population]
users = {}
late = {{ count = {late}, at = "2500ms" }}

[[traffic]]
kind = "direct"
senders = 1
receivers = {late}
messages = {messages}
interval = "10ms"

[checks]
max_lost = 0
"#,
        broker.url(),
        late + 1
    );
    let run = run_msgstorm(&scenario, &[], LIMIT);
    let again = republisher.stop();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let d = run.artifact.expect("result.json").ledger.summary();
    assert_eq!(again, late * messages, "the republisher saw every message");
    assert_eq!((d.expected, d.delivered, d.lost), (40, 40, 0), "{d:?}");
    assert_eq!(
        d.via_sync, d.expected,
        "all of it replayed after the login: {d:?}"
    );
    assert_eq!(d.duplicated, again, "{d:?}");
}
