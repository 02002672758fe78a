//! Measurements of a run: HDR histograms of latencies, counters, a per-second series and
//! the taxonomy of per-message failures.
//!
//! The engine keeps one [`Metrics`] per recorder slot and merges them at the end of the
//! run. Each second, the seconds of the series that are over move out of every slot into
//! one series merged across slots ([`Metrics::move_series_before`]), their latency sketches
//! packed, so a slot holds only the last second or two and memory grows with the run by
//! the merged series alone (about 2 KB a second at ~3,400 latencies a second), not by the
//! events recorded.
//! Every part merges exactly, in any order: a merge of shards' metrics equals the metrics
//! of one process fed every event. All durations are microseconds.
//!
//! In a result file the totals are HDR histograms (V2, deflate, base64: lossless), counters
//! are a map by name, and the series is a list of seconds, each carrying its non-zero
//! counters and a compact latency histogram for p50/p99 over time.

use std::collections::BTreeMap;

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer as _, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

mod hist_bytes;
mod sketch;
pub mod split;
pub mod wires;

use sketch::Sketch;
use split::Split;

/// The largest latency a histogram holds: one hour. Larger values are recorded as this.
pub const MAX_US: u64 = 3_600_000_000;

/// Significant digits of the total histograms.
const SIGFIG: u8 = 3;

/// Examples kept per error kind.
pub const ERROR_EXAMPLES: usize = 5;

pub use crate::vocab::Hist;

/// A histogram's slot in the per-second latency series, if it has one.
fn series_slot(h: Hist) -> Option<usize> {
    match h {
        Hist::EndToEnd => Some(0),
        Hist::SendAck => Some(1),
        Hist::Request => Some(2),
        _ => None,
    }
}

/// An event counter.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// Connection attempts.
    ConnectAttempts,
    /// Connections established.
    Connected,
    /// Successful logins.
    LoginOk,
    /// Connections lost or closed after login.
    Disconnects,
    /// Messages sent.
    Sent,
    /// Sends the server accepted.
    Accepted,
    /// Sends the server refused.
    Refused,
    /// Sends that could not be written (a broken connection); not counted in `sent`.
    SendErrors,
    /// Sends written (counted in `sent`) whose acceptance had not come when their user's
    /// connection ended: never confirmed.
    Unconfirmed,
    /// Messages received (every copy).
    Received,
    /// Sends that were due while their sender was offline (not sent, expected nowhere).
    Dropped,
    /// Requests sent by the request pattern.
    Requests,
    /// Replies to them.
    Replies,
    /// Heartbeats sent.
    Heartbeats,
    /// Bytes written to the network.
    BytesOut,
    /// Bytes read from the network.
    BytesIn,
    /// Sync (catch-up) requests made.
    Syncs,
    /// Accounts the driver created before logging in (XMPP in-band registration).
    AccountsCreated,
    /// Accounts the driver was asked to create that existed already.
    AccountsExisting,
    /// Reconnects that carried nothing to resume the user's session from (Socket.IO: no
    /// offset, because the user had received nothing): what it missed cannot be fetched.
    ResumesWithoutOffset,
    /// Message sends the schedule made due (counted once, when the schedule is built;
    /// sends of patterns without a count or an end are not counted).
    Due,
    /// User-milliseconds online during the traffic: the users online, integrated over
    /// time, per second.
    OnlineUserMs,
    /// User-milliseconds the plan puts online during the traffic (on-time users, late
    /// users from their login, churning users outside their time away), per second.
    PlannedUserMs,
    /// Signals sent: read receipts, typing notices and presence changes.
    SignalsSent,
    /// Signals received (every copy): the presence storm of a login wave shows here.
    SignalsReceived,
    /// WebSocket connections opened ([`wires`]: this and the eleven below are totals,
    /// not in the per-second series).
    WsConnections,
    /// Bytes written on WebSocket connections (on the wire: TLS and handshakes included).
    WsBytesOut,
    /// Bytes read on WebSocket connections.
    WsBytesIn,
    /// Framed TCP connections opened (MQTT, XMPP, the script driver's `tcp://`).
    TcpConnections,
    /// Bytes written on framed TCP connections.
    TcpBytesOut,
    /// Bytes read on framed TCP connections.
    TcpBytesIn,
    /// HTTP/1.1 connections opened.
    Http1Connections,
    /// Bytes written on HTTP/1.1 connections.
    Http1BytesOut,
    /// Bytes read on HTTP/1.1 connections.
    Http1BytesIn,
    /// HTTP/2 connections opened.
    Http2Connections,
    /// Bytes written on HTTP/2 connections.
    Http2BytesOut,
    /// Bytes read on HTTP/2 connections.
    Http2BytesIn,
}

