//! The server's Prometheus metrics, rendered as text at `/metrics`.
//! Names follow `serve_<noun>[_<unit>]`; `docs/protocol.md` lists them.

use std::sync::atomic::{AtomicI64, Ordering};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::wire::ErrorCode;

type Labels = [(&'static str, &'static str); 1];

/// All series of one server; cheap atomic updates from any thread.
pub struct Metrics {
    registry: Registry,
    /// Open WebSocket connections (logged in or not).
    pub connections: Gauge,
    /// Logged-in connections.
    pub online: Gauge,
    logins: Family<Labels, Counter>,
    /// Messages durably committed.
    pub accepted: Counter,
    messages_pushed: Counter,
    signals_pushed: Family<Labels, Counter>,
    /// Read receipts durably stored.
    pub receipts_stored: Counter,
    /// Stored receipts returned by `receipts` pages.
    pub receipts_synced: Counter,
    /// Contact pairs newly stored.
    pub contacts: Counter,
    /// Messages returned by sync pages.
    pub synced: Counter,
    /// Commands per commit transaction.
    pub batch_size: Histogram,
    /// Seconds per commit transaction.
    pub commit_latency: Histogram,
    /// Frames waiting in all outbound queues.
    pub queue_depth: Gauge,
    /// The deepest any single outbound queue has been.
    pub queue_depth_max: Gauge,
    /// Connections closed because their outbound queue overflowed.
    pub slow_consumers: Counter,
    /// Accepted connections not yet logged in.
    pub unauthenticated: Gauge,
    /// Connections closed to make room under `--max-unauthenticated`.
    pub unauthenticated_evicted: Counter,
    faults: Family<Labels, Counter>,
    signal_faults: Family<[(&'static str, &'static str); 2], Counter>,
    errors: Family<Labels, Counter>,
    /// `kv_get` requests answered.
    pub kv_served: Counter,
    /// `kv_get` requests waiting for a worker.
    pub kv_waiting: Gauge,
}

impl Metrics {
    /// Creates and registers every series.
    pub fn new() -> Self {
        let mut m = Metrics {
            registry: Registry::default(),
            connections: Gauge::default(),
            online: Gauge::default(),
            logins: Family::default(),
            accepted: Counter::default(),
            messages_pushed: Counter::default(),
            signals_pushed: Family::default(),
            receipts_stored: Counter::default(),
            receipts_synced: Counter::default(),
            contacts: Counter::default(),
            synced: Counter::default(),
            batch_size: Histogram::new(exponential_buckets(1.0, 2.0, 14)),
            commit_latency: Histogram::new(exponential_buckets(0.000_05, 2.0, 16)),
            queue_depth: Gauge::default(),
            queue_depth_max: Gauge::default(),
            slow_consumers: Counter::default(),
            unauthenticated: Gauge::default(),
            unauthenticated_evicted: Counter::default(),
            faults: Family::default(),
            signal_faults: Family::default(),
            errors: Family::default(),
            kv_served: Counter::default(),
            kv_waiting: Gauge::default(),
        };
        let r = &mut m.registry;
        r.register(
            "serve_connections",
            "Open WebSocket connections",
            m.connections.clone(),
        );
        r.register(
            "serve_online_users",
            "Logged-in connections",
            m.online.clone(),
        );
        r.register("serve_logins", "Login attempts by result", m.logins.clone());
        r.register(
            "serve_messages_accepted",
            "Messages durably committed",
            m.accepted.clone(),
        );
        r.register(
            "serve_messages_pushed",
            "Message pushes queued to online members",
            m.messages_pushed.clone(),
        );
        r.register(
            "serve_signals_pushed",
            "Signal pushes (receipt, presence, typing) queued to online users",
            m.signals_pushed.clone(),
        );
        r.register(
            "serve_receipts_stored",
            "Read receipts durably stored",
            m.receipts_stored.clone(),
        );
        r.register(
            "serve_receipts_synced",
            "Stored receipts returned by receipts pages",
            m.receipts_synced.clone(),
        );
        r.register(
            "serve_contacts",
            "Contact pairs newly stored",
            m.contacts.clone(),
        );
        r.register(
            "serve_messages_synced",
            "Messages returned by sync",
            m.synced.clone(),
        );
        r.register(
            "serve_commit_batch_size",
            "Commands per commit transaction",
            m.batch_size.clone(),
        );
        r.register(
            "serve_commit_latency_seconds",
            "Duration of one commit transaction",
            m.commit_latency.clone(),
        );
        r.register(
            "serve_outbound_queue_depth",
            "Frames waiting in all outbound queues",
            m.queue_depth.clone(),
        );
        r.register(
            "serve_outbound_queue_depth_max",
            "Deepest any single outbound queue has been",
            m.queue_depth_max.clone(),
        );
        r.register(
            "serve_slow_consumer_disconnects",
            "Connections closed because their outbound queue overflowed",
            m.slow_consumers.clone(),
        );
        r.register(
            "serve_unauthenticated_connections",
            "Accepted connections not yet logged in",
            m.unauthenticated.clone(),
        );
        r.register(
            "serve_unauthenticated_evicted",
            "Connections closed to make room under --max-unauthenticated",
            m.unauthenticated_evicted.clone(),
        );
        r.register(
            "serve_faults_injected",
            "Faults injected into message pushes by kind",
            m.faults.clone(),
        );
        r.register(
            "serve_signal_faults_injected",
            "Faults injected into signal pushes by signal and kind",
            m.signal_faults.clone(),
        );
        r.register(
            "serve_errors",
            "Error frames sent by code",
            m.errors.clone(),
        );
        r.register(
            "serve_kv_requests_served",
            "kv_get requests answered",
            m.kv_served.clone(),
        );
        r.register(
            "serve_kv_requests_waiting",
            "kv_get requests waiting for a worker",
            m.kv_waiting.clone(),
        );
        m
    }

