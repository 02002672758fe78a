//! `mqtts://` through mosquitto's TLS listener, trusting a test CA given as `ca_file`.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::mosquitto::{required, run_msgstorm, Mosquitto};

/// Makes a CA and a server certificate for 127.0.0.1 signed by it in `dir`.
fn make_certs(openssl: &Path, dir: &Path) {
    let run = |line: &str| {
        let out = Command::new(openssl)
            .args(line.split(' '))
            .current_dir(dir)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl {line}: {out:?}");
    };
    let ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run(&format!(
        "req -x509 {ec} -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca"
    ));
    run(&format!(
        "req {ec} -keyout server.key -out server.csr -subj /CN=127.0.0.1"
    ));
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1\n").expect("ext file");
    run(
        "x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
         -days 2 -extfile ext.cnf",
    );
    // mosquitto started as root drops to its own user before it loads the key.
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(dir.to_owned(), 0o755), (dir.join("server.key"), 0o644)] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

#[test]
fn mqtts_with_a_ca_file_delivers_everything() {
    let Some(openssl) = required("openssl") else {
        return;
    };
    let broker = Mosquitto::start_with(|dir| {
        make_certs(&openssl, dir);
        format!(
            "cafile {0}/ca.pem\ncertfile {0}/server.pem\nkeyfile {0}/server.key",
            dir.display()
        )
    });
    let Some(broker) = broker else {
        return;
    };
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