impl Counter {
    /// Every counter.
    pub const ALL: [Counter; 37] = [
        Counter::ConnectAttempts,
        Counter::Connected,
        Counter::LoginOk,
        Counter::Disconnects,
        Counter::Sent,
        Counter::Accepted,
        Counter::Refused,
        Counter::SendErrors,
        Counter::Unconfirmed,
        Counter::Received,
        Counter::Dropped,
        Counter::Requests,
        Counter::Replies,
        Counter::Heartbeats,
        Counter::BytesOut,
        Counter::BytesIn,
        Counter::Syncs,
        Counter::AccountsCreated,
        Counter::AccountsExisting,
        Counter::ResumesWithoutOffset,
        Counter::Due,
        Counter::OnlineUserMs,
        Counter::PlannedUserMs,
        Counter::SignalsSent,
        Counter::SignalsReceived,
        Counter::WsConnections,
        Counter::WsBytesOut,
        Counter::WsBytesIn,
        Counter::TcpConnections,
        Counter::TcpBytesOut,
        Counter::TcpBytesIn,
        Counter::Http1Connections,
        Counter::Http1BytesOut,
        Counter::Http1BytesIn,
        Counter::Http2Connections,
        Counter::Http2BytesOut,
        Counter::Http2BytesIn,
    ];

    /// The name used in reports and result files.
    pub fn name(self) -> &'static str {
        match self {
            Counter::ConnectAttempts => "connect_attempts",
            Counter::Connected => "connected",
            Counter::LoginOk => "login_ok",
            Counter::Disconnects => "disconnects",
            Counter::Sent => "sent",
            Counter::Accepted => "accepted",
            Counter::Refused => "refused",
            Counter::SendErrors => "send_errors",
            Counter::Unconfirmed => "unconfirmed",
            Counter::Received => "received",
            Counter::Dropped => "dropped",
            Counter::Requests => "requests",
            Counter::Replies => "replies",
            Counter::Heartbeats => "heartbeats",
            Counter::BytesOut => "bytes_out",
            Counter::BytesIn => "bytes_in",
            Counter::Syncs => "syncs",
            Counter::AccountsCreated => "accounts_created",
            Counter::AccountsExisting => "accounts_existing",
            Counter::ResumesWithoutOffset => "resumes_without_offset",
            Counter::Due => "due",
            Counter::OnlineUserMs => "online_user_ms",
            Counter::PlannedUserMs => "planned_user_ms",
            Counter::SignalsSent => "signals_sent",
            Counter::SignalsReceived => "signals_received",
            Counter::WsConnections => "ws_connections",
            Counter::WsBytesOut => "ws_bytes_out",
            Counter::WsBytesIn => "ws_bytes_in",
            Counter::TcpConnections => "tcp_connections",
            Counter::TcpBytesOut => "tcp_bytes_out",
            Counter::TcpBytesIn => "tcp_bytes_in",
            Counter::Http1Connections => "http1_connections",
            Counter::Http1BytesOut => "http1_bytes_out",
            Counter::Http1BytesIn => "http1_bytes_in",
            Counter::Http2Connections => "http2_connections",
            Counter::Http2BytesOut => "http2_bytes_out",
            Counter::Http2BytesIn => "http2_bytes_in",
        }
    }
}

