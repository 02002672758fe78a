//! `wss://` through the shared WebSocket transport (native, echo, ws-json): the reference
//! server behind a real nginx terminating TLS with a test CA's certificate. Trusted with
//! `ca_file` everything arrives; an untrusted CA or a name the certificate doesn't carry is
//! a `tls` error.

use msgstorm::metrics::ErrorKind;

use crate::common::nginx::Nginx;
use crate::common::run::{run_text, Work};
use crate::common::{config, start, SECRET};

/// 8 users over `driver` at `url` for a short while (1:1 chat for `native`, echoes for
/// `echo`), with `options` as the driver's table.
fn scenario(driver: &str, url: &str, options: &str) -> String {
    let (auth, traffic) = if driver == "native" {
        (
            format!("secret = \"{SECRET}\""),
            "kind = \"direct\"\nsenders = 4\nreceivers = 4\ninterval = \"20ms\"\nmessages = 10",
        )
    } else {
        (
            String::new(),
            "kind = \"echo\"\nconnections = 8\ninterval = \"20ms\"\nduration = \"1s\"",
        )
    };
    format!(
        r#"name = "wss"
seed = 4
drain = "2s"

[target]
driver = "{driver}"
url = "{url}"
connect_timeout = "5s"

[target.{driver}]
{options}

[target.auth]
{auth}

[population]
users = 8
login_rate = 100

[[traffic]]
{traffic}
size = 120

[checks]
max_lost = 0
max_duplicated = 0
"#
    )
}

/// The `tls` errors of a run, with their examples.
fn tls_errors(a: &msgstorm::artifact::Artifact) -> (u64, Vec<String>) {
    a.metrics
        .errors()
        .find(|e| e.0 == ErrorKind::Tls)
        .map(|(_, n, ex)| (n, ex.to_vec()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(all(peer_nginx, peer_openssl)),
    ignore = "nginx or openssl is not installed (scripts/test installs them)"
)]
async fn wss_through_nginx_delivers_everything_and_certificate_errors_are_tls() {
    let server = start(config()).await;
    let nginx = Nginx::wss_proxy(server.addr().port());
    let ca = format!("ca_file = \"{}\"", nginx.ca_file().display());
    let native = format!("wss://127.0.0.1:{}/ws", nginx.port);
    let echo = format!("wss://127.0.0.1:{}/echo", nginx.port);

    for (driver, url) in [("native", &native), ("echo", &echo)] {
        let work = Work::new();
        let (ran, a) = run_text(&work, &scenario(driver, url, &ca)).await;
        assert_eq!(ran.code, 0, "{driver}: {ran}\nnginx: {}", nginx.log());
        let d = a.ledger.summary();
        assert!(d.expected >= 40, "{driver}: {d:?}");
        assert_eq!((d.delivered, d.lost), (d.expected, 0), "{driver}: {d:?}");
        assert_eq!(tls_errors(&a).0, 0);
    }

    // ws-json takes the same keys in its own table: the reference server described by
    // templates, over TLS.
    let work = Work::new();
    let file = work.write(
        "ws-json.toml",
        include_str!("../../scenarios/ws-json-native.toml"),
    );
    let out = work.path("out");
    let url = format!("target.url={native}");
    let ca_file = format!("target.ws-json.ca_file={}", nginx.ca_file().display());
    let secret = format!("target.auth.secret={SECRET}");
    let sets = ["--set", &url, "--set", &ca_file, "--set", &secret];
    let (ran, a) = crate::common::run::run_file(&file, &out, &sets).await;
    assert_eq!(ran.code, 0, "ws-json: {ran}\nnginx: {}", nginx.log());
    let d = a.ledger.summary();
    assert!(d.expected > 0, "{d:?}");
    assert_eq!((d.delivered, d.lost), (d.expected, 0), "ws-json: {d:?}");

    // The test CA is not among the system's roots: every login fails its handshake.
    let work = Work::new();
    let (ran, a) = run_text(&work, &scenario("native", &native, "")).await;
    assert_ne!(ran.code, 0, "{ran}");
    // Each user tries twice: its first login and the one more of the final verification.
    let (n, examples) = tls_errors(&a);
    assert_eq!(n, 16, "{ran}");
    assert!(examples[0].contains("certificate"), "{examples:?}");

    // Trusted CA, but a name the certificate is not for.
    let work = Work::new();
    let options = format!("{ca}\nserver_name = \"chat.example.com\"");
    let (_, a) = run_text(&work, &scenario("native", &native, &options)).await;
    let (n, examples) = tls_errors(&a);
    assert_eq!(n, 16);
    assert!(
        examples[0].contains("chat.example.com") || examples[0].contains("name"),
        "{examples:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_options_are_refused_with_a_plain_url_naming_the_key() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario("native", &server.ws_url(), "ca_file = \"/nonexistent.pem\"");
    let file = work.write("s.toml", &text);
    let ran = crate::common::run::msgstorm(&["validate", &file.display().to_string()]).await;
    assert_eq!(ran.code, 2, "{ran}");
    assert!(
        ran.stderr
            .contains("s.toml:11: target.native.ca_file: only for a TLS URL"),
        "{ran}"
    );
    // A missing CA file with wss:// is named too.
    let text = scenario(
        "native",
        "wss://127.0.0.1:9/ws",
        "ca_file = \"/nonexistent.pem\"",
    );
    let file = work.write("t.toml", &text);
    let ran = crate::common::run::msgstorm(&["validate", &file.display().to_string()]).await;
    assert_eq!(ran.code, 2, "{ran}");
    assert!(
        ran.stderr
            .contains("t.toml:11: target.native.ca_file: /nonexistent.pem"),
        "{ran}"
    );
}
