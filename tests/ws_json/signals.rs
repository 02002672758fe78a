//! Signals through `ws-json` against the reference server, described by
//! `scenarios/ws-json-signals.toml` alone: every receipt, typing notice and presence owed
//! arrives once (receipts for a sender that was away by the paged `receipts` fetch), the
//! server stored every receipt sent and pushed at least every typing notice and presence
//! that arrived; a scenario asking for a signal whose template is not set is
//! refused, naming the key to set.

use crate::common::run::{msgstorm, run_file, Work};
use crate::common::{config, http_get, metric, start};
use crate::signals::{deliveries, owed_arrived_once};

const SCENARIO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/scenarios/ws-json-signals.toml"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shipped_signals_scenario_gets_every_signal_once_and_the_server_agrees() {
    let work = Work::new();
    let server = start(config()).await;
    let url = format!("target.url={}", server.ws_url());
    let secret = format!("target.auth.secret={}", server.secret());
    let out = work.path("out");
    let extra = ["--set", &url, "--set", &secret];
    let (ran, a) = run_file(SCENARIO.as_ref(), &out, &extra).await;
    let metrics = http_get(server.addr(), "/metrics").await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let [read, typing, presence] = deliveries(&a);
    owed_arrived_once(&[read, typing, presence]);
    assert!(read.via_sync > 0, "some receipts came by fetch: {read:?}");
    assert_eq!(read.refused, 0, "{read:?}");
    assert_eq!(
        metric(&metrics, "serve_receipts_stored_total"),
        Some(read.sent as f64),
        "the server stored every receipt sent, once: {read:?}"
    );
    // A push to a connection that closes before reading it never arrives: what arrived,
    // owed or not, is at most what the server pushed.
    for (d, name) in [(typing, "typing"), (presence, "presence")] {
        let series = format!("serve_signals_pushed_total{{kind=\"{name}\"}}");
        let pushed = metric(&metrics, &series).expect("pushed counter");
        let got = (d.arrived + d.extra) as f64;
        assert!(got > 0.0 && got <= pushed, "{name}: {pushed} pushed, {d:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_without_its_template_is_refused_naming_the_key_to_set() {
    let text = include_str!("../../scenarios/ws-json-signals.toml");
    let typing = "typing = '{\"type\":\"typing\"";
    let at = text.find(typing).expect("a typing template");
    let end = at + text[at..].find('\n').expect("end of line");
    let without = format!("{}{}", &text[..at], &text[end + 1..]);
    // Without `typing`, `group_typing` would name it: that line goes too.
    let group = without
        .find("group_typing = ")
        .expect("a group_typing template");
    let group_end = group + without[group..].find('\n').expect("end of line");
    let without = format!("{}{}", &without[..group], &without[group_end + 1..]);
    let work = Work::new();
    let file = work.write("s.toml", &without).display().to_string();
    let ran = msgstorm(&["validate", &file]).await;
    ran.expect_code(2);
    let line = 1 + without[..without.find("typing = 0.5").expect("[signals] typing")]
        .matches('\n')
        .count();
    let want = format!(
        "error: {file}:{line}: signals.typing: driver `ws-json` sends no typing notices \
         (`target.ws-json.typing` is not set)"
    );
    assert_eq!(ran.stderr.trim(), want, "{ran}");

    let contacts = "contacts = '{";
    assert!(text.contains(contacts), "a contacts template");
    let no_contacts = text.replacen(contacts, "# contacts = '{", 1);
    let file = work.write("c.toml", &no_contacts).display().to_string();
    let ran = msgstorm(&["validate", &file]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr
            .contains(": target.ws-json.contacts: is required with `presence`"),
        "{ran}"
    );
    assert_eq!(ran.stderr.trim().lines().count(), 1, "one line: {ran}");
}