/// Failed sends and sends tried, from counter totals: refused, not written or never
/// confirmed, of those sent plus those not written. One definition for the report, the
/// send-error check and `find`.
pub fn send_failures(count: impl Fn(Counter) -> u64) -> (u64, u64) {
    let failed = count(Counter::Refused) + count(Counter::SendErrors) + count(Counter::Unconfirmed);
    (failed, count(Counter::Sent) + count(Counter::SendErrors))
}

/// A kind of per-message or per-connection failure, counted as data.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The TCP connection was refused.
    ConnectRefused,
    /// Connecting or logging in took longer than the connect timeout.
    ConnectTimeout,
    /// The TLS handshake failed: an untrusted or mismatched certificate, or no common
    /// protocol.
    Tls,
    /// The HTTP upgrade was answered with a non-101 status.
    HttpStatus,
    /// The server rejected the credentials.
    AuthFailed,
    /// The server refused to create the user's account (XMPP in-band registration).
    Registration,
    /// The server refused the login because it holds as many connections as it will.
    ServerFull,
    /// The server sent something the protocol does not allow.
    Protocol,
    /// The server closed the connection.
    ClosedByPeer,
    /// The server dropped the user for reading too slowly.
    SlowConsumer,
    /// A send could not be written or was never answered.
    SendFailed,
    /// A request failed or got an error reply.
    RequestFailed,
    /// An operation other than connecting timed out.
    Timeout,
    /// Anything else.
    Other,
    /// A body that is not a message of this run (another run's, or not msgstorm's): the run
    /// measured something other than its own traffic.
    Foreign,
    /// A user task of the engine failed (panicked); its messages are not server loss.
    Engine,
    /// The generator's own side failed: it ran out of local ports, file descriptors,
    /// socket buffers or memory, or could not resolve the target's name. Not the server's
    /// doing.
    Generator,
    /// Joining a group failed (refused or unanswered): a setup failure, and a user that
    /// never joined a group is not expected to receive its messages.
    JoinFailed,
    /// The adapter script of the `script` driver failed at run time (a Lua error, or an
    /// answer the driver cannot use): the generator's setup, not the server.
    Script,
}

impl ErrorKind {
    /// Every kind.
    pub const ALL: [ErrorKind; 19] = [
        ErrorKind::ConnectRefused,
        ErrorKind::ConnectTimeout,
        ErrorKind::Tls,
        ErrorKind::HttpStatus,
        ErrorKind::AuthFailed,
        ErrorKind::Registration,
        ErrorKind::ServerFull,
        ErrorKind::Protocol,
        ErrorKind::ClosedByPeer,
        ErrorKind::SlowConsumer,
        ErrorKind::SendFailed,
        ErrorKind::RequestFailed,
        ErrorKind::Timeout,
        ErrorKind::Other,
        ErrorKind::Foreign,
        ErrorKind::Engine,
        ErrorKind::Generator,
        ErrorKind::JoinFailed,
        ErrorKind::Script,
    ];

