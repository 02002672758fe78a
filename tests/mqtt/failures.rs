//! MQTT failures: no broker, bad credentials, bad `[target.mqtt]` keys.

use std::time::Duration;

use msgstorm::metrics::ErrorKind;

use crate::common::mosquitto::{required, run_msgstorm, Mosquitto};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(30);

fn scenario(url: &str, extra: &str) -> String {
    format!(
        r#"name = "mqtt-fail"
drain = "1s"

[target]
driver = "mqtt"
url = "{url}"
connect_timeout = "2s"
{extra}

[population]
users = 4

[[traffic]]
kind = "direct"
senders = 1
receivers = 2
messages = 2
interval = "10ms"
"#
    )
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

#[test]
fn no_broker_exits_3_with_a_clear_message() {
    let url = format!("mqtt://127.0.0.1:{}", dead_port());
    let run = run_msgstorm(&scenario(&url, ""), &[], LIMIT);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("unreachable") && run.stderr.contains(&url),
        "{}",
        run.stderr
    );
}

#[test]
fn unknown_option_is_a_scenario_error_before_connecting() {
    // No broker at all: the options are checked first, so this is exit 2, not 3.
    let url = format!("mqtt://127.0.0.1:{}", dead_port());
    let run = run_msgstorm(&scenario(&url, "[target.mqtt]\nqoss = 1"), &[], LIMIT);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("target.mqtt.qoss"), "{}", run.stderr);
    let run = run_msgstorm(&scenario(&url, "[target.mqtt]\nqos = 3"), &[], LIMIT);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("target.mqtt.qos"), "{}", run.stderr);
}

#[test]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
fn bad_credentials_are_classified_auth_failed() {
    let Some(passwd) = required("mosquitto_passwd") else {
        return;
    };
    let broker = Mosquitto::start_with(|dir| {
        let file = dir.join("passwd");
        let ok = std::process::Command::new(&passwd)
            .args(["-c", "-b"])
            .arg(&file)
            .args(["u0", "right"])
            .status()
            .expect("run mosquitto_passwd");
        assert!(ok.success(), "mosquitto_passwd failed");
        format!("allow_anonymous false\npassword_file {}", file.display())
    });
    let Some(broker) = broker else {
        return;
    };
    let auth = "[target.auth]\nusername = \"{user}\"\npassword = \"wrong\"";
    let run = run_msgstorm(&scenario(&broker.url(), auth), &[], LIMIT);
    let a = run
        .artifact
        .unwrap_or_else(|| panic!("result.json: {}{}", run.stdout, run.stderr));
    let (n, examples) = a
        .metrics
        .errors()
        .find(|(k, _, _)| *k == ErrorKind::AuthFailed)
        .map(|(_, n, ex)| (n, ex.to_vec()))
        .unwrap_or_default();
    assert!(n >= 4, "every login is auth_failed: {}", run.stdout);
    assert!(
        examples.iter().any(|e| e.contains("CONNACK")),
        "{examples:?}"
    );
    assert_eq!(a.metrics.count(msgstorm::metrics::Counter::LoginOk), 0);
}
