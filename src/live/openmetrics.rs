//! A run's totals as OpenMetrics text: counters `msgstorm_<noun>_<unit>_total`, latency
//! histograms in seconds, gauges for users online and deliveries overdue; every series
//! carries the run's labels (`run`, `shard`, `driver`, `scenario`). `docs/metrics.md` lists
//! them; `docs/grafana/msgstorm.json` charts them.
//!
//! Encoded by `prometheus-client`'s text encoder through a [`Collector`] over one
//! snapshot: the histograms are msgstorm's HDR histograms, bucketed at scrape time.

use std::borrow::Cow;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

use hdrhistogram::Histogram;

use crate::engine::patterns::PatternTotals;
use crate::engine::snapshot::Snapshot;
use crate::metrics::{Counter, ErrorKind, Hist};

/// The content type of the text this module writes.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the latency histograms' buckets, seconds (then `+Inf`).
const BUCKETS_S: [f64; 16] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The generator's own cost, read when the snapshot is encoded.
#[derive(Debug, Clone, Copy)]
pub struct Generator {
    /// CPU time this process used so far, seconds.
    pub cpu_s: f64,
    /// Its resident memory now, bytes.
    pub rss_bytes: u64,
}

/// `snapshot` as OpenMetrics text, every series labelled with `labels`.
pub fn encode(snapshot: Snapshot, generator: Generator, labels: &[(&str, String)]) -> String {
    let labels: Vec<(Cow<'static, str>, Cow<'static, str>)> = labels
        .iter()
        .map(|(k, v)| (Cow::Owned((*k).to_owned()), Cow::Owned(v.clone())))
        .collect();
    let mut registry = Registry::with_prefix_and_labels("msgstorm", labels.into_iter());
    registry.register_collector(Box::new(View {
        snapshot,
        generator,
    }));
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, &registry);
    text
}

/// One snapshot, encoded on a scrape.
#[derive(Debug)]
struct View {
    snapshot: Snapshot,
    generator: Generator,
}