    /// The name used in reports and result files.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "connect_refused",
            ErrorKind::ConnectTimeout => "connect_timeout",
            ErrorKind::Tls => "tls",
            ErrorKind::HttpStatus => "http_status",
            ErrorKind::AuthFailed => "auth_failed",
            ErrorKind::Registration => "registration",
            ErrorKind::ServerFull => "server_full",
            ErrorKind::Protocol => "protocol",
            ErrorKind::ClosedByPeer => "closed_by_peer",
            ErrorKind::SlowConsumer => "slow_consumer",
            ErrorKind::SendFailed => "send_failed",
            ErrorKind::RequestFailed => "request_failed",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Other => "other",
            ErrorKind::Foreign => "foreign",
            ErrorKind::Engine => "engine",
            ErrorKind::Generator => "generator",
            ErrorKind::JoinFailed => "join_failed",
            ErrorKind::Script => "script",
        }
    }

    /// What it means, in one line for the report.
    pub fn describe(self) -> &'static str {
        match self {
            ErrorKind::ConnectRefused => "the target refused the TCP connection",
            ErrorKind::ConnectTimeout => "connect + handshake + login exceeded the timeout",
            ErrorKind::Tls => {
                "the TLS handshake failed (certificate not trusted or not for this host)"
            }
            ErrorKind::HttpStatus => "the WebSocket upgrade got an HTTP error status",
            ErrorKind::AuthFailed => "the server rejected the user's credentials",
            ErrorKind::Registration => "the server refused to create the user's account",
            ErrorKind::ServerFull => {
                "the server refused the login: it holds its maximum of connections"
            }
            ErrorKind::Protocol => "the server sent a frame the protocol does not allow",
            ErrorKind::ClosedByPeer => "the server closed an established connection",
            ErrorKind::SlowConsumer => "the server dropped a user that read too slowly",
            ErrorKind::SendFailed => "a message could not be sent or was never acknowledged",
            ErrorKind::RequestFailed => "a request failed or got an error reply",
            ErrorKind::Timeout => "an operation timed out",
            ErrorKind::Other => "another failure (see the examples)",
            ErrorKind::Foreign => "a body that is not a message of this run",
            ErrorKind::Engine => {
                "a user task of the generator failed (a msgstorm bug); its messages are not \
                 counted as server loss"
            }
            ErrorKind::Generator => {
                "the generator ran out of local ports, file descriptors, socket buffers or \
                 memory, or could not resolve the target's name: not the server's doing"
            }
            ErrorKind::JoinFailed => {
                "joining a group or room failed (a setup failure): a user that never joined \
                 is not expected to receive the group's messages"
            }
            ErrorKind::Script => {
                "the adapter script failed at run time (its file and line are in the examples)"
            }
        }
    }
}

/// Latency percentiles of one second, in µs (all 0 when nothing was recorded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Highest value.
    pub max: u64,
}

/// Latency over a window of seconds, in µs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Window {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Highest value.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// One second of the per-second series.
#[derive(Clone, Debug, PartialEq)]
pub struct SecondRow {
    /// Seconds since the run started.
    pub sec: u32,
    /// Users online (the sum of what every source reported for this second).
    pub online: u64,
    /// Errors of any kind.
    pub errors: u64,
    /// Errors by kind, indexed by `ErrorKind as usize` (their sum is `errors`, except in
    /// result files written before kinds were counted per second).
    pub error_kinds: [u64; ErrorKind::ALL.len()],
    /// End-to-end latency.
    pub e2e: Percentiles,
    /// Send → acceptance latency.
    pub ack: Percentiles,
    /// Request round trip.
    pub request: Percentiles,
    counters: [u64; Counter::ALL.len()],
}

impl SecondRow {
    /// A counter's increase during this second.
    pub fn count(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }
}

/// All measurements of a run or of a part of it; see the module documentation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Repr", into = "Repr")]
pub struct Metrics {
    /// Indexed by `Hist as usize`.
    hists: [Histogram<u64>; Hist::ALL.len()],
    /// Indexed by `Counter as usize`.
    counters: [u64; Counter::ALL.len()],
    /// Indexed by `ErrorKind as usize`.
    errors: [Errors; ErrorKind::ALL.len()],
    /// Sorted by `sec`, created when first touched.
    seconds: Vec<Second>,
    /// End-to-end latencies measured across two shards' clocks, by (receiving shard,
    /// sending shard): also in the end-to-end histogram, kept apart so that a merge can
    /// take out those of a shard whose clock turned out unknown.
    cross: BTreeMap<(u32, u32), Histogram<u64>>,
    /// Deliveries and latencies by group-size band, session phase and return.
    split: Split,
}

/// Count and examples of one error kind.
#[derive(Clone, Debug, Default, PartialEq)]
struct Errors {
    count: u64,
    /// The examples with the smallest (first second seen, text), at most
    /// [`ERROR_EXAMPLES`], distinct texts, sorted; `secs[i]` belongs to `texts[i]`.
    secs: Vec<u32>,
    texts: Vec<String>,
}

/// One second of the series.
#[derive(Clone, Debug, PartialEq)]
struct Second {
    sec: u32,
    online: u64,
    errors: u64,
    /// Indexed by `ErrorKind as usize`.
    error_kinds: [u64; ErrorKind::ALL.len()],
    counters: [u64; Counter::ALL.len()],
    /// End-to-end, send-ack and request latencies (see `Hist::series`).
    lat: [Sketch; 3],
}

