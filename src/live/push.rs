//! Pushing the run's metrics where nobody can scrape them (short-lived pods, a laptop
//! behind NAT): Prometheus remote-write 1.0 — a snappy-compressed protobuf `WriteRequest`
//! POSTed every few seconds, and once more with the final totals when the run ends, so a
//! run shorter than a scrape interval still lands.
//!
//! Remote-write rather than OTLP: Prometheus, Mimir, Thanos, Cortex, VictoriaMetrics and
//! Grafana Cloud all take it, and it is four protobuf messages (derived here with prost)
//! and one POST with the hyper client msgstorm already has; the OpenTelemetry crates would
//! add an SDK and a second HTTP/gRPC stack for the same numbers. The series are exactly the
//! endpoint's: the OpenMetrics text of [`super::openmetrics`], parsed back with
//! `prometheus-parse` and flattened (one source of names, labels and buckets).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http_body_util::Full;
use hyper::body::Bytes;
use prost::Message;
use tokio::sync::watch;

use super::openmetrics::{self, Generator};
use crate::engine::snapshot::{LiveTap, Snapshot};

/// How often the totals are pushed while the run lasts.
pub const PUSH_EVERY: Duration = Duration::from_secs(5);
/// The longest one push may take.
const PUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// The most of a receiver's error answer kept for the note.
const MAX_ANSWER: usize = 4096;

/// `prometheus.WriteRequest` (remote-write 1.0).
#[derive(Clone, PartialEq, Message)]
struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    timeseries: Vec<TimeSeries>,
}

/// `prometheus.TimeSeries`: labels sorted by name, `__name__` among them.
#[derive(Clone, PartialEq, Message)]
struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    samples: Vec<Sample>,
}

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Message)]
struct Label {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    value: String,
}

/// `prometheus.Sample`: a value at a time, ms since the Unix epoch.
#[derive(Clone, PartialEq, Message)]
struct Sample {
    #[prost(double, tag = "1")]
    value: f64,
    #[prost(int64, tag = "2")]
    timestamp: i64,
}

/// The pushing task of a run.
#[derive(Debug)]
pub struct Pusher {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Tally>,
}

/// Pushes made and failed, with the last failure.
#[derive(Debug, Default)]
struct Tally {
    pushes: u64,
    failed: u64,
    last_error: Option<String>,
}

/// Where to push and what every series carries.
#[derive(Debug, Clone)]
struct Target {
    uri: http::Uri,
    labels: Vec<(&'static str, String)>,
}

impl Pusher {
    /// Starts pushing `tap`'s totals to `uri` every [`PUSH_EVERY`].
    pub fn start(
        uri: http::Uri,
        tap: std::sync::Arc<LiveTap>,
        labels: Vec<(&'static str, String)>,
    ) -> Pusher {
        let (stop, mut stopped) = watch::channel(false);
        let target = Target { uri, labels };
        let task = tokio::spawn(async move {
            let mut tally = Tally::default();
            let mut tick = tokio::time::interval(PUSH_EVERY);
            tick.tick().await;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = stopped.changed() => break,
                }
                if let Some(s) = tap.snapshot() {
                    tally.add(push(&target, s).await);
                }
            }
            // The final totals: the engine has closed the tap by now.
            if let Some(s) = tap.snapshot() {
                tally.add(push(&target, s).await);
            }
            tally
        });
        Pusher { stop, task }
    }

    /// Pushes the final totals and stops; a note when pushes failed.
    pub async fn finish(self) -> Option<String> {
        let _ = self.stop.send(true);
        let t = self.task.await.ok()?;
        t.last_error.map(|e| {
            format!(
                "metrics push: {} of {} pushes failed, the last: {e}",
                t.failed, t.pushes
            )
        })
    }
}

impl Tally {
    fn add(&mut self, r: Result<(), String>) {
        self.pushes += 1;
        if let Err(e) = r {
            self.failed += 1;
            self.last_error = Some(e);
        }
    }
}

