//! Signals through `msgstorm run` against the reference server and the `native` driver:
//! every receipt, typing notice and presence owed arrives once (receipts for a sender that
//! was away by the fetch after its return), and the server stored every receipt sent; with
//! pushes dropped, receipts are repaired and typing and presence are missed, no more than
//! the server dropped.

use msgstorm::artifact::SignalRecord;
use msgstorm::vocab::SignalKind;

use super::{every_owed_arrived_once, DAY, SIGNALS};
use crate::common::run::{run_text, scenario, Work};
use crate::common::{config, fault_log, http_get, metric, start};
use msgstorm::serve::faults::FaultSpec;
use msgstorm::serve::ServeConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_the_reference_server_gets_every_signal_once() {
    let work = Work::new();
    let server = start(config()).await;
    let text = scenario(
        "name = \"signals-native\"\nseed = 5\ndrain = \"2s\"",
        &server,
        &format!("{DAY}{SIGNALS}"),
    );
    let (ran, a) = run_text(&work, &text).await;
    let metrics = http_get(server.addr(), "/metrics").await;
    ran.expect_code(0);
    assert!(ran.verdict().starts_with("PASS"), "{ran}");
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals in result.json"));
    every_owed_arrived_once(&rows);
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

/// Pushes dropped by the server: receipts are repaired by the fetch (they are stored),
/// typing and presence are lost, and never more of them than the server's fault log lists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_signal_pushes_are_repaired_for_receipts_and_counted_for_the_rest() {
    let work = Work::new();
    let log = work.path("faults.jsonl");
    let server = start(ServeConfig {
        faults: FaultSpec::parse("drop=0.05").expect("valid fault spec"),
        fault_seed: Some(38),
        fault_log: Some(log.clone()),
        ..config()
    })
    .await;
    let text = scenario(
        "name = \"signals-faults\"\nseed = 5\ndrain = \"2s\"",
        &server,
        &format!("{DAY}{SIGNALS}"),
    );
    let (ran, a) = run_text(&work, &text).await;
    server.shutdown().await.expect("server stops");
    let drops = |signal: &str| {
        fault_log(&log)
            .iter()
            .filter(|l| l["signal"] == signal && l["kind"] == "drop")
            .count() as u64
    };
    let rows = SignalRecord::summary(a.signals.as_ref().expect("signals in result.json"));
    let (read, typing, presence) = (rows[0].delivery, rows[1].delivery, rows[2].delivery);
    assert!(drops("receipt") > 0, "no receipt push dropped: {read:?}");
    assert_eq!(read.missing, 0, "stored, so fetched: {read:?}");
    for (d, signal) in [(typing, "typing"), (presence, "presence")] {
        let dropped = drops(signal);
        assert!(
            d.missing > 0 && d.missing <= dropped,
            "{signal}: {dropped} dropped, {d:?}"
        );
    }
    ran.expect_code(1);
    for failed in ["checks.max_typing_missed", "checks.max_presence_missed"] {
        assert!(ran.verdict().contains(failed), "{failed}: {ran}");
    }
    assert!(!ran.verdict().contains("max_receipts_lost"), "{ran}");
}
