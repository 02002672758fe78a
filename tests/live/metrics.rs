//! `--metrics-listen`: a running `msgstorm run` serves its OpenMetrics, scraped here over
//! real HTTP and parsed as Prometheus would; bad addresses and a port in use are exit 2
//! naming the setting; a scraper that stalls does not hold the run up.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::peers::free_port;
use crate::common::run::{msgstorm, Running, Work};

/// A run of the embedded server: 40 users, direct and group traffic for `secs` seconds.
pub fn scenario(secs: u32) -> String {
    format!(
        "name = \"live\"\ndrain = \"1s\"\n\n[population]\nusers = 40\nlogin_rate = 400\n\n\
         [[traffic]]\nkind = \"direct\"\nsenders = 20\nreceivers = 20\nrate = 200\n\
         duration = \"{secs}s\"\n\n[[traffic]]\nkind = \"group\"\ngroups = 2\ngroup_size = 10\n\
         rate = 20\nduration = \"{secs}s\"\n"
    )
}

/// A scenario written into a work folder and the `msgstorm run` of it (quiet, into the
/// folder's `out`) with extra arguments.
pub struct RunJob {
    /// The results folder.
    pub out: std::path::PathBuf,
    args: Vec<String>,
    _work: Work,
}

impl RunJob {
    /// `text` as the scenario, run with `extra` after the usual arguments.
    pub fn new(text: &str, extra: &[&str]) -> RunJob {
        let work = Work::new();
        let file = work.write("s.toml", text);
        let out = work.path("out");
        let mut args: Vec<String> = ["run", &file.display().to_string(), "--out"]
            .iter()
            .map(|a| (*a).to_owned())
            .collect();
        args.extend([out.display().to_string(), "-q".to_owned()]);
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        RunJob {
            out,
            args,
            _work: work,
        }
    }

    fn args(&self) -> Vec<&str> {
        self.args.iter().map(String::as_str).collect()
    }

    /// Starts the run in the background.
    pub fn start(&self) -> Running {
        Running::start(&self.args())
    }

    /// Runs it to its end.
    pub async fn run(&self) -> crate::common::run::Ran {
        msgstorm(&self.args()).await
    }

    /// Its `result.json`.
    pub fn result(&self) -> msgstorm::artifact::Artifact {
        msgstorm::artifact::Artifact::read(&self.out.join("result.json")).expect("result.json")
    }
}

/// `GET path` on 127.0.0.1:`port`: (status line and headers, body); `None` when nothing
/// listens.
pub async fn get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    // Chunked bodies (axum streams) are joined back.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Some((head.to_owned(), body))
}

/// The body of a chunked HTTP/1.1 response.
fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// A scrape parsed: `name{sorted labels}` → value (histogram buckets as `name_bucket` with
/// their `le`).
pub fn parse(text: &str) -> BTreeMap<String, f64> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("OpenMetrics that parses");
    let mut out = BTreeMap::new();
    for s in scrape.samples {
        let labels: BTreeMap<_, _> = s.labels.iter().collect();
        let key = |name: &str, extra: Option<(&str, String)>| {
            let mut l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            l.extend(extra.map(|(k, v)| format!("{k}={v}")));
            l.sort();
            format!("{name}{{{}}}", l.join(","))
        };
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => {
                out.insert(key(&s.metric, None), v);
            }
            prometheus_parse::Value::Histogram(buckets) => {
                for b in buckets {
                    let le = if b.less_than.is_infinite() {
                        "+Inf".to_owned()
                    } else {
                        b.less_than.to_string()
                    };
                    out.insert(
                        key(&format!("{}_bucket", s.metric), Some(("le", le))),
                        b.count,
                    );
                }
            }
            _ => {}
        }
    }
    out
}

