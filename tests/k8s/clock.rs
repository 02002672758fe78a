//! Clock offsets between generator hosts, with an injected skew: shard 1 of 2 runs with
//! its wall clock 30 s ahead (`MSGSTORM_CLOCK_SKEW_MS`, a node whose clock is off). Met at
//! shard 0 over the network (the Kubernetes Job, run locally), it measures that offset to
//! within its stated uncertainty and the merged end-to-end latency has no trace of the
//! skew; met at a shared folder (no clock exchange), the same skew shows as 30 s of
//! end-to-end latency — the error the correction removes.

use msgstorm::artifact::Artifact;
use msgstorm::clock::SKEW_ENV;
use msgstorm::metrics::Hist;
use msgstorm::report::present;

use crate::common::run::{scenario, Work, BIN, RUN_LIMIT};
use crate::common::{config, start};
use crate::k8s::kubelet::{collect_pods, free_port, manifests, run_job, Node};

/// The injected skew of shard 1, ms.
const SKEW_MS: i64 = 30_000;

/// 40 users over 2 shards, 8 senders × 16 receivers drawn at random: messages cross the
/// shards both ways.
const TRAFFIC: &str = r#"
[population]
users = 40
login_rate = 400

[[traffic]]
name = "chat"
kind = "direct"
senders = 8
receivers = 16
rate = 80
duration = "2s"

[checks]
max_lost = 0
"#;

/// Shard 1's env: its clock [`SKEW_MS`] ahead.
fn skewed(index: u32) -> Vec<(String, String)> {
    if index == 1 {
        vec![(SKEW_ENV.to_owned(), SKEW_MS.to_string())]
    } else {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skewed_shards_offset_is_measured_and_taken_out_of_end_to_end_latency() {
    let server = start(config()).await;
    let work = Work::new();
    let text = scenario(
        "name = \"skew\"\nseed = 7\ndrain = \"3s\"",
        &server,
        TRAFFIC,
    );
    let file = work.write("s.toml", &text);
    let file = file.to_str().expect("utf-8");

    // Corrected: the Job's shards meet at shard 0 and run on its clock.
    let port = free_port().to_string();
    let list = manifests(&[
        file, "--shards", "2", "--image", "m:t", "--run-id", "5eed0c10", "--port", &port,
    ])
    .await;
    let pods = run_job(&list, &work, |index| Node {
        env: skewed(index),
        ..Node::default()
    })
    .await;
    let (collected, out) = collect_pods(&pods, &work).await;
    let merged = Artifact::read(&out.join("result.json")).expect("merged result");
    let clock = merged.shards[1]
        .clock
        .clone()
        .expect("shard 1's clock record");
    // Same host: the true offset is exactly the skew, and the estimate is within its
    // stated uncertainty of it, before and after traffic.
    let skew_us = SKEW_MS * 1000;
    assert!(
        clock.offset_us.abs_diff(skew_us) <= clock.uncertainty_us,
        "{clock:?}"
    );
    let (end, end_unc) = (
        clock.end_offset_us.expect("a final estimate"),
        clock.end_uncertainty_us.expect("its uncertainty"),
    );
    assert!(end.abs_diff(skew_us) <= end_unc, "{clock:?}");
    let e2e = merged.metrics.hist(Hist::EndToEnd);
    assert!(!e2e.is_empty());
    // Whatever this machine's load, a delivery on loopback takes far less than the skew.
    let max_corrected = e2e.max();
    assert!(
        max_corrected < (skew_us / 3) as u64,
        "corrected e2e max {max_corrected} µs"
    );
    assert!(
        collected
            .stdout
            .contains("clocks: every shard's times are on the reference clock"),
        "{collected}"
    );
    // The report shows the offset measured (30 s, give or take its uncertainty).
    let shown = format!("shard 1: offset +{}", present::ms(clock.offset_us as f64));
    assert!(collected.stdout.contains(&shown), "{shown}\n{collected}");

    // Latencies across the two shards' clocks are kept apart, both ways, and are corrected
    // too; same-shard ones are not among them.
    let cross: Vec<((u32, u32), u64, u64)> = merged
        .metrics
        .cross()
        .map(|(k, h)| (k, h.len(), h.max()))
        .collect();
    let keys: Vec<(u32, u32)> = cross.iter().map(|c| c.0).collect();
    assert_eq!(keys, [(0, 1), (1, 0)], "{cross:?}");
    let crossed: u64 = cross.iter().map(|c| c.1).sum();
    assert!(
        crossed > 0 && crossed < e2e.len(),
        "{cross:?} of {}",
        e2e.len()
    );
    assert!(
        cross.iter().all(|c| c.2 < (skew_us / 3) as u64),
        "{cross:?}"
    );

    // Had shard 1's final clock exchange failed (drift unknown), its cross-shard latencies
    // are left out of the merged figures and checks, and the report says how many.
    let mut unknown = merged.clone();
    if let Some(c) = unknown.shards[1].clock.as_mut() {
        c.end_offset_us = None;
        c.end_uncertainty_us = None;
    }
    let dir = work.path("drift-unknown");
    let unknown_file = unknown.write(&dir).expect("write the result");
    let unknown_file = unknown_file.to_str().expect("utf-8");
    let json = crate::common::run::msgstorm(&["report", unknown_file, "--json"]).await;
    let report: serde_json::Value = serde_json::from_str(&json.stdout).expect("a JSON report");
    assert_eq!(report["clocks"]["excluded"], crossed, "{}", json.stdout);
    assert_eq!(
        report["latency_us"]["end_to_end"]["count"],
        e2e.len() - crossed,
        "{}",
        json.stdout
    );
    let shown = crate::common::run::msgstorm(&["report", unknown_file]).await;
    let said = format!(
        "their {} cross-shard end-to-end latencies are left out",
        present::thousands(crossed)
    );
    assert!(shown.stdout.contains(&said), "{said}\n{}", shown.stdout);

    // Uncorrected: the same shards meeting at a folder, with no clock exchange.
    let barrier = work.path("start");
    let mut children = Vec::new();
    for index in 0..2u32 {
        let dir = work.path(&format!("plain-{index}"));
        let child = tokio::process::Command::new(BIN)
            .args([
                "run",
                file,
                "-q",
                "--run-id",
                "5eed0c11",
                "--shard",
                &format!("{index}/2"),
            ])
            .arg("--start-barrier")
            .arg(&barrier)
            .arg("--out")
            .arg(&dir)
            .envs(skewed(index))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start a shard");
        children.push((dir, child));
    }
    let mut results = Vec::new();
    for (dir, child) in children {
        let out = tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
            .await
            .expect("the shard finishes")
            .expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        results.push(dir.join("result.json"));
    }
    let plain = Artifact::read_merged(&results).expect("shards merge");
    assert!(plain.shards.iter().all(|s| s.clock.is_none()));
    let max_plain = plain.metrics.hist(Hist::EndToEnd).max();
    assert!(
        max_plain >= (skew_us * 9 / 10) as u64,
        "without the exchange the skew should show as end-to-end latency: max {max_plain} µs"
    );
    server.shutdown().await.expect("server stops");
}