impl Second {
    fn new(sec: u32) -> Self {
        Second {
            sec,
            online: 0,
            errors: 0,
            error_kinds: [0; ErrorKind::ALL.len()],
            counters: [0; Counter::ALL.len()],
            lat: Default::default(),
        }
    }

    /// Adds everything `o` recorded in the same second.
    fn merge(&mut self, o: &Second) {
        self.online = self.online.saturating_add(o.online);
        self.errors += o.errors;
        for (k, n) in self.error_kinds.iter_mut().zip(&o.error_kinds) {
            *k += n;
        }
        for (c, n) in self.counters.iter_mut().zip(&o.counters) {
            *c = c.saturating_add(*n);
        }
        for (l, n) in self.lat.iter_mut().zip(&o.lat) {
            l.merge(n);
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Adds each histogram of `from` to the one at its index in `into` (all of
/// [`new_hist`]'s bounds).
fn add_all(into: &mut [Histogram<u64>], from: &[Histogram<u64>]) {
    // Adding walks the whole counts array: an empty histogram is skipped.
    for (h, o) in into.iter_mut().zip(from).filter(|(_, o)| !o.is_empty()) {
        h.add(o).expect("all histograms have the same bounds");
    }
}

/// Base64 of `h`'s V2-deflate encoding, as a result file keeps a histogram.
fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .expect("serializing a histogram into memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram [`encode`] wrote.
fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| e.to_string())?;
    hist_bytes::decode(&bytes, &new_hist())
}

/// A histogram from 1 µs to one hour at [`SIGFIG`] significant digits.
fn new_hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_US, SIGFIG).expect("constant bounds are valid")
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Metrics {
            hists: std::array::from_fn(|_| new_hist()),
            counters: [0; Counter::ALL.len()],
            errors: Default::default(),
            seconds: Vec::new(),
            cross: BTreeMap::new(),
            split: Split::default(),
        }
    }

    /// Notes that an end-to-end latency of `us` (recorded with [`Metrics::record`]) was
    /// measured by shard `to` for a message shard `from` sent.
    pub fn record_cross(&mut self, to: u32, from: u32, us: u64) {
        self.cross
            .entry((to, from))
            .or_insert_with(new_hist)
            .saturating_record(us.min(MAX_US));
    }

