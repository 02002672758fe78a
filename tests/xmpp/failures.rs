//! XMPP failures: no server, a wrong password, a missing account, a stream error, bad
//! `[target.xmpp]` keys.

use std::time::Duration;

use msgstorm::artifact::Artifact;
use msgstorm::metrics::{Counter, ErrorKind};

use crate::common::run::run_msgstorm;
use crate::common::xmpp::{scenario, shared, Kind};

/// The longest one run may take.
const LIMIT: Duration = Duration::from_secs(60);

/// A little direct traffic, no checks.
const SMALL: &str = r#"[population]
users = 4

[[traffic]]
kind = "direct"
senders = 1
receivers = 2
messages = 2
interval = "10ms"
"#;

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// The count and examples of errors of `kind`.
fn errors(a: &Artifact, kind: ErrorKind) -> (u64, Vec<String>) {
    a.metrics
        .errors()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, n, ex)| (n, ex.to_vec()))
        .unwrap_or_default()
}

#[test]
fn no_server_exits_3_with_a_clear_message() {
    let url = format!("xmpp://127.0.0.1:{}", dead_port());
    let text = format!(
        "name = \"x\"\n[target]\ndriver = \"xmpp\"\nurl = \"{url}\"\n\
         [target.auth]\nusername = \"{{user}}\"\npassword = \"p\"\n{SMALL}"
    );
    let run = run_msgstorm(&text, &[], LIMIT);
    assert_eq!(run.code, 3, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("unreachable") && run.stderr.contains(&url),
        "{}",
        run.stderr
    );
}

#[test]
fn bad_options_are_scenario_errors_before_connecting() {
    let url = format!("xmpp://127.0.0.1:{}", dead_port());
    for (xmpp, key) in [
        ("[target.xmpp]\nsasl = \"digest-md5\"", "target.xmpp.sasl"),
        ("[target.xmpp]\nregistr = true", "target.xmpp.registr"),
        ("[target.xmpp]\nca_file = \"ca.pem\"", "target.xmpp.ca_file"),
        // A domain TLS cannot name fails here, not at every login.
        (
            "[target.xmpp]\ntls = \"starttls\"\ndomain = \"a..b\"",
            "target.xmpp.domain",
        ),
    ] {
        let text = format!(
            "name = \"x\"\n[target]\ndriver = \"xmpp\"\nurl = \"{url}\"\n\
             [target.auth]\nusername = \"{{user}}\"\npassword = \"p\"\n{xmpp}\n{SMALL}"
        );
        let run = run_msgstorm(&text, &[], LIMIT);
        assert_eq!(run.code, 2, "{xmpp}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(key), "{key}: {}", run.stderr);
    }
    // No credentials at all: XMPP needs them.
    let text = format!("name = \"x\"\n[target]\ndriver = \"xmpp\"\nurl = \"{url}\"\n{SMALL}");
    let run = run_msgstorm(&text, &[], LIMIT);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("target.auth"), "{}", run.stderr);
}

