//! The report of a run that is still going, for the `--live` page: the [`Report`] a
//! finished run gets, computed the same way from an artifact of the run so far, with the
//! ledger's running tallies as its delivery and the checks only the end can judge marked
//! pending. The HTML renderer shows it with the run's phase instead of a verdict.

use super::checks::{CheckOutcome, Measure, RunMetric};
use super::model::{LiveView, Rates, Report};
use super::series::SecondPoint;
use crate::artifact::{Artifact, CheckMetric};
use crate::ledger::{Delivery, Running};

/// How far a running run got, besides its artifact so far.
#[derive(Debug, Clone)]
pub struct Progress {
    /// The engine's phase ([`LiveView::phase`]).
    pub phase: String,
    /// The ledger's tallies that are already certain.
    pub running: Running,
    /// [`LiveView::overdue`].
    pub overdue: u64,
    /// Time since the run started (the artifact's length is the seconds that are over,
    /// those its series has).
    pub elapsed: std::time::Duration,
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
    // Whether the generator kept its schedule is judged with the sends made, at the end.
    report
        .checks
        .retain(|c| c.metric != Measure::Run(RunMetric::Generator));
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
    let elapsed_s = p.elapsed.as_secs_f64();
    if let Some(window) = traffic_so_far(&report.series, a.duration_s, elapsed_s) {
        report.rates = Rates::of(&a.metrics, window);
    }
    report.live = Some(LiveView {
        phase: p.phase.clone(),
        elapsed_s,
        overdue: p.overdue,
        pending,
    });
    report
}

/// The seconds of traffic so far, for rates of totals that include the seconds not yet
/// over (`series` has those before `over_s`): from the first second with a send or a
/// reply until now while the last second that is over had one (traffic goes on), else
/// until the end of that second. `None` before any traffic.
fn traffic_so_far(series: &[SecondPoint], over_s: f64, elapsed_s: f64) -> Option<f64> {
    let mut active = series.iter().filter(|s| s.sent > 0 || s.replies > 0);
    let first = f64::from(active.next()?.sec);
    let last = series
        .iter()
        .rev()
        .find(|s| s.sent > 0 || s.replies > 0)
        .map_or(first, |s| f64::from(s.sec));
    let end = if last + 1.0 >= over_s {
        elapsed_s
    } else {
        last + 1.0
    };
    Some((end - first).max(1.0))
}

/// Whether only the end of the run can judge `c`: a loss is known only when nothing more
/// can arrive (the final verification sync included), the verified share and the repairs
/// with it, a recovery when the run is over, the sends made of those due (most are not due
/// yet), and a chaos step's bounds once its messages are. Counts that only grow (duplicates, corruption, errors…) and latencies stand as
/// they are.
fn judged_at_end(c: &CheckOutcome) -> bool {
    let at_end = matches!(
        c.metric,
        Measure::Check(
            CheckMetric::Lost
                | CheckMetric::Verified
                | CheckMetric::RepairedRate
                | CheckMetric::Recovery
                | CheckMetric::Offered
        )
    );
    at_end || c.key.starts_with("chaos[")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{Counter, Metrics};

    #[test]
    fn rates_so_far_count_the_second_not_yet_over_while_traffic_goes_on() {
        let mut m = Metrics::new();
        for sec in 2..=5 {
            m.add(sec, Counter::Sent, 100);
        }
        m.add(7, Counter::LoginOk, 1);
        let series = crate::report::series::of(&m);
        // At 6.5 s the last second that is over (5) had sends: traffic goes on until now.
        assert_eq!(traffic_so_far(&series[..4], 6.0, 6.5), Some(4.5));
        // At 9.5 s it ended with second 5.
        assert_eq!(traffic_so_far(&series, 9.0, 9.5), Some(4.0));
        assert_eq!(traffic_so_far(&series[4..], 9.0, 9.5), None);
    }
}
