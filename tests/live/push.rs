//! `--metrics-push`: a run pushes its series by remote-write to a real Prometheus, the
//! last push carrying the final totals (equal to `result.json`'s); a receiver that is not
//! there costs a note, not the run; a URL that is not `http://…` is exit 2 naming the flag.

use std::time::{Duration, Instant};

use crate::common::peers::free_port;
use crate::live::grafana::Prometheus;
use crate::live::metrics::RunJob;

/// A short run of the embedded server.
const SCENARIO: &str = "name = \"push\"\ndrain = \"1s\"\n\n[population]\nusers = 20\n\
    login_rate = 400\n\n[[traffic]]\nkind = \"direct\"\nsenders = 10\nreceivers = 10\n\
    rate = 100\nduration = \"2s\"\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_prometheus),
    ignore = "prometheus is not installed (scripts/test installs it)"
)]
async fn the_final_push_carries_the_runs_totals() {
    let prometheus = Prometheus::start(None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while prometheus.query("vector(1)").await.is_none() {
        assert!(
            Instant::now() < deadline,
            "Prometheus did not answer within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("http://127.0.0.1:{}/api/v1/write", prometheus.port);
    let job = RunJob::new(SCENARIO, &["--metrics-push", &url]);
    let ran = job.run().await;
    ran.expect_code(0);
    assert!(
        !ran.stdout.contains("metrics push:"),
        "every push landed\n{ran}"
    );
    let artifact = job.result();
    let run = &artifact.run_id;
    let sent = artifact.metrics.count(msgstorm::metrics::Counter::Sent);
    assert!(sent > 0);
    let value = |r: Vec<serde_json::Value>| -> Option<f64> {
        r.first()?["value"][1].as_str()?.parse().ok()
    };
    let q = format!("msgstorm_messages_sent_total{{run=\"{run}\",shard=\"0\"}}");
    let pushed = value(prometheus.query(&q).await.expect("an answer"));
    assert_eq!(pushed, Some(sent as f64), "{q}\n{ran}");
    let done = format!("msgstorm_run_phase{{run=\"{run}\",phase=\"done\"}}");
    assert_eq!(
        value(prometheus.query(&done).await.expect("an answer")),
        Some(1.0)
    );
    let buckets = format!("count(msgstorm_e2e_latency_seconds_bucket{{run=\"{run}\"}})");
    assert_eq!(
        value(prometheus.query(&buckets).await.expect("an answer")),
        Some(17.0)
    );
}

#[tokio::test]
async fn a_missing_receiver_is_a_note_and_a_bad_url_is_exit_2() {
    let url = format!("http://127.0.0.1:{}/api/v1/write", free_port());
    let ran = RunJob::new(SCENARIO, &["--metrics-push", &url]).run().await;
    ran.expect_code(0);
    assert!(
        ran.stdout.contains("metrics push: 1 of 1 pushes failed"),
        "{ran}"
    );
    let ran = RunJob::new(SCENARIO, &["--metrics-push", "ftp://127.0.0.1/write"])
        .run()
        .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("--metrics-push"), "{ran}");
}
