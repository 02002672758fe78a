//! The per-second series of a run, as the report shows it over time.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::metrics::{Counter, ErrorKind, Metrics, Percentiles};

/// One second of the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondPoint {
    /// Seconds since the run started.
    pub sec: u32,
    /// Users online.
    pub online: u64,
    /// Successful logins.
    pub logins: u64,
    /// Messages sent.
    pub sent: u64,
    /// Sends accepted.
    pub accepted: u64,
    /// Messages received.
    pub received: u64,
    /// Request replies.
    pub replies: u64,
    /// Signals sent: read receipts, typing notices, presence changes (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub signals_sent: u64,
    /// Signals received, every copy (absent when none): a login wave's presence storm.
    #[serde(skip_serializing_if = "is_zero")]
    pub signals_received: u64,
    /// Errors of any kind.
    pub errors: u64,
    /// Errors by kind (only kinds that occurred; empty for seconds of result files written
    /// before kinds were counted per second).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub error_kinds: BTreeMap<ErrorKind, u64>,
    /// End-to-end latency, µs.
    pub e2e: Spread,
    /// Send → acceptance latency, µs.
    pub ack: Spread,
    /// Request round trip, µs.
    pub request: Spread,
}

/// Latency of one second, µs (two significant digits; all 0 when nothing was recorded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Spread {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Highest value.
    pub max: u64,
}

impl From<Percentiles> for Spread {
    fn from(p: Percentiles) -> Self {
        Spread {
            count: p.count,
            p50: p.p50,
            p99: p.p99,
            max: p.max,
        }
    }
}

/// The series of `m`, in time order (seconds without any event are absent).
pub fn of(m: &Metrics) -> Vec<SecondPoint> {
    m.seconds()
        .map(|s| SecondPoint {
            sec: s.sec,
            online: s.online,
            logins: s.count(Counter::LoginOk),
            sent: s.count(Counter::Sent),
            accepted: s.count(Counter::Accepted),
            received: s.count(Counter::Received),
            replies: s.count(Counter::Replies),
            signals_sent: s.count(Counter::SignalsSent),
            signals_received: s.count(Counter::SignalsReceived),
            errors: s.errors,
            error_kinds: ErrorKind::ALL
                .iter()
                .map(|&k| (k, s.error_kinds[k as usize]))
                .filter(|(_, n)| *n > 0)
                .collect(),
            e2e: s.e2e.into(),
            ack: s.ack.into(),
            request: s.request.into(),
        })
        .collect()
}

/// Whether a count is zero (left out of the JSON series).
fn is_zero(n: &u64) -> bool {
    *n == 0
}
