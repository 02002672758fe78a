//! TLS on XMPP: STARTTLS on the c2s port and direct TLS (`xmpps://`), through Prosody,
//! trusting a test CA given as `ca_file`.

use std::path::Path;
use std::time::Duration;

use crate::common::certs::make_certs_for;
use crate::common::peers::required;
use crate::common::run::run_msgstorm;
use crate::common::xmpp::{passed, scenario, Kind, Server};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(60);

/// Makes a CA and a certificate for `localhost` signed by it in `dir`.
fn make_certs(openssl: &Path, dir: &Path) {
    make_certs_for(openssl, dir, "localhost", "DNS", "localhost.crt");
    // Prosody finds a host's certificate by name in its `certificates` directory.
    std::fs::rename(dir.join("server.key"), dir.join("localhost.key")).expect("rename key");
}

/// A little 1:1 traffic, every message checked.
const SMALL: &str = r#"[population]
users = 6

[[traffic]]
kind = "direct"
senders = 2
receivers = 4
messages = 5
interval = "10ms"

[checks]
max_lost = 0
max_duplicated = 0
"#;

#[test]
#[cfg_attr(
    not(all(peer_prosody, peer_openssl)),
    ignore = "prosody or openssl is not installed (scripts/test installs them)"
)]
fn starttls_and_direct_tls_deliver_everything() {
    let openssl = required("openssl");
    let certs = tempfile::tempdir().expect("temp dir");
    make_certs(&openssl, certs.path());
    let direct = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let d = certs.path().display();
    let extra = format!("certificates = \"{d}\"\nc2s_direct_tls_ports = {{ {direct} }}");
    let server = Server::start(Kind::Prosody, &extra);
    let ca = format!("ca_file = \"{d}/ca.pem\"");
    let starttls = scenario(
        &server,
        "t-start",
        &format!("tls = \"starttls\"\n{ca}"),
        SMALL,
    );
    let s = passed(run_msgstorm(&starttls, &[], LIMIT), &server)
        .ledger
        .summary();
    assert_eq!((s.delivered, s.lost), (s.expected, 0), "{s:?}");
    assert!(s.expected > 0, "{s:?}");

    let xmpps = scenario(&server, "t-direct", &ca, SMALL)
        .replace(&server.url(), &format!("xmpps://127.0.0.1:{direct}"));
    let s = passed(run_msgstorm(&xmpps, &[], LIMIT), &server)
        .ledger
        .summary();
    assert_eq!((s.delivered, s.lost), (s.expected, 0), "{s:?}");

    // Trusting another certificate than the CA: the handshake fails, no login.
    let wrong = format!("tls = \"starttls\"\nca_file = \"{d}/localhost.crt\"");
    let untrusted = scenario(&server, "t-bad", &wrong, SMALL);
    let run = run_msgstorm(&untrusted, &[], LIMIT);
    assert_ne!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("TLS handshake"), "{}", run.stdout);
    assert!(
        run.stdout.contains("| tls "),
        "classified as kind tls: {}",
        run.stdout
    );
}
