//! Scraping: an HTTP/1.1 GET of each endpoint once a second (hyper's client, already in
//! the tree for the reference server), the text format parsed by `prometheus-parse`, the
//! selected series kept per second of the run. An endpoint that is down, slow, answers
//! with an error status or with something that is not the text format is noted, never
//! fatal: the run goes on and the report says so.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use http_body_util::Empty;
use hyper::body::Bytes;

use super::{ScrapedSeries, SeriesFilter};

/// How long one scrape may take: under the one-second period.
const SCRAPE_TIMEOUT: Duration = Duration::from_millis(900);
/// The largest response read, bytes.
const MAX_BODY: usize = 8 << 20;
/// The most series kept of one endpoint; more are left out with a note (select them
/// with `[monitor] series`).
pub const MAX_SERIES: usize = 100;

/// One endpoint and what it gave so far.
#[derive(Debug)]
struct Endpoint {
    url: String,
    uri: http::Uri,
    series: BTreeMap<(String, BTreeMap<String, String>), ScrapedSeries>,
    scrapes: u64,
    failures: u64,
    first_failure: Option<String>,
    left_out: bool,
}

/// Scrapes a set of endpoints during a run.
#[derive(Debug)]
pub struct Scraper {
    t0: Instant,
    endpoints: Vec<Endpoint>,
    filters: Vec<SeriesFilter>,
}

impl Scraper {
    /// Scrapes `urls` (validated `http://` URLs) for a run that started at `t0`, keeping the
    /// series that pass any of `filters` (all when there are none).
    pub fn new(t0: Instant, urls: &[String], filters: Vec<SeriesFilter>) -> Scraper {
        let endpoints = urls
            .iter()
            .filter_map(|u| {
                Some(Endpoint {
                    url: u.clone(),
                    uri: u.parse().ok()?,
                    series: BTreeMap::new(),
                    scrapes: 0,
                    failures: 0,
                    first_failure: None,
                    left_out: false,
                })
            })
            .collect();
        Scraper {
            t0,
            endpoints,
            filters,
        }
    }

    /// Scrapes every endpoint once, concurrently.
    pub async fn scrape(&mut self) {
        let sec = self.t0.elapsed().as_secs() as u32;
        let bodies =
            futures_util::future::join_all(self.endpoints.iter().map(|e| get(&e.uri))).await;
        for (e, body) in self.endpoints.iter_mut().zip(bodies) {
            e.scrapes += 1;
            let kept = body.and_then(|text| e.record(sec, &text, &self.filters));
            if let Err(why) = kept {
                e.failures += 1;
                e.first_failure.get_or_insert(why);
            }
        }
    }

    /// Scrapes every `every` until `stop` resolves; returns the series and the notes on
    /// endpoints that failed.
    pub async fn run(
        mut self,
        every: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) -> (Vec<ScrapedSeries>, Vec<String>) {
        tokio::pin!(stop);
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => self.scrape().await,
                () = &mut stop => break,
            }
        }
        self.finish()
    }

    /// The series so far, and a note per endpoint that failed or was cut.
    pub fn finish(self) -> (Vec<ScrapedSeries>, Vec<String>) {
        let mut series = Vec::new();
        let mut notes = Vec::new();
        for e in self.endpoints {
            if let Some(why) = &e.first_failure {
                notes.push(format!(
                    "monitor: scraping {} failed {} of {} times (first: {why}); its series \
                     have gaps there",
                    e.url, e.failures, e.scrapes
                ));
            }
            if e.left_out {
                notes.push(format!(
                    "monitor: {} has more than {MAX_SERIES} series; the first {MAX_SERIES} \
                     were kept (choose with `[monitor] series`)",
                    e.url
                ));
            }
            series.extend(e.series.into_values());
        }
        (series, notes)
    }
}

