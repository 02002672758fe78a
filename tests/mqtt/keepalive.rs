//! MQTT keep-alive: idle users stay connected to mosquitto, which drops a client that sends
//! nothing for 1.5 keep-alives, whether the engine's heartbeat sends the PINGREQs or the
//! connection does (heartbeats off).

use std::time::Duration;

use msgstorm::metrics::Counter;

use crate::common::mosquitto::Mosquitto;
use crate::common::run::run_msgstorm;

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(30);

/// Idle users for 10 s (mosquitto checks keep-alives every few seconds) with `heartbeat` and a 1 s keep-alive; returns (disconnects,
/// heartbeats counted, mosquitto's log).
fn idle(heartbeat: &str, version: u8) -> (u64, u64, String) {
    let broker = Mosquitto::start("");
    let scenario = format!(
        r#"name = "mqtt-keepalive"

[target]
driver = "mqtt"
url = "{}"
heartbeat = "{heartbeat}"

[target.mqtt]
version = {version}
keep_alive = "1s"

[population]
users = 5

[[traffic]]
kind = "idle"
duration = "10s"
"#,
        broker.url()
    );
    let run = run_msgstorm(&scenario, &[], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let m = run.artifact.expect("result.json").metrics;
    (
        m.count(Counter::Disconnects),
        m.count(Counter::Heartbeats),
        broker.log(),
    )
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn the_heartbeat_sends_the_pings() {
    let (disconnects, heartbeats, log) = idle("1s", 4);
    assert_eq!(disconnects, 0, "{log}");
    assert!(!log.contains("exceeded timeout"), "{log}");
    assert!(
        heartbeats >= 5 * 8,
        "a PINGREQ per user per second: {heartbeats}"
    );
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn without_heartbeats_the_connection_pings_by_itself() {
    let (disconnects, heartbeats, log) = idle("0s", 5);
    assert_eq!(heartbeats, 0);
    assert_eq!(disconnects, 0, "{log}");
    assert!(!log.contains("exceeded timeout"), "{log}");
}