/// Registers the users with the right password, then logs in with a wrong one.
fn wrong_password_is_auth_failed(kind: Kind) {
    let server = shared(kind);
    let run = run_msgstorm(&scenario(server, "f-cred", "", SMALL), &[], LIMIT);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let wrong = scenario(server, "f-cred", "", SMALL).replace("pw-{user}", "wrong");
    let run = run_msgstorm(&wrong, &[], LIMIT);
    let a = run
        .artifact
        .unwrap_or_else(|| panic!("result.json: {}{}", run.stdout, run.stderr));
    let (n, examples) = errors(&a, ErrorKind::AuthFailed);
    assert!(n >= 4, "every login is auth_failed: {}", run.stdout);
    assert!(
        examples.iter().any(|e| e.contains("not-authorized")),
        "{examples:?}"
    );
    assert_eq!(a.metrics.count(Counter::LoginOk), 0);
}

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_wrong_password_is_auth_failed() {
    wrong_password_is_auth_failed(Kind::Ejabberd);
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_wrong_password_is_auth_failed() {
    wrong_password_is_auth_failed(Kind::Prosody);
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn a_missing_account_without_registration_is_auth_failed() {
    let server = shared(Kind::Prosody);
    let text = scenario(server, "f-noacct", "", SMALL).replace("register = true", "");
    let run = run_msgstorm(&text, &[], LIMIT);
    let a = run
        .artifact
        .unwrap_or_else(|| panic!("result.json: {}{}", run.stdout, run.stderr));
    let (n, _) = errors(&a, ErrorKind::AuthFailed);
    assert!(n >= 4, "{}", run.stdout);
}

#[test]
#[cfg_attr(
    not(all(peer_ejabberd, peer_prosody)),
    ignore = "ejabberd or prosody is not installed (scripts/test installs them)"
)]
fn a_stream_error_is_classified_not_a_panic() {
    for kind in Kind::ALL {
        let server = shared(kind);
        // A domain the server does not host: it ends the stream with `host-unknown`.
        let text = scenario(server, "f-host", "", SMALL)
            .replace("domain = \"localhost\"", "domain = \"nowhere.invalid\"");
        let run = run_msgstorm(&text, &[], LIMIT);
        assert!(!run.stderr.contains("panicked"), "{kind:?}: {}", run.stderr);
        let a = run
            .artifact
            .unwrap_or_else(|| panic!("{kind:?}: result.json: {}{}", run.stdout, run.stderr));
        let (n, examples) = errors(&a, ErrorKind::Protocol);
        assert!(n >= 4, "{kind:?}: {}", run.stdout);
        assert!(
            examples
                .iter()
                .any(|e| e.contains("stream error: host-unknown")),
            "{kind:?}: {examples:?}"
        );
    }
}

/// In-band registration says what it did: every account created on a first run, found on
/// a second, and refused when the server will not have the name — in the result and the
/// report.
fn registration_counts_created_existing_and_refused(kind: Kind) {
    let server = shared(kind);
    let text = scenario(server, "f-reg", "", SMALL);
    let accounts = |text: &str| {
        let run = run_msgstorm(text, &[], LIMIT);
        let a = run
            .artifact
            .unwrap_or_else(|| panic!("{kind:?}: result.json: {}{}", run.stdout, run.stderr));
        let n = |c| a.metrics.count(c);
        let counts = (
            n(Counter::AccountsCreated),
            n(Counter::AccountsExisting),
            errors(&a, ErrorKind::Registration).0,
        );
        (counts, run.stdout)
    };
    let (first, stdout) = accounts(&text);
    assert_eq!(first, (4, 0, 0), "{kind:?}: {stdout}");
    assert!(
        stdout.contains("accounts (created before login)")
            && stdout.contains("4 created, 0 existed, 0 refused"),
        "{kind:?}: {stdout}"
    );
    assert_eq!(accounts(&text).0, (0, 4, 0), "{kind:?}: a second run");
    // A username that is not a JID's local part: the server refuses to register it.
    let bad = text.replace("username = \"f-reg-{user}\"", "username = \"f reg@{user}\"");
    let ((created, existing, refused), stdout) = accounts(&bad);
    assert_eq!((created, existing), (0, 0), "{kind:?}: {stdout}");
    assert!(refused >= 4, "{kind:?}: {stdout}");
}

#[test]
#[cfg_attr(
    not(peer_ejabberd),
    ignore = "ejabberd is not installed (scripts/test installs it)"
)]
fn ejabberd_registration_counts_created_existing_and_refused() {
    registration_counts_created_existing_and_refused(Kind::Ejabberd);
}

#[test]
#[cfg_attr(
    not(peer_prosody),
    ignore = "prosody is not installed (scripts/test installs it)"
)]
fn prosody_registration_counts_created_existing_and_refused() {
    registration_counts_created_existing_and_refused(Kind::Prosody);
}