    /// The end-to-end latencies measured across shards, by (receiving, sending) shard.
    pub fn cross(&self) -> impl Iterator<Item = ((u32, u32), &Histogram<u64>)> + '_ {
        self.cross.iter().map(|(k, h)| (*k, h))
    }

    /// Takes the cross-shard end-to-end latencies that involve any shard of `shards` out of
    /// the end-to-end histogram (not out of the per-second series); returns how many.
    pub fn exclude_cross(&mut self, shards: &[u32]) -> u64 {
        let mut n = 0;
        let e2e = &mut self.hists[Hist::EndToEnd as usize];
        self.cross.retain(|(to, from), h| {
            if !shards.contains(to) && !shards.contains(from) {
                return true;
            }
            n += h.len();
            // Every value of `h` is also in `e2e` (recorded together, checked when read from
            // a file), so this cannot go below zero.
            let _ = e2e.subtract(&*h);
            false
        });
        n
    }

    /// Records a latency of `us` µs (clamped to [`MAX_US`]) at second `sec` of the run.
    pub fn record(&mut self, sec: u32, h: Hist, us: u64) {
        let us = us.min(MAX_US);
        self.hists[h as usize].saturating_record(us);
        if let Some(slot) = series_slot(h) {
            self.second(sec).lat[slot].record(us);
        }
    }

    /// Adds `n` to a counter at second `sec` of the run.
    pub fn add(&mut self, sec: u32, c: Counter, n: u64) {
        let i = c as usize;
        self.counters[i] = self.counters[i].saturating_add(n);
        let s = self.second(sec);
        s.counters[i] = s.counters[i].saturating_add(n);
    }

    /// Adds `n` to a counter's total only, outside the per-second series (the transport
    /// tally of [`wires`], counted by the process rather than at a second).
    pub fn add_total(&mut self, c: Counter, n: u64) {
        let i = c as usize;
        self.counters[i] = self.counters[i].saturating_add(n);
    }

    /// Counts a failure at second `sec`. `example` describes it and is called only when
    /// the example is kept: the [`ERROR_EXAMPLES`] distinct texts seen first (by second,
    /// then text) are.
    pub fn error(&mut self, sec: u32, kind: ErrorKind, example: impl FnOnce() -> String) {
        let e = &mut self.errors[kind as usize];
        e.count += 1;
        let full = e.texts.len() >= ERROR_EXAMPLES;
        if !full || e.secs.last().is_some_and(|&last| sec <= last) {
            e.keep(sec, example());
        }
        let s = self.second(sec);
        s.errors += 1;
        s.error_kinds[kind as usize] += 1;
    }

    /// Adds `online` users to second `sec`. Each source (worker, shard) reports once per
    /// second; the series shows the sum.
    pub fn gauge_online(&mut self, sec: u32, online: u64) {
        let s = self.second(sec);
        s.online = s.online.saturating_add(online);
    }

    /// Adds everything `other` recorded.
    pub fn merge(&mut self, other: &Metrics) {
        self.merge_totals(other);
        for (e, o) in self.errors.iter_mut().zip(&other.errors) {
            for (sec, text) in o.secs.iter().zip(&o.texts) {
                e.keep(*sec, text.clone());
            }
        }
        for o in &other.seconds {
            match self.seconds.binary_search_by_key(&o.sec, |s| s.sec) {
                Ok(i) => self.seconds[i].merge(o),
                // As it is: packed sketches stay packed.
                Err(i) => self.seconds.insert(i, o.clone()),
            }
        }
        for (k, h) in &other.cross {
            self.cross
                .entry(*k)
                .or_insert_with(new_hist)
                .add(h)
                .expect("all histograms have the same bounds");
        }
    }

    /// Adds the histograms, counters and error counts `other` recorded (not its series,
    /// error examples or cross-shard histograms): the totals a live view shows.
    pub fn merge_totals(&mut self, other: &Metrics) {
        add_all(&mut self.hists, &other.hists);
        for (c, o) in self.counters.iter_mut().zip(&other.counters) {
            *c = c.saturating_add(*o);
        }
        for (e, o) in self.errors.iter_mut().zip(&other.errors) {
            e.count += o.count;
        }
        self.split.merge(&other.split);
    }

    /// Moves the seconds of the series before `sec` into `into`'s series, merged with what
    /// it holds of them and packed: the engine's recorders hand over each second that is
    /// over, so that they do not keep the series of the whole run. Totals, counters and
    /// errors stay; merging `self` and `into` afterwards gives exactly what it did before.
    pub fn move_series_before(&mut self, sec: u32, into: &mut Metrics) {
        let over = self.seconds.partition_point(|s| s.sec < sec);
        for mut s in self.seconds.drain(..over) {
            match into.seconds.binary_search_by_key(&s.sec, |t| t.sec) {
                Ok(i) => {
                    let t = &mut into.seconds[i];
                    t.merge(&s);
                    t.lat.iter_mut().for_each(Sketch::pack);
                }
                Err(i) => {
                    s.lat.iter_mut().for_each(Sketch::pack);
                    into.seconds.insert(i, s);
                }
            }
        }
    }

    /// Deliveries and latencies by group-size band, session phase and return.
    pub fn split(&self) -> &Split {
        &self.split
    }

    /// See [`Metrics::split`].
    pub fn split_mut(&mut self) -> &mut Split {
        &mut self.split
    }

    /// The total histogram of `h`.
    pub fn hist(&self, h: Hist) -> &Histogram<u64> {
        &self.hists[h as usize]
    }

    /// The total of a counter.
    pub fn count(&self, c: Counter) -> u64 {
        self.counters[c as usize]
    }

    /// Every error kind that occurred: kind, count and kept examples.
    pub fn errors(&self) -> impl Iterator<Item = (ErrorKind, u64, &[String])> + '_ {
        ErrorKind::ALL
            .iter()
            .zip(&self.errors)
            .filter(|(_, e)| e.count > 0)
            .map(|(k, e)| (*k, e.count, &e.texts[..]))
    }

    /// The per-second series, in time order (seconds without any event are absent).
    pub fn seconds(&self) -> impl DoubleEndedIterator<Item = SecondRow> + '_ {
        self.seconds.iter().map(|s| {
            let pct = |l: &Sketch| Percentiles {
                count: l.count(),
                p50: l.quantile(0.5),
                p99: l.quantile(0.99),
                max: l.max(),
            };
            SecondRow {
                sec: s.sec,
                online: s.online,
                errors: s.errors,
                error_kinds: s.error_kinds,
                e2e: pct(&s.lat[0]),
                ack: pct(&s.lat[1]),
                request: pct(&s.lat[2]),
                counters: s.counters,
            }
        })
    }

    /// Latency of histogram `h` over the seconds in `secs`, from the per-second series (two
    /// significant digits): count, p50, p99, max and mean in µs. `None` for a histogram
    /// without a series or a window without values.
    pub fn window(&self, h: Hist, secs: std::ops::Range<u32>) -> Option<Window> {
        let i = series_slot(h)?;
        let mut all = Sketch::default();
        for s in self.seconds.iter().filter(|s| secs.contains(&s.sec)) {
            all.merge(&s.lat[i]);
        }
        (all.count() > 0).then(|| Window {
            count: all.count(),
            p50: all.quantile(0.5),
            p99: all.quantile(0.99),
            max: all.max(),
            mean: all.mean(),
        })
    }

    /// The bucket of second `sec`, created if needed (fast when it is the latest).
    fn second(&mut self, sec: u32) -> &mut Second {
        let i = match self.seconds.last() {
            Some(s) if s.sec == sec => self.seconds.len() - 1,
            _ => match self.seconds.binary_search_by_key(&sec, |s| s.sec) {
                Ok(i) => i,
                Err(i) => {
                    self.seconds.insert(i, Second::new(sec));
                    i
                }
            },
        };
        &mut self.seconds[i]
    }
}

