//! The rows of the tables every format shows — checks, latency, delivery (and delivery
//! while a run goes on, for the live page) — built once from the report in words and
//! units ([`super::present`]); the text, HTML and Markdown renderers only lay them out
//! (markup, alignment, escaping, how a result is marked).

use super::checks::CheckOutcome;
use super::model::Report;
use super::present::{check, ms, origin, pct, thousands};
use crate::ledger::Delivery;
use crate::metrics::Hist;

/// The header of the transports table.
pub const TRANSPORTS_HEADER: [&str; 4] =
    ["transport", "connections", "bytes sent", "bytes received"];

/// The transports table's rows: each transport the run used, its connections opened and
/// bytes on the wire.
pub fn transport_rows(r: &Report) -> Vec<[String; 4]> {
    r.connections
        .transports
        .iter()
        .map(|t| {
            [
                t.transport.to_owned(),
                thousands(t.connections),
                thousands(t.bytes_out),
                thousands(t.bytes_in),
            ]
        })
        .collect()
}

/// The header of the checks table.
pub const CHECKS_HEADER: [&str; 5] = ["check", "from", "bound", "measured", "result"];

/// How a check came out, for the result column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckResult<'r> {
    /// It passed (so far, in a live report).
    Pass,
    /// It failed (so far, in a live report), with why when the report says.
    Fail(Option<&'r str>),
    /// Only the end of the run can judge it (a live report).
    Pending,
}

/// One row of the checks table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckRow<'r> {
    /// The check's key, e.g. `checks.max_lost`.
    pub key: &'r str,
    /// Where it comes from ([`origin`]).
    pub from: String,
    /// Its bound, with the unit.
    pub bound: String,
    /// What was measured, with the unit (`–` while pending).
    pub measured: String,
    /// How it came out.
    pub result: CheckResult<'r>,
}

/// The rows of the checks table, in the report's order.
pub fn check_rows(r: &Report) -> Vec<CheckRow<'_>> {
    let pending = |c: &CheckOutcome| r.live.as_ref().is_some_and(|l| l.pending.contains(&c.key));
    r.checks
        .iter()
        .map(|c| {
            let (bound, measured) = check(r, c);
            let (measured, result) = if pending(c) {
                ("–".to_owned(), CheckResult::Pending)
            } else if c.passed {
                (measured, CheckResult::Pass)
            } else {
                (measured, CheckResult::Fail(c.reason.as_deref()))
            };
            CheckRow {
                key: &c.key,
                from: origin(c),
                bound,
                measured,
                result,
            }
        })
        .collect()
}

/// The header of the latency table.
pub const LATENCY_HEADER: [&str; 8] = [
    "latency", "count", "p50", "p95", "p99", "p99.9", "max", "mean",
];

/// One row of the latency table.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyRow {
    /// The histogram.
    pub hist: Hist,
    /// `count`, `p50`, `p95`, `p99`, `p99.9`, `max`, `mean`; `None` for send → ack of a
    /// protocol without acceptance (not measured).
    pub cells: Option<[String; 7]>,
}

impl LatencyRow {
    /// Its name in the text and Markdown tables: the catalog's label, with fan-out's "last
    /// online member" spelled out (the HTML table names it as its chart does, by the
    /// catalog's label).
    pub fn label(&self) -> &'static str {
        match self.hist {
            Hist::Fanout => "group fan-out (due → last online member)",
            h => h.entry().label,
        }
    }
}

/// The rows of the latency table: every histogram with values, in the catalog's order, and send →
/// ack as not measured when the protocol has no acceptance. Across hosts, an end-to-end or
/// fan-out latency within the clocks' uncertainty is no measurement: it shows as `~0 ±U`.
pub fn latency_rows(r: &Report) -> Vec<LatencyRow> {
    let uncertainty = r.clocks.as_ref().and_then(|c| c.uncertainty_us);
    let mut rows = Vec::new();
    for h in Hist::ALL {
        if h == Hist::SendAck && !r.acceptance {
            rows.push(LatencyRow {
                hist: h,
                cells: None,
            });
            continue;
        }
        let Some(l) = r.latency_us.get(&h) else {
            continue;
        };
        let blur = match (h, uncertainty) {
            (Hist::EndToEnd | Hist::Fanout, Some(u)) if u > 0 => u,
            _ => 0,
        };
        let q = |us: u64| {
            if us < blur {
                format!("~0 ±{}", ms(blur as f64))
            } else {
                ms(us as f64)
            }
        };
        rows.push(LatencyRow {
            hist: h,
            cells: Some([
                thousands(l.count),
                q(l.p50),
                q(l.p95),
                q(l.p99),
                q(l.p999),
                q(l.max),
                ms(l.mean),
            ]),
        });
    }
    rows
}

