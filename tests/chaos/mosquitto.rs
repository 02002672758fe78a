//! mosquitto killed (-9) mid-run and restarted on its persistence file, with QoS 1 and
//! persistent sessions: what the broker had saved survives, and the ledger counts exactly
//! what it did not.

use std::time::Duration;

use msgstorm::report::Report;

use crate::common::mosquitto::{run_msgstorm, Mosquitto};

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn mosquitto_restarted_on_its_persistence_keeps_the_sessions() {
    let Some(broker) = Mosquitto::start_with(|dir| {
        // Saved after every change: a message the broker acknowledged is on disk when the
        // kill comes, unless the kill falls between the two.
        format!(
            "persistence true\npersistence_location {}/\nautosave_on_changes true\n\
             autosave_interval 1\n",
            dir.display()
        )
    }) else {
        return;
    };
    let conf = broker.dir.path().join("mosquitto.conf");
    let bin = crate::common::mosquitto::required("mosquitto").expect("mosquitto");
    let scenario = format!(
        r#"name = "mqtt-restart"
drain = "4s"

[target]
driver = "mqtt"
url = "{url}"

[population]
users = 30
login_rate = 1000

[[traffic]]
kind = "direct"
senders = 10
receivers = 10
duration = "6s"
rate = 100

[[traffic]]
kind = "group"
groups = 2
group_size = 8
duration = "6s"
rate = 20

[[chaos]]
action = "restart"
pid = {pid}
at = "2s"
start = "{bin} -c {conf}"

[checks]
max_duplicated = 0
"#,
        url = broker.url(),
        pid = broker.pid(),
        bin = bin.display(),
        conf = conf.display(),
    );
    let run = run_msgstorm(&scenario, &[], Duration::from_secs(90));
    let artifact = run.artifact.expect("result.json");
    let r = Report::new(&artifact);
    if let Some(&new) = r.chaos.first().and_then(|c| c.step.pids.get(1)) {
        let _ = std::process::Command::new("kill")
            .arg(new.to_string())
            .status();
    }
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let step = &r.chaos[0];
    assert!(step.step.ok, "{:?}", step.step);
    let d = artifact.ledger.summary();
    assert!(
        artifact
            .metrics
            .count(msgstorm::metrics::Counter::Disconnects)
            >= 30,
        "every user lost its connection\n{}",
        run.stdout
    );
    assert_eq!(d.duplicated, 0, "{d:?}");
    // A publish in flight at the kill is refused (its PUBACK never came) and so expected
    // nowhere, yet the broker may have saved and delivered it: then delivered exceeds
    // expected by that many, and nothing expected is unaccounted for.
    assert!(
        d.delivered + d.lost >= d.expected && d.refused > 0,
        "every expected delivery delivered or lost; publishes in flight refused\n{d:?}"
    );
    let spans: u64 = artifact.ledger.spans().iter().map(|s| s.lost).sum();
    assert_eq!(spans, d.lost, "every loss placed by its due time: {d:?}");
}
