//! The report of a run that is still going, for the `--live` page: the [`Report`] a
//! finished run gets, computed the same way from an artifact of the run so far, with the
//! ledger's running tallies as its delivery and the checks only the end can judge marked
//! pending. The HTML renderer shows it with the run's phase instead of a verdict.

use serde::Serialize;

use super::checks::{CheckOutcome, Measure};
use super::model::Report;
use crate::artifact::{Artifact, CheckMetric};
use crate::ledger::{Delivery, Running};

/// Where a running run is, and which of its checks only its end can judge.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LiveView {
    /// `starting`, `login`, `traffic`, `drain`, `closing` or `abort`.
    pub phase: String,
    /// Seconds since the run started.
    pub elapsed_s: f64,
    /// Deliveries due for what was accepted and not yet seen: in flight, late or lost
    /// (which of them are lost only the end can tell).
    pub overdue: u64,
    /// The keys of the checks only the end of the run can judge, in report order.
    pub pending: Vec<String>,
}

/// How far a running run got, besides its artifact so far.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The engine's phase ([`LiveView::phase`]).
    pub phase: String,
    /// The ledger's tallies that are already certain.
    pub running: Running,
    /// [`LiveView::overdue`].
    pub overdue: u64,
}

/// The report of `a`, an artifact of the run so far whose ledger is still empty: its
/// delivery is `p`'s running tallies, and its checks stand as they are now, those only the
/// end can judge (losses, the verified share, repairs, recovery after chaos) pending.
pub fn report(a: &Artifact, p: &Progress) -> Report {
    let r = &p.running;
    let delivery = Delivery {
        delivered: r.delivered,
        duplicated: r.duplicated,
        reordered: r.reordered,
        corrupted: r.corrupted,
        late: r.late,
        unexpected: r.unexpected,
        // What is due so far: the built-in checks on it apply as they will at the end.
        expected: r.delivered + p.overdue,
        ..Delivery::default()
    };
    let mut report = Report::of(a, delivery, None);
    let pending: Vec<String> = report
        .checks
        .iter()
        .filter(|c| judged_at_end(c))
        .map(|c| c.key.clone())
        .collect();
    for c in report
        .checks
        .iter_mut()
        .filter(|c| pending.contains(&c.key))
    {
        c.reason = None;
    }
    report.live = Some(LiveView {
        phase: p.phase.clone(),
        elapsed_s: a.duration_s,
        overdue: p.overdue,
        pending,
    });
    report
}

/// Whether only the end of the run can judge `c`: a loss is known only when nothing more
/// can arrive (the final verification sync included), the verified share and the repairs
/// with it, a recovery when the run is over, and a chaos step's bounds once its messages
/// are. Counts that only grow (duplicates, corruption, errors…) and latencies stand as
/// they are.
fn judged_at_end(c: &CheckOutcome) -> bool {
    let at_end = matches!(
        c.metric,
        Measure::Check(
            CheckMetric::Lost
                | CheckMetric::Verified
                | CheckMetric::RepairedRate
                | CheckMetric::Recovery
        )
    );
    at_end || c.key.starts_with("chaos[")
}
