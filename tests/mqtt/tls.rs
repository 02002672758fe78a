//! `mqtts://` through mosquitto's TLS listener, trusting a test CA given as `ca_file`.

use std::time::Duration;

use crate::common::certs::make_certs;
use crate::common::mosquitto::{required, Mosquitto};
use crate::common::run::run_msgstorm;

#[test]
#[cfg_attr(
    not(all(peer_mosquitto, peer_openssl)),
    ignore = "mosquitto or openssl is not installed (scripts/test installs them)"
)]
fn mqtts_with_a_ca_file_delivers_everything() {
    let openssl = required("openssl");
    let broker = Mosquitto::start_with(|dir| {
        make_certs(&openssl, dir);
        format!(
            "cafile {0}/ca.pem\ncertfile {0}/server.pem\nkeyfile {0}/server.key",
            dir.display()
        )
    });
    let ca = broker.dir.path().join("ca.pem");
    let scenario = format!(
        r#"name = "mqtts"
drain = "3s"

[target]
driver = "mqtt"
url = "mqtts://127.0.0.1:{}"

[target.mqtt]
ca_file = "{}"

[population]
users = 6

[[traffic]]
kind = "direct"
senders = 2
receivers = 4
messages = 5
interval = "10ms"

[checks]
max_lost = 0
"#,
        broker.port,
        ca.display()
    );
    let run = run_msgstorm(&scenario, &[], Duration::from_secs(30));
    assert_eq!(
        run.code,
        0,
        "{}{}\n{}",
        run.stdout,
        run.stderr,
        broker.log()
    );
    let d = run.artifact.expect("result.json").ledger.summary();
    assert_eq!((d.expected, d.delivered, d.lost), (40, 40, 0), "{d:?}");
}