impl Errors {
    /// Keeps `(sec, text)` if it is among the smallest distinct-text examples.
    fn keep(&mut self, sec: u32, text: String) {
        if let Some(j) = self.texts.iter().position(|t| *t == text) {
            if self.secs[j] <= sec {
                return;
            }
            self.secs.remove(j);
            self.texts.remove(j);
        }
        let i = (0..self.texts.len())
            .find(|&i| (sec, &text) < (self.secs[i], &self.texts[i]))
            .unwrap_or(self.texts.len());
        if i < ERROR_EXAMPLES {
            self.secs.insert(i, sec);
            self.texts.insert(i, text);
            self.secs.truncate(ERROR_EXAMPLES);
            self.texts.truncate(ERROR_EXAMPLES);
        }
    }
}

/// The serialized form.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Repr {
    /// Base64 of each histogram's V2-deflate encoding.
    hists: BTreeMap<Hist, String>,
    counters: BTreeMap<Counter, u64>,
    errors: Vec<ErrorRepr>,
    seconds: Vec<SecondRepr>,
    /// Cross-shard end-to-end latencies (see `Metrics::cross`), absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cross_e2e: Vec<CrossRepr>,
    /// The split by group-size band, session phase and return, absent when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    split: Vec<split::PartRepr>,
    /// The size band of each group stream (see `Split::band_of`), absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    split_bands: Vec<(crate::vocab::StreamId, split::Part)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct CrossRepr {
    /// The receiving shard.
    to: u32,
    /// The sending shard.
    from: u32,
    /// Base64 of the histogram's V2-deflate encoding.
    hist: String,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ErrorRepr {
    kind: ErrorKind,
    count: u64,
    /// (first second seen, text)
    examples: Vec<(u32, String)>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecondRepr {
    sec: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    online: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    errors: u64,
    /// Errors by kind, non-zero kinds only (absent in files written before kinds were
    /// counted per second).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    error_kinds: BTreeMap<ErrorKind, u64>,
    /// Non-zero counters only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    counters: BTreeMap<Counter, u64>,
    /// Latency histograms of the second (see `Sketch::encode`), empty when none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    e2e: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    ack: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    request: String,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl From<Metrics> for Repr {
    fn from(m: Metrics) -> Self {
        let hists = Hist::ALL
            .iter()
            .map(|&h| (h, encode(&m.hists[h as usize])))
            .collect();
        let cross_e2e = m
            .cross
            .iter()
            .map(|(&(to, from), h)| CrossRepr {
                to,
                from,
                hist: encode(h),
            })
            .collect();
        let counters = Counter::ALL
            .iter()
            .map(|&c| (c, m.counters[c as usize]))
            .collect();
        let errors = ErrorKind::ALL
            .iter()
            .zip(m.errors)
            .filter(|(_, e)| e.count > 0)
            .map(|(&kind, e)| ErrorRepr {
                kind,
                count: e.count,
                examples: e.secs.into_iter().zip(e.texts).collect(),
            })
            .collect();
        let seconds = m
            .seconds
            .into_iter()
            .map(|s| SecondRepr {
                sec: s.sec,
                online: s.online,
                errors: s.errors,
                error_kinds: ErrorKind::ALL
                    .iter()
                    .map(|&k| (k, s.error_kinds[k as usize]))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                counters: Counter::ALL
                    .iter()
                    .map(|&c| (c, s.counters[c as usize]))
                    .filter(|(_, n)| *n > 0)
                    .collect(),
                e2e: s.lat[0].encode(),
                ack: s.lat[1].encode(),
                request: s.lat[2].encode(),
            })
            .collect();
        Repr {
            hists,
            counters,
            errors,
            seconds,
            cross_e2e,
            split: m.split.to_repr(),
            split_bands: m.split.bands().to_vec(),
        }
    }
}

impl TryFrom<Repr> for Metrics {
    type Error = String;

    fn try_from(r: Repr) -> Result<Self, String> {
        let mut m = Metrics::new();
        for (h, text) in r.hists {
            m.hists[h as usize] =
                decode(&text).map_err(|e| format!("metrics: histogram {}: {e}", h.name()))?;
        }
        for c in r.cross_e2e {
            let h = decode(&c.hist)
                .map_err(|e| format!("metrics: cross_e2e {}<-{}: {e}", c.to, c.from))?;
            m.cross.insert((c.to, c.from), h);
        }
        // Every cross-shard latency is also an end-to-end one (what `exclude_cross` relies on).
        let mut rest = m.hists[Hist::EndToEnd as usize].clone();
        for h in m.cross.values() {
            rest.subtract(h).map_err(|_| {
                "metrics: cross_e2e holds latencies the end_to_end histogram does not".to_owned()
            })?;
        }
        for (c, n) in r.counters {
            m.counters[c as usize] = n;
        }
        m.split = Split::from_repr(r.split)?;
        m.split.note_bands(r.split_bands);
        for e in r.errors {
            let slot = &mut m.errors[e.kind as usize];
            slot.count = e.count;
            for (sec, text) in e.examples {
                slot.keep(sec, text);
            }
        }
        for s in r.seconds {
            if m.seconds.last().is_some_and(|last| last.sec >= s.sec) {
                return Err(format!("metrics: second {} out of order", s.sec));
            }
            let mut second = Second::new(s.sec);
            second.online = s.online;
            second.errors = s.errors;
            for (k, n) in s.error_kinds {
                second.error_kinds[k as usize] = n;
            }
            if second.error_kinds.iter().sum::<u64>() > s.errors {
                return Err(format!(
                    "metrics: second {}: errors by kind add up to more than its {} errors",
                    s.sec, s.errors
                ));
            }
            for (c, n) in s.counters {
                second.counters[c as usize] = n;
            }
            for (slot, text) in [s.e2e, s.ack, s.request].iter().enumerate() {
                second.lat[slot] = Sketch::decode(text)?;
            }
            m.seconds.push(second);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests;