/// The value of the one series named `name` (labels ignored).
fn value(scrape: &BTreeMap<String, f64>, name: &str) -> f64 {
    let prefix = format!("{name}{{");
    let found: Vec<f64> = scrape
        .iter()
        .filter(|(k, _)| k.starts_with(&prefix))
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(found.len(), 1, "one series {name}: {scrape:#?}");
    found[0]
}

/// Scrapes `port` until `until` holds for the parsed scrape (bounded by the run's life).
async fn scrape_until(
    port: u16,
    run: &mut Running,
    until: impl Fn(&BTreeMap<String, f64>) -> bool,
) -> (String, BTreeMap<String, f64>) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            !run.exited(),
            "the run ended before the scrape it waited for"
        );
        assert!(Instant::now() < deadline, "no such scrape within 30 s");
        if let Some((head, body)) = get(port, "/metrics").await {
            let parsed = parse(&body);
            if until(&parsed) {
                return (head, parsed);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_run_serves_its_openmetrics() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let job = RunJob::new(&scenario(6), &["--metrics-listen", &addr]);
    let mut run = job.start();
    let sent = |s: &BTreeMap<String, f64>| value(s, "msgstorm_messages_sent_total");
    let (head, first) = scrape_until(port, &mut run, |s| {
        s.keys()
            .any(|k| k.starts_with("msgstorm_messages_sent_total"))
            && sent(s) > 0.0
    })
    .await;
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    let (_, later) = scrape_until(port, &mut run, |s| sent(s) >= sent(&first) + 200.0).await;
    let ran = run.finish().await;
    ran.expect_code(0);
    assert!(
        ran.stderr
            .contains(&format!("metrics: http://{addr}/metrics")),
        "{ran}"
    );
    for name in [
        "msgstorm_users_online",
        "msgstorm_messages_accepted_total",
        "msgstorm_messages_received_total",
        "msgstorm_deliveries_total",
        "msgstorm_deliveries_overdue",
        "msgstorm_generator_cpu_seconds_total",
        "msgstorm_generator_resident_memory_bytes",
    ] {
        let key = later.keys().find(|k| k.starts_with(&format!("{name}{{")));
        let key = key.unwrap_or_else(|| panic!("{name} in the scrape: {later:#?}"));
        for label in ["driver=native", "scenario=live", "shard=0", "run="] {
            assert!(key.contains(label), "{key} has {label}");
        }
    }
    assert!(
        value(&later, "msgstorm_users_online") >= 40.0,
        "users online: {later:#?}"
    );
    assert!(value(&later, "msgstorm_generator_resident_memory_bytes") > 1e6);
    assert!(
        value(&later, "msgstorm_messages_received_total")
            > value(&first, "msgstorm_messages_received_total"),
        "counters rise between scrapes"
    );
    // The end-to-end histogram: cumulative buckets up to +Inf, which counts them all.
    let buckets: Vec<(&String, &f64)> = later
        .iter()
        .filter(|(k, _)| k.starts_with("msgstorm_e2e_latency_seconds_bucket{"))
        .collect();
    assert_eq!(buckets.len(), 17, "16 bounds and +Inf: {buckets:?}");
    let inf = buckets
        .iter()
        .find(|(k, _)| k.contains("le=+Inf"))
        .expect("+Inf")
        .1;
    assert!(
        *inf >= value(&later, "msgstorm_deliveries_total") * 0.5,
        "{later:#?}"
    );
    assert!(
        later
            .keys()
            .any(|k| k.starts_with("msgstorm_errors_total{") && k.contains("kind=")),
        "errors by kind"
    );
    let artifact = job.result();
    let total = artifact.metrics.count(msgstorm::metrics::Counter::Sent) as f64;
    assert!(
        sent(&later) <= total,
        "a scrape never counts more than the run"
    );
    // By traffic pattern: the direct one and the group one, whose sends add up to the
    // run's; a group message reaches several members.
    let of = |name: &str, pattern: &str| -> f64 {
        later
            .iter()
            .filter(|(k, _)| k.starts_with(&format!("{name}{{")) && k.contains(pattern))
            .map(|(_, v)| *v)
            .sum()
    };
    let sent_by = |p| of("msgstorm_pattern_messages_sent_total", p);
    let (direct, group) = ("pattern=traffic[0]", "pattern=traffic[1]");
    assert!(sent_by(direct) > 0.0 && sent_by(group) > 0.0, "{later:#?}");
    assert_eq!(sent_by(direct) + sent_by(group), sent(&later));
    assert!(of("msgstorm_pattern_messages_received_total", group) > sent_by(group) * 2.0);
    let group_buckets = later
        .keys()
        .filter(|k| {
            k.starts_with("msgstorm_pattern_e2e_latency_seconds_bucket{") && k.contains(group)
        })
        .count();
    assert_eq!(group_buckets, 17);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_scraper_does_not_hold_the_run_up() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let extra = ["--metrics-listen", &addr, "--set", "checks.max_lost=0"];
    let job = RunJob::new(&scenario(3), &extra);
    let mut run = job.start();
    // Until the engine has started, the endpoint answers with no series.
    let first = scrape_until(port, &mut run, |s| {
        s.keys()
            .any(|k| k.starts_with("msgstorm_messages_sent_total{"))
    })
    .await;
    // One connection sends half a request, another asks and never reads; 16 of each.
    let mut stalled = Vec::new();
    for _ in 0..16 {
        let mut half = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        half.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        let mut deaf = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        deaf.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        stalled.extend([half, deaf]);
    }
    // Another scraper is still answered while they stall.
    let again = scrape_until(port, &mut run, |s| {
        value(s, "msgstorm_messages_sent_total") > value(&first.1, "msgstorm_messages_sent_total")
    })
    .await;
    assert!(!again.1.is_empty());
    let ran = run.finish().await;
    ran.expect_code(0);
    assert!(ran.took < Duration::from_secs(30), "{ran}");
    drop(stalled);
}

#[tokio::test]
async fn a_metrics_address_in_use_or_unparsable_is_exit_2_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let ran = RunJob::new(&scenario(1), &["--metrics-listen", &addr])
        .run()
        .await;
    ran.expect_code(2);
    assert!(
        ran.stderr
            .contains(&format!("--metrics-listen {addr}: cannot listen")),
        "{ran}"
    );
    let ran = RunJob::new(&scenario(1), &["--metrics-listen", "localhost:nine"])
        .run()
        .await;
    ran.expect_code(2);
    assert!(ran.stderr.contains("--metrics-listen"), "{ran}");
    let work = Work::new();
    let bad = work.write(
        "bad.toml",
        &format!("{}\n[report]\nmetrics_listen = \"here\"\n", scenario(1)),
    );
    let ran = msgstorm(&["validate", bad.to_str().unwrap()]).await;
    ran.expect_code(2);
    assert!(
        ran.stderr.contains("bad.toml:") && ran.stderr.contains("report.metrics_listen"),
        "{ran}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shards_on_one_host_serve_one_endpoint_each_at_port_plus_index() {
    // Two free ports in a row: the second is the first + 1 only when it is free too.
    let port = loop {
        let p = free_port();
        if std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            break p;
        }
    };
    let addr = format!("127.0.0.1:{port}");
    let job = RunJob::new(&scenario(6), &["--shards", "2", "--metrics-listen", &addr]);
    let mut run = job.start();
    for (shard, port) in [(0, port), (1, port + 1)] {
        let (_, scrape) = scrape_until(port, &mut run, |s| {
            s.keys()
                .any(|k| k.starts_with("msgstorm_messages_sent_total{"))
                && value(s, "msgstorm_messages_sent_total") > 0.0
        })
        .await;
        let key = scrape
            .keys()
            .find(|k| k.starts_with("msgstorm_messages_sent_total{"))
            .expect("sent");
        assert!(
            key.contains(&format!("shard={shard}")),
            "{key} on port {port}"
        );
    }
    run.finish().await.expect_code(0);
}