    /// Counts a login attempt.
    pub fn login(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.logins.get_or_create(&[("result", result)]).inc();
    }

    /// Counts an error frame sent.
    pub fn error(&self, code: ErrorCode) {
        self.errors.get_or_create(&[("code", code.as_str())]).inc();
    }

    /// Counts a push queued: of `signal`, or of a message (`None`).
    pub fn pushed(&self, signal: Option<&'static str>) {
        match signal {
            None => self.messages_pushed.inc(),
            Some(kind) => self.signals_pushed.get_or_create(&[("kind", kind)]).inc(),
        };
    }

    /// Counts an injected fault into a push of `signal` (`None`: a message, or storage).
    pub fn fault(&self, kind: &'static str, signal: Option<&'static str>) {
        match signal {
            None => self.faults.get_or_create(&[("kind", kind)]).inc(),
            Some(signal) => self
                .signal_faults
                .get_or_create(&[("signal", signal), ("kind", kind)])
                .inc(),
        };
    }

    /// Raises the high-water mark of a single queue's depth to `depth` if it is higher.
    pub fn observe_queue_depth(&self, depth: usize) {
        let d = i64::try_from(depth).unwrap_or(i64::MAX);
        let inner: &AtomicI64 = self.queue_depth_max.inner();
        inner.fetch_max(d, Ordering::Relaxed);
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let mut s = String::with_capacity(4096);
        // Writing into a String cannot fail.
        encode(&mut s, &self.registry).expect("formatting into a String cannot fail");
        s
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_key_series() {
        let m = Metrics::new();
        m.login(true);
        m.error(ErrorCode::SlowConsumer);
        m.fault("drop", None);
        m.fault("drop", Some("receipt"));
        m.pushed(Some("typing"));
        m.observe_queue_depth(7);
        m.observe_queue_depth(3);
        let text = m.render();
        assert!(text.contains("serve_logins_total{result=\"ok\"} 1"));
        assert!(text.contains("serve_errors_total{code=\"slow_consumer\"} 1"));
        assert!(text.contains("serve_faults_injected_total{kind=\"drop\"} 1"));
        assert!(
            text.contains("serve_signal_faults_injected_total{signal=\"receipt\",kind=\"drop\"} 1")
        );
        assert!(text.contains("serve_signals_pushed_total{kind=\"typing\"} 1"));
        assert!(text.contains("serve_outbound_queue_depth_max 7"));
        assert!(text.contains("serve_commit_latency_seconds_bucket"));
    }
}
