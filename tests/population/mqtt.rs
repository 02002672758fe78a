//! The population against real mosquitto: users who come and go get what their contacts
//! and groups sent while they were away from their persistent sessions, each message once.

use std::time::Duration;

use msgstorm::metrics::Counter;

use super::DAY;
use crate::common::mosquitto::Mosquitto;
use crate::common::run::run_msgstorm;

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn mosquitto_users_who_come_and_go_get_every_message_once_from_their_sessions() {
    let broker = Mosquitto::start("");
    let text = format!(
        "name = \"mqtt-day\"\nseed = 13\ndrain = \"3s\"\n\n[target]\ndriver = \"mqtt\"\nurl = \"{}\"\n{DAY}",
        broker.url()
    );
    let run = run_msgstorm(&text, &[], Duration::from_secs(90));
    assert_eq!(
        run.code,
        0,
        "{}{}\n{}",
        run.stdout,
        run.stderr,
        broker.log()
    );
    let a = run.artifact.expect("result.json");
    let d = a.ledger.summary();
    let sent = a.metrics.count(Counter::Sent);
    assert!(
        d.expected > sent + 200,
        "group messages reach every member: {d:?}"
    );
    assert_eq!(d.delivered, d.expected, "{d:?}");
    assert_eq!((d.lost, d.duplicated, d.reordered), (0, 0, 0), "{d:?}");
    assert!(
        d.via_sync > 50 && d.via_push > 50,
        "both live and queued: {d:?}"
    );
}