/// Pushes one snapshot; why not, when it failed.
async fn push(target: &Target, snapshot: Snapshot) -> Result<(), String> {
    let generator = Generator {
        cpu_s: crate::sys::cpu_time().as_secs_f64(),
        rss_bytes: crate::sys::rss_bytes(),
    };
    let text = openmetrics::encode(snapshot, generator, &target.labels);
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let body = WriteRequest {
        timeseries: series(&text, now_ms),
    }
    .encode_to_vec();
    let compressed = snap::raw::Encoder::new()
        .compress_vec(&body)
        .map_err(|e| format!("compressing: {e}"))?;
    tokio::time::timeout(PUSH_TIMEOUT, post(&target.uri, compressed))
        .await
        .map_err(|_| format!("no answer within {} s", PUSH_TIMEOUT.as_secs()))?
}

/// The series of OpenMetrics `text`, each with one sample at `now_ms`.
fn series(text: &str, now_ms: i64) -> Vec<TimeSeries> {
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let Ok(scrape) = prometheus_parse::Scrape::parse(lines) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in scrape.samples {
        let base: Vec<(String, String)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut one = |name: String, extra: Option<(String, String)>, value: f64| {
            let mut labels: Vec<Label> = base
                .iter()
                .cloned()
                .chain(extra)
                .chain([("__name__".to_owned(), name)])
                .map(|(name, value)| Label { name, value })
                .collect();
            labels.sort_by(|a, b| a.name.cmp(&b.name));
            out.push(TimeSeries {
                labels,
                samples: vec![Sample {
                    value,
                    timestamp: now_ms,
                }],
            });
        };
        match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => one(s.metric.clone(), None, v),
            prometheus_parse::Value::Histogram(buckets) => {
                for b in buckets {
                    let le = if b.less_than.is_infinite() {
                        "+Inf".to_owned()
                    } else {
                        b.less_than.to_string()
                    };
                    one(
                        format!("{}_bucket", s.metric),
                        Some(("le".to_owned(), le)),
                        b.count,
                    );
                }
            }
            prometheus_parse::Value::Summary(_) => {}
        }
    }
    out
}

/// POSTs one compressed `WriteRequest` to `uri`.
async fn post(uri: &http::Uri, body: Vec<u8>) -> Result<(), String> {
    let request = http::Request::post("/")
        .header(http::header::CONTENT_TYPE, "application/x-protobuf")
        .header(http::header::CONTENT_ENCODING, "snappy")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0");
    let (status, answer) =
        crate::http1::send(uri, request, Full::new(Bytes::from(body)), MAX_ANSWER).await?;
    if status.is_success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&answer).trim().to_owned();
    Err(format!("HTTP status {status}: {text}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_carry_their_name_and_sorted_labels_and_histograms_their_buckets() {
        let text = "# TYPE msgstorm_sent counter\nmsgstorm_sent_total{run=\"ab\",shard=\"0\"} 7\n\
                    # TYPE msgstorm_lat_seconds histogram\n\
                    msgstorm_lat_seconds_sum{run=\"ab\"} 0.5\n\
                    msgstorm_lat_seconds_count{run=\"ab\"} 3\n\
                    msgstorm_lat_seconds_bucket{run=\"ab\",le=\"0.1\"} 2\n\
                    msgstorm_lat_seconds_bucket{run=\"ab\",le=\"+Inf\"} 3\n# EOF\n";
        let series = series(text, 1_000);
        let find = |name: &str, le: Option<&str>| {
            series
                .iter()
                .find(|s| {
                    s.labels
                        .iter()
                        .any(|l| l.name == "__name__" && l.value == name)
                        && le.is_none_or(|le| {
                            s.labels.iter().any(|l| l.name == "le" && l.value == le)
                        })
                })
                .unwrap_or_else(|| panic!("{name} {le:?} in {series:?}"))
        };
        let sent = find("msgstorm_sent_total", None);
        let names: Vec<&str> = sent.labels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["__name__", "run", "shard"]);
        assert_eq!(
            sent.samples,
            [Sample {
                value: 7.0,
                timestamp: 1_000
            }]
        );
        assert_eq!(
            find("msgstorm_lat_seconds_bucket", Some("+Inf")).samples[0].value,
            3.0
        );
        assert_eq!(
            find("msgstorm_lat_seconds_bucket", Some("0.1")).samples[0].value,
            2.0
        );
        assert_eq!(
            find("msgstorm_lat_seconds_count", None).samples[0].value,
            3.0
        );
    }
}