/// The header of the delivery table.
pub const DELIVERY_HEADER: [&str; 3] = ["delivery", "count", "share of expected"];

/// The delivery table's rows in order — outcome, count, share of expected — that every
/// format shows (`unverified` only when some recipient never logged in).
pub fn delivery_rows(d: &Delivery) -> Vec<[String; 3]> {
    let mut rows = vec![
        ("expected (sampled streams × recipients)", d.expected),
        ("delivered intact", d.delivered),
        ("  live push", d.via_push),
        ("  sync after login", d.via_sync),
        ("  repaired by final sync", d.repaired),
        ("lost", d.lost),
    ];
    if d.unverified > 0 {
        rows.push(("unverified (recipient never logged in)", d.unverified));
    }
    rows.extend([
        ("duplicated", d.duplicated),
        ("reordered", d.reordered),
        ("corrupted", d.corrupted),
        ("late", d.late),
        ("damaged (unattributable)", d.damaged),
        ("unexpected recipient", d.unexpected),
    ]);
    rows.into_iter()
        .map(|(label, n)| [label.to_owned(), thousands(n), pct(n, d.expected)])
        .collect()
}

/// The delivery table of a run still going: the tallies already certain, and what is
/// overdue (in flight, late or lost: only the end can tell), with counts.
pub fn live_delivery_rows(d: &Delivery, overdue: u64) -> Vec<[String; 2]> {
    [
        ("delivered", d.delivered),
        ("overdue (in flight, late or lost)", overdue),
        ("duplicated", d.duplicated),
        ("reordered", d.reordered),
        ("corrupted", d.corrupted),
        ("late", d.late),
        ("unexpected recipient", d.unexpected),
    ]
    .into_iter()
    .map(|(label, n)| [label.to_owned(), thousands(n)])
    .collect()
}

/// The header of the signals table.
pub const SIGNALS_HEADER: [&str; 9] = [
    "signal",
    "sent",
    "owed",
    "arrived",
    "  by fetch",
    "missing",
    "extra",
    "duplicated",
    "corrupted",
];

/// One row per kind of signal the scenario asked for: sent, owed (every receipt not
/// refused; each typing notice and presence change to each recipient online before it and
/// for `within` after), arrived, missing (lost receipts, missed notices), extra (arrived
/// where none was owed), duplicated, corrupted.
pub fn signal_rows(r: &Report) -> Vec<[String; 9]> {
    r.signals
        .iter()
        .map(|s| {
            let d = &s.delivery;
            [
                s.kind.name().to_owned(),
                thousands(d.sent),
                thousands(d.expected),
                thousands(d.arrived),
                thousands(d.via_sync),
                thousands(d.missing),
                thousands(d.extra),
                thousands(d.duplicated),
                thousands(d.corrupted),
            ]
        })
        .collect()
}

/// The presence fan-out in words, when the run published presence: how many contacts each
/// login or logout reached, and how many it owed, on average.
pub fn presence_fanout(r: &Report) -> Option<String> {
    let p = r
        .signals
        .iter()
        .find(|s| s.kind == crate::vocab::SignalKind::Presence)?;
    let d = &p.delivery;
    let per = |n: u64| n as f64 / d.sent.max(1) as f64;
    Some(format!(
        "presence fan-out: {:.1} contacts notified per login or logout ({:.1} owed), {} changes",
        per(d.arrived + d.extra),
        per(d.expected),
        thousands(d.sent)
    ))
}