impl Collector for View {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = &self.snapshot;
        let d = &s.deliveries;
        let gauges = [
            ("users_online", "Users logged in now", s.online),
            (
                "users_logging_in",
                "On-time users whose first login attempt has not finished",
                s.logging_in,
            ),
            (
                "deliveries_overdue",
                "Deliveries due for what the server accepted and not yet seen (in flight, late or lost)",
                s.overdue,
            ),
        ];
        for (name, help, v) in gauges {
            let g = ConstGauge::new(v as i64);
            g.encode(enc.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
        }
        for c in Counter::ALL {
            let (name, help) = counter_name(c);
            let v = ConstCounter::new(s.metrics.count(c));
            v.encode(enc.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        let tallies = [
            ("deliveries", "First intact copies received", d.delivered),
            (
                "deliveries_duplicated",
                "Extra copies received",
                d.duplicated,
            ),
            (
                "deliveries_reordered",
                "Deliveries out of order",
                d.reordered,
            ),
            (
                "deliveries_corrupted",
                "Deliveries whose checksum did not match",
                d.corrupted,
            ),
            (
                "deliveries_late",
                "Deliveries later than ledger.late_after",
                d.late,
            ),
            (
                "deliveries_unexpected",
                "Deliveries to a recipient not registered for their stream",
                d.unexpected,
            ),
        ];
        for (name, help, v) in tallies {
            let v = ConstCounter::new(v);
            v.encode(enc.encode_descriptor(name, help, None, MetricType::Counter)?)?;
        }
        self.errors(&mut enc)?;
        self.histograms(&mut enc)?;
        self.patterns(&mut enc)?;
        self.own(&mut enc)
    }
}

impl View {
    /// `msgstorm_errors_total{kind}`, one series per kind (zeros included, so a query
    /// finds every kind from the first scrape).
    fn errors(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = enc.encode_descriptor(
            "errors",
            "Errors by kind (docs/result.md lists the kinds)",
            None,
            MetricType::Counter,
        )?;
        let counts: Vec<(ErrorKind, u64)> = ErrorKind::ALL
            .iter()
            .map(|k| {
                let n = self
                    .snapshot
                    .metrics
                    .errors()
                    .find(|e| e.0 == *k)
                    .map_or(0, |e| e.1);
                (*k, n)
            })
            .collect();
        for (kind, n) in counts {
            let labels = [("kind", kind.name())];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// The latency histograms, seconds.
    fn histograms(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for h in Hist::ALL {
            let e = h.entry();
            let (sum, count, buckets) = bucketed(self.snapshot.metrics.hist(h));
            enc.encode_descriptor(
                e.openmetrics,
                e.help,
                Some(&Unit::Seconds),
                MetricType::Histogram,
            )?
            .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }

    /// Each message pattern's sends, receipts and end-to-end latency, labelled `pattern`
    /// (summed over `pattern` they are the run's own messages: sent equals
    /// `msgstorm_messages_sent_total`).
    fn patterns(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let patterns = &self.snapshot.patterns;
        if patterns.is_empty() {
            return Ok(());
        }
        for (name, help, of) in [
            (
                "pattern_messages_sent",
                "Messages sent, by traffic pattern",
                (|p| p.sent) as fn(&PatternTotals) -> u64,
            ),
            (
                "pattern_messages_received",
                "Copies of the pattern's messages received intact, by traffic pattern",
                |p| p.received,
            ),
        ] {
            let mut family = enc.encode_descriptor(name, help, None, MetricType::Counter)?;
            for (pattern, totals) in patterns {
                let labels = [("pattern", pattern.as_str())];
                ConstCounter::new(of(totals)).encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = enc.encode_descriptor(
            "pattern_e2e_latency",
            "From a send's due time to its live receipt, by traffic pattern (two digits)",
            Some(&Unit::Seconds),
            MetricType::Histogram,
        )?;
        for (pattern, totals) in patterns {
            let labels = [("pattern", pattern.as_str())];
            let (sum, count, buckets) = bucketed(&totals.e2e);
            family
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }

    /// The generator's own CPU and memory.
    fn own(&self, enc: &mut DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let g = &self.generator;
        ConstCounter::new(g.cpu_s).encode(enc.encode_descriptor(
            "generator_cpu",
            "CPU time the generator process used",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?)?;
        ConstGauge::new(g.rss_bytes as i64).encode(enc.encode_descriptor(
            "generator_resident_memory",
            "The generator process's resident memory",
            Some(&Unit::Bytes),
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(self.snapshot.elapsed.as_secs_f64()).encode(enc.encode_descriptor(
            "run_elapsed",
            "Time since the run started",
            Some(&Unit::Seconds),
            MetricType::Gauge,
        )?)?;
        let labels = [("phase", self.snapshot.phase)];
        enc.encode_descriptor(
            "run_phase",
            "1 for the phase the run is in: login, traffic, drain, closing, abort, done",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&labels)?
        .encode_gauge(&1i64)
    }
}

/// An HDR histogram of µs in the exposition's buckets of seconds: (sum, count, buckets
/// with their upper bounds, `+Inf` last).
fn bucketed(hist: &Histogram<u64>) -> (f64, u64, Vec<(f64, u64)>) {
    let mut buckets: Vec<(f64, u64)> = BUCKETS_S
        .iter()
        .map(|&b| (b, 0))
        .chain([(f64::MAX, 0)])
        .collect();
    for v in hist.iter_recorded() {
        let s = v.value_iterated_to() as f64 / 1e6;
        let i = BUCKETS_S.partition_point(|&b| b < s);
        buckets[i].1 += v.count_at_value();
    }
    let sum = hist.mean() * hist.len() as f64 / 1e6;
    (sum, hist.len(), buckets)
}

/// The metric name (before `_total`) and help of a counter.
fn counter_name(c: Counter) -> (&'static str, &'static str) {
    match c {
        Counter::ConnectAttempts => ("connect_attempts", "Connection attempts"),
        Counter::Connected => ("connections", "Connections established"),
        Counter::LoginOk => ("logins", "Successful logins"),
        Counter::Disconnects => ("disconnects", "Connections lost or closed after login"),
        Counter::Sent => ("messages_sent", "Messages sent"),
        Counter::Accepted => ("messages_accepted", "Sends the server accepted"),
        Counter::Refused => ("messages_refused", "Sends the server refused"),
        Counter::SendErrors => ("send_errors", "Sends that could not be written"),
        Counter::Unconfirmed => (
            "messages_unconfirmed",
            "Sends whose acceptance had not come when the connection ended",
        ),
        Counter::Received => ("messages_received", "Messages received (every copy)"),
        Counter::Dropped => (
            "messages_dropped",
            "Sends due while their sender was offline",
        ),
        Counter::Requests => ("requests", "Requests sent by the request pattern"),
        Counter::Replies => ("replies", "Replies to requests"),
        Counter::Heartbeats => ("heartbeats", "Heartbeats sent"),
        Counter::BytesOut => ("network_sent_bytes", "Bytes written to the network"),
        Counter::BytesIn => ("network_received_bytes", "Bytes read from the network"),
        Counter::Syncs => ("syncs", "Sync (catch-up) requests made"),
        Counter::AccountsCreated => ("accounts_created", "Accounts created before logging in"),
        Counter::AccountsExisting => ("accounts_existing", "Accounts asked for that existed"),
        Counter::ResumesWithoutOffset => (
            "resumes_without_offset",
            "Reconnects with nothing to resume the session from",
        ),
        Counter::Due => ("messages_due", "Message sends the schedule made due"),
        Counter::OnlineUserMs => (
            "online_user_milliseconds",
            "Users online during the traffic, integrated over time",
        ),
        Counter::PlannedUserMs => (
            "planned_online_user_milliseconds",
            "Users the plan puts online during the traffic, integrated over time",
        ),
        Counter::SignalsSent => (
            "signals_sent",
            "Read receipts, typing notices and presence changes sent",
        ),
        Counter::SignalsReceived => ("signals_received", "Signals received (every copy)"),
        Counter::WsConnections => ("ws_connections", "WebSocket connections opened"),
        Counter::WsBytesOut => ("ws_sent_bytes", "Bytes written on WebSocket connections"),
        Counter::WsBytesIn => ("ws_received_bytes", "Bytes read on WebSocket connections"),
        Counter::TcpConnections => ("tcp_connections", "Framed TCP connections opened"),
        Counter::TcpBytesOut => ("tcp_sent_bytes", "Bytes written on framed TCP connections"),
        Counter::TcpBytesIn => ("tcp_received_bytes", "Bytes read on framed TCP connections"),
        Counter::Http1Connections => ("http1_connections", "HTTP/1.1 connections opened"),
        Counter::Http1BytesOut => ("http1_sent_bytes", "Bytes written on HTTP/1.1 connections"),
        Counter::Http1BytesIn => ("http1_received_bytes", "Bytes read on HTTP/1.1 connections"),
        Counter::Http2Connections => ("http2_connections", "HTTP/2 connections opened"),
        Counter::Http2BytesOut => ("http2_sent_bytes", "Bytes written on HTTP/2 connections"),
        Counter::Http2BytesIn => ("http2_received_bytes", "Bytes read on HTTP/2 connections"),
    }
}
