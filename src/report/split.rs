//! Latency and delivery split where a population's shape matters (the metrics' split):
//! group messages by the size band of their group, all messages by the session phase they
//! were due in, and returning users' catch-up. The report's rows and their text lines;
//! the HTML page (`html::shape`) and `compare` read the rows.

use serde::Serialize;

use crate::ledger::Ledger;
use crate::metrics::split::Part;
use crate::metrics::Metrics;

/// One row of the split.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SplitRow {
    /// `small`, `large`, `hot`, `login_wave`, `steady` or `sync`.
    pub part: &'static str,
    /// What it holds, for people.
    pub label: String,
    /// First intact copies received (returns whose sync fetched something, for `sync`).
    pub count: u64,
    /// Messages lost, for the group bands (by the stream's group) and the session phases
    /// (by the login wave's bounds the ledger placed each stream's sends between); none for
    /// `sync`, whose rows are returns.
    pub lost: Option<u64>,
    /// Of those, how many came live (each with an end-to-end latency; returns, for `sync`).
    pub timed: u64,
    /// Median latency, µs (end-to-end; the catch-up, for `sync`), when any was timed.
    pub p50_us: Option<u64>,
    /// 99th percentile, µs.
    pub p99_us: Option<u64>,
    /// Largest, µs.
    pub max_us: Option<u64>,
}

/// The rows of `m`'s split that counted something, in report order, with the messages
/// `ledger` lost in each group band and each session phase.
pub fn rows(m: &Metrics, ledger: &Ledger) -> Vec<SplitRow> {
    let s = m.split();
    let bands = [Part::Small, Part::Large, Part::Hot];
    let lost = ledger.lost_by(bands.len(), |stream| {
        let band = s.band_of(stream)?;
        bands.iter().position(|&b| b == band)
    });
    let by_wave = ledger.lost_by_wave();
    let lost_in = |p: Part| match p {
        Part::LoginWave => by_wave.map(|l| l[0]),
        Part::Steady => by_wave.map(|l| l[1]),
        _ => bands.iter().position(|&b| b == p).map(|i| lost[i]),
    };
    Part::ALL
        .iter()
        .filter(|&&p| s.count(p) > 0 || lost_in(p).is_some_and(|n| n > 0))
        .map(|&p| {
            let h = s.hist(p);
            let at = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q));
            SplitRow {
                part: p.name(),
                label: p.label(),
                count: s.count(p),
                lost: lost_in(p),
                timed: h.len(),
                p50_us: at(0.5),
                p99_us: at(0.99),
                max_us: (!h.is_empty()).then(|| h.max()),
            }
        })
        .collect()
}

/// A latency in ms, or `-` when none was timed.
fn ms(us: Option<u64>) -> String {
    us.map_or_else(
        || "-".to_owned(),
        |us| format!("{:.1} ms", us as f64 / 1000.0),
    )
}

/// The cells of one row: part, what it holds, count, lost, timed, p50, p99, max.
pub fn cells(r: &SplitRow) -> Vec<String> {
    vec![
        r.part.to_owned(),
        r.label.clone(),
        r.count.to_string(),
        r.lost.map_or_else(|| "-".to_owned(), |n| n.to_string()),
        r.timed.to_string(),
        ms(r.p50_us),
        ms(r.p99_us),
        ms(r.max_us),
    ]
}

/// The column heads of [`cells`].
pub const HEAD: [&str; 8] = [
    "part", "holds", "count", "lost", "timed", "p50", "p99", "max",
];

/// The rows as text lines.
pub fn lines(rows: &[SplitRow]) -> Vec<String> {
    rows.iter()
        .map(|r| {
            let c = cells(r);
            let what = if r.part == Part::Sync.name() {
                "returns"
            } else {
                "deliveries"
            };
            format!(
                "{:<10} {:<30} {:>9} {what}, lost {:>6}, {:>9} timed  p50 {:>10}  p99 {:>10}  max {:>10}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            )
        })
        .collect()
}
