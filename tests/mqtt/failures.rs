//! MQTT failures: no broker, bad credentials, bad `[target.mqtt]` keys, a broker killed
//! mid-run.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use msgstorm::artifact::Artifact;
use msgstorm::metrics::ErrorKind;

use crate::common::mosquitto::{required, Mosquitto};
use crate::common::run::{msgstorm, run_msgstorm, Running, Work};

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
    let passwd = required("mosquitto_passwd");
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

/// Mosquitto killed (SIGKILL) mid-run costs each connection one error,
/// `closed_by_peer`; reconnecting to the dead port is refused, and nothing else is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_mosquitto),
    ignore = "mosquitto is not installed (scripts/test installs it)"
)]
async fn a_killed_broker_costs_each_connection_one_closed_by_peer() {
    let broker = Mosquitto::start("");
    let users = 6;
    let text = format!(
        r#"name = "mqtt-killed"
drain = "1s"

[target]
driver = "mqtt"
url = "{}"

[population]
users = {users}
login_rate = 400

[[traffic]]
kind = "direct"
senders = 3
receivers = 3
interval = "20ms"
duration = "5s"
"#,
        broker.url()
    );
    let work = Work::new();
    let file = work.write("killed.toml", &text);
    let out = work.path("out");
    let (file, out_arg) = (file.display().to_string(), out.display().to_string());
    let mut run = Running::start(&["run", &file, "--out", &out_arg, "-q"]);
    // Every user is connected once the broker logged as many clients.
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker.log().matches("New client connected").count() < users {
        assert!(!run.exited(), "the run ended before the broker was killed");
        assert!(Instant::now() < deadline, "{}", broker.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(broker);
    let ran = run.finish().await;
    let a = Artifact::read(&out.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json: {e}\n{ran}"));
    let errors: BTreeMap<&str, u64> = a.metrics.errors().map(|(k, n, _)| (k.name(), n)).collect();
    assert_eq!(
        errors.get("closed_by_peer"),
        Some(&(users as u64)),
        "{errors:?}\n{ran}"
    );
    assert!(
        errors
            .keys()
            .all(|k| ["closed_by_peer", "connect_refused"].contains(k)),
        "{errors:?}\n{ran}"
    );
}

/// MQTT has no read receipts, typing or presence of its own: a scenario asking for any of
/// them is refused by `validate` in one line naming the `[signals]` key, before anything
/// connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_are_refused_in_one_line_naming_the_key() {
    let url = format!("mqtt://127.0.0.1:{}", dead_port());
    let work = Work::new();
    for (key, value, what) in [
        ("receipts", "0.5", "sends no read receipts"),
        ("typing", "0.5", "sends no typing notices"),
        ("presence", "true", "publishes no presence"),
    ] {
        let text = format!("{}\n[signals]\n{key} = {value}\n", scenario(&url, ""));
        let line = text.lines().count();
        let file = work.write("s.toml", &text).display().to_string();
        let ran = msgstorm(&["validate", &file]).await;
        ran.expect_code(2);
        assert_eq!(
            ran.stderr.trim(),
            format!("error: {file}:{line}: signals.{key}: driver `mqtt` {what}"),
            "{ran}"
        );
    }
}