impl Endpoint {
    /// Records the samples of one scrape at `sec`; an error when the text holds none.
    fn record(&mut self, sec: u32, text: &str, filters: &[SeriesFilter]) -> Result<(), String> {
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
            .map_err(|e| format!("cannot read the body: {e}"))?;
        if scrape.samples.is_empty() {
            return Err("no samples in the Prometheus text format".to_owned());
        }
        for s in scrape.samples {
            let (value, counter) = match s.value {
                prometheus_parse::Value::Counter(v) => (v, true),
                prometheus_parse::Value::Gauge(v) => (v, false),
                // OpenMetrics counters (`_total`) and histogram sums and counts are running
                // totals even when the TYPE line names them differently.
                prometheus_parse::Value::Untyped(v) => (
                    v,
                    ["_total", "_count", "_sum"]
                        .iter()
                        .any(|end| s.metric.ends_with(end)),
                ),
                prometheus_parse::Value::Histogram(_) | prometheus_parse::Value::Summary(_) => {
                    continue
                }
            };
            if !value.is_finite() {
                continue;
            }
            let labels: BTreeMap<String, String> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            if !filters.is_empty() && !filters.iter().any(|f| f.matches(&s.metric, &labels)) {
                continue;
            }
            let key = (s.metric, labels);
            if !self.series.contains_key(&key) {
                if self.series.len() >= MAX_SERIES {
                    self.left_out = true;
                    continue;
                }
                self.series.insert(
                    key.clone(),
                    ScrapedSeries {
                        endpoint: self.url.clone(),
                        name: key.0.clone(),
                        labels: key.1.clone(),
                        counter,
                        points: Vec::new(),
                    },
                );
            }
            if let Some(series) = self.series.get_mut(&key) {
                // One point per second: a second scrape in the same second replaces it.
                if series.points.last().is_some_and(|p| p.0 == sec) {
                    series.points.pop();
                }
                series.points.push((sec, value));
            }
        }
        Ok(())
    }
}

/// The body of a GET of `uri`, or why there is none.
async fn get(uri: &http::Uri) -> Result<String, String> {
    let request = http::Request::get("/").header(
        http::header::ACCEPT,
        "text/plain;version=0.0.4, application/openmetrics-text;q=0.5",
    );
    let fetch = crate::http1::send(uri, request, Empty::<Bytes>::new(), MAX_BODY);
    let (status, body) = tokio::time::timeout(SCRAPE_TIMEOUT, fetch)
        .await
        .map_err(|_| format!("no answer within {} ms", SCRAPE_TIMEOUT.as_millis()))??;
    if !status.is_success() {
        return Err(format!("HTTP status {status}"));
    }
    String::from_utf8(body.to_vec()).map_err(|_| "the body is not UTF-8 text".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> Endpoint {
        Endpoint {
            url: "http://127.0.0.1:1/metrics".to_owned(),
            uri: http::Uri::from_static("http://127.0.0.1:1/metrics"),
            series: BTreeMap::new(),
            scrapes: 0,
            failures: 0,
            first_failure: None,
            left_out: false,
        }
    }

    #[test]
    fn samples_are_kept_by_filter_and_typed() {
        let text = "# TYPE a_online gauge\na_online 5\n# TYPE a_msgs counter\na_msgs_total 7\n\
                    # TYPE lat histogram\nlat_bucket{le=\"1\"} 3\nlat_count 3\nb_other 1\n";
        let mut e = endpoint();
        let filters = vec![SeriesFilter::parse("a_*").expect("parses")];
        e.record(3, text, &filters).expect("samples");
        e.record(4, &text.replace(" 7", " 9"), &filters)
            .expect("samples");
        let series: Vec<&ScrapedSeries> = e.series.values().collect();
        assert_eq!(series.len(), 2, "{series:?}");
        let msgs = series
            .iter()
            .find(|s| s.name == "a_msgs_total")
            .expect("counter");
        assert!(msgs.counter);
        assert_eq!(msgs.points, vec![(3, 7.0), (4, 9.0)]);
        let online = series.iter().find(|s| s.name == "a_online").expect("gauge");
        assert!(!online.counter);
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let mut e = endpoint();
        let err = e
            .record(0, "<html><body>not metrics</body></html>", &[])
            .expect_err("no samples");
        assert!(err.contains("no samples"), "{err}");
    }

    #[tokio::test]
    async fn a_down_endpoint_is_noted() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr").port()
        };
        let url = format!("http://127.0.0.1:{port}/metrics");
        let mut s = Scraper::new(Instant::now(), std::slice::from_ref(&url), Vec::new());
        s.scrape().await;
        let (series, notes) = s.finish();
        assert!(series.is_empty());
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(
            notes[0].contains(&url) && notes[0].contains("failed 1 of 1"),
            "{notes:?}"
        );
    }
}
