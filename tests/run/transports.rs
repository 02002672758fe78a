//! Connections and bytes per transport: a run counts the connections it opened and the
//! bytes on their wire under the transport that carried them, and nothing under the
//! others; the result file (valid by its schema) and every report format show them.

use msgstorm::artifact::Artifact;
use msgstorm::metrics::wires::Wire;

use crate::common::run::{msgstorm, run_text, Work};

/// Only `wire` carried the run: `connections` connections opened on it, bytes both ways;
/// every other transport's counters are zero.
pub fn only_transport(a: &Artifact, wire: Wire, connections: u64) {
    for w in Wire::ALL {
        let [opened, out, inn] = w.counters().map(|c| a.metrics.count(c));
        if w == wire {
            assert_eq!(opened, connections, "{} connections", w.name());
            assert!(
                out > 0 && inn > 0,
                "{} bytes: {out} out, {inn} in",
                w.name()
            );
        } else {
            assert_eq!((opened, out, inn), (0, 0, 0), "{} unused", w.name());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_run_counts_websocket_connections_and_bytes_and_no_other_transport() {
    let work = Work::new();
    let text = "name = \"transports\"\nseed = 3\ndrain = \"1s\"\n\n[population]\nusers = 4\n\n\
                [[traffic]]\nkind = \"direct\"\nsenders = 2\nreceivers = 1\nrate = 20\n\
                duration = \"1s\"\n";
    let (ran, a) = run_text(&work, text).await;
    ran.expect_code(0);
    only_transport(&a, Wire::Ws, 4);

    let result = work.path("out").join("result.json");
    let value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).expect("result.json"))
            .expect("JSON");
    let (schemas, schema) = crate::cli::report::result_schema();
    if let Err(e) = schemas.validate(&value, schema) {
        panic!("result.json does not match schema/result.schema.json: {e:#}");
    }
    let result = result.display().to_string();
    let json = msgstorm(&["report", &result, "--format", "json"]).await;
    json.expect_code(0);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).expect("report JSON");
    let transports = &report["connections"]["transports"];
    assert_eq!(transports.as_array().map(Vec::len), Some(1), "{transports}");
    assert_eq!(transports[0]["transport"], "ws", "{transports}");
    assert_eq!(transports[0]["connections"], 4, "{transports}");
    let text = msgstorm(&["report", &result]).await;
    let out = &text.stdout;
    assert!(
        out.contains("bytes received") && out.lines().any(|l| l.starts_with("| ws ")),
        "a transports table with a ws row:\n{out}"
    );
    let html = work.path("report.html");
    let html_arg = format!("--html={}", html.display());
    msgstorm(&["report", &result, &html_arg])
        .await
        .expect_code(0);
    let page = std::fs::read_to_string(&html).expect("report.html");
    assert!(
        page.contains("bytes received"),
        "the HTML report's transports table"
    );
}
