//! Signals through `msgstorm run` against the reference server and the `native` driver:
//! every receipt, typing notice and presence owed arrives once (receipts for a sender that
//! was away by the fetch after its return), and the server stored every receipt sent.

use msgstorm::artifact::SignalRecord;
use msgstorm::vocab::SignalKind;

use super::DAY;
use crate::common::run::{run_text, scenario, Work};
use crate::common::{config, http_get, metric, start};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_the_reference_server_gets_every_signal_once() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario(
        "name = \"signals-native\"\nseed = 5\ndrain = \"2s\"",
        &server,
        DAY,
    );
    let (ran, a) = run_text(&work, &text).await;
    let metrics = http_get(server.addr(), "/metrics").await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals in result.json"));
    for r in &rows {
        let d = r.delivery;
        assert!(d.expected > 50, "{r:?}");
        assert_eq!(
            (d.arrived, d.missing, d.duplicated),
            (d.expected, 0, 0),
            "{r:?}"
        );
    }
    let read = rows
        .iter()
        .find(|r| r.kind == SignalKind::Read)
        .expect("receipts");
    assert!(read.delivery.via_sync > 0, "some came by fetch: {read:?}");
    assert_eq!(
        metric(&metrics, "serve_receipts_stored_total"),
        Some(read.delivery.sent as f64),
        "the server stored every receipt sent, once: {read:?}"
    );
}
