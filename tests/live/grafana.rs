//! `docs/grafana/msgstorm.json` against real data: Debian's Prometheus scrapes a running
//! `msgstorm run --metrics-listen` once a second, and every query of the dashboard (its
//! panels and its `run` variable) answers with series; every metric they name is in the
//! endpoint's own scrape.

use std::collections::BTreeSet;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::peers::free_port;
use crate::common::run::Work;
use crate::live::metrics::{get, parse, RunJob};

/// Prometheus on a free loopback port, scraping 127.0.0.1:`target` every second (if
/// any) and taking remote-write at `/api/v1/write`; killed on drop.
pub struct Prometheus {
    child: Child,
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    _dir: Work,
}

impl Prometheus {
    /// Starts it; it answers once [`Prometheus::query`] gives `Some`.
    pub fn start(target: Option<u16>) -> Prometheus {
        let dir = Work::new();
        let scrape = target.map_or(String::new(), |t| {
            format!(
                "scrape_configs:\n  - job_name: msgstorm\n    static_configs:\n\
                 \x20     - targets: ['127.0.0.1:{t}']\n"
            )
        });
        let config = dir.write(
            "prometheus.yml",
            &format!("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n{scrape}"),
        );
        let port = free_port();
        let log = std::fs::File::create(dir.path("prometheus.log")).expect("log");
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--web.enable-remote-write-receiver")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        Prometheus {
            child,
            port,
            _dir: dir,
        }
    }

    /// The `data.result` of an instant query, or `None` while Prometheus does not answer.
    pub async fn query(&self, promql: &str) -> Option<Vec<serde_json::Value>> {
        let (_, body) = get(
            self.port,
            &format!("/api/v1/query?query={}", encode(promql)),
        )
        .await?;
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        assert_eq!(v["status"], "success", "{promql}: {body}");
        v["data"]["result"].as_array().cloned()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `s` percent-encoded for a query string.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every PromQL expression of the dashboard (panel targets and the `run` variable), with
/// Grafana's variables as a query of the last run would have them.
fn dashboard_queries() -> Vec<String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/grafana/msgstorm.json");
    let d: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the dashboard")).expect("JSON");
    let mut exprs: Vec<String> = d["panels"]
        .as_array()
        .expect("panels")
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .map(|t| t["expr"].as_str().expect("expr").to_owned())
        .collect();
    for v in d["templating"]["list"].as_array().expect("variables") {
        if let Some(q) = v["query"]["query"].as_str() {
            // label_values(METRIC, LABEL): the series of METRIC.
            let metric = q
                .trim_start_matches("label_values(")
                .split(',')
                .next()
                .expect("label_values(METRIC, LABEL)");
            exprs.push(metric.to_owned());
        }
    }
    exprs
        .into_iter()
        .map(|e| e.replace("$run", ".+").replace("$__rate_interval", "10s"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(peer_prometheus),
    ignore = "prometheus is not installed (scripts/test installs it)"
)]
async fn every_dashboard_query_answers_from_a_real_scrape() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 15, "{queries:?}");
    let metrics_port = free_port();
    let prometheus = Prometheus::start(Some(metrics_port));
    let addr = format!("127.0.0.1:{metrics_port}");
    let job = RunJob::new(
        "name = \"grafana\"\ndrain = \"1s\"\n\n[population]\nusers = 40\nlogin_rate = 400\n\n\
         [[traffic]]\nkind = \"direct\"\nsenders = 20\nreceivers = 20\nrate = 200\n\
         duration = \"25s\"\n",
        &["--metrics-listen", &addr],
    );
    let mut run = job.start();
    // Prometheus has two scrapes with traffic in them: rates exist.
    let deadline = Instant::now() + Duration::from_secs(20);
    let ready = "sum(rate(msgstorm_messages_received_total[10s])) > 0";
    while prometheus.query(ready).await.is_none_or(|r| r.is_empty()) {
        assert!(
            !run.exited(),
            "the run ended before Prometheus had its data"
        );
        assert!(
            Instant::now() < deadline,
            "Prometheus has no rate within 20 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    for q in &queries {
        let result = prometheus.query(q).await.expect("Prometheus answers");
        assert!(
            !result.is_empty(),
            "the dashboard's query has no series: {q}"
        );
    }
    let (_, body) = get(metrics_port, "/metrics").await.expect("a scrape");
    let scraped: BTreeSet<String> = parse(&body)
        .keys()
        .map(|k| {
            k.split_once('{')
                .map_or(k.as_str(), |(name, _)| name)
                .to_owned()
        })
        .collect();
    for q in &queries {
        for name in q.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if name.starts_with("msgstorm_") {
                assert!(
                    scraped.contains(name),
                    "{name} of `{q}` is not scraped: {scraped:?}"
                );
            }
        }
    }
    drop(run);
}
