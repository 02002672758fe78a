//! A look at a running engine from outside it, for live views (the OpenMetrics endpoint,
//! remote-write, the `--live` page): totals so far and the per-second series of the
//! seconds that are over, taken on demand without stopping the users.
//!
//! The engine hands its run-wide state to a [`LiveTap`] when it starts and its final
//! totals when it ends; a view asks the tap for a [`Snapshot`] whenever it wants one.
//! Taking one locks each recorder in turn, briefly (its histograms and counters are added
//! into the snapshot's), so nothing is copied while nobody looks.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock, Weak};
use std::time::Duration;

use super::patterns::{slot, PatternTotals};
use super::shared::Shared;
use crate::ledger::Running;
use crate::metrics::Metrics;

/// The totals of a run so far.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Time since the run started.
    pub elapsed: Duration,
    /// `login`, `traffic`, `drain`, `closing`, `abort`, or `done` once the engine ended.
    pub phase: &'static str,
    /// When traffic started, from the start of the run (`None` while users log in).
    pub traffic_started: Option<Duration>,
    /// Users logged in now.
    pub online: u64,
    /// On-time users whose first login attempt has not finished.
    pub logging_in: u64,
    /// Histograms, counters and error counts so far (no series).
    pub metrics: Metrics,
    /// The ledger's running tallies that are already certain.
    pub deliveries: Running,
    /// Deliveries this process's users should have seen for what was accepted so far and
    /// have not (in flight, late or lost: the final verdict comes at the end).
    pub overdue: u64,
    /// Totals of each message pattern, by name (empty unless the run keeps them: see
    /// [`super::patterns`]).
    pub patterns: Vec<(String, PatternTotals)>,
}

/// Where the engine publishes its state for live views.
#[derive(Debug, Default)]
pub struct LiveTap {
    /// The running engine's state, once it started.
    shared: OnceLock<Weak<Shared>>,
    /// Whether the driver's sends get an acceptance, once the engine started.
    acceptance: OnceLock<bool>,
    /// The totals at the engine's end.
    last: Mutex<Option<Snapshot>>,
    /// The series of the seconds that were over at the engine's end, and the second it
    /// ends before.
    last_series: Mutex<Option<(Metrics, u32)>>,
}

impl LiveTap {
    /// The run's totals now: `None` before the engine started; once it ended, its final
    /// totals (even while a user task still holds the engine's state).
    pub fn snapshot(&self) -> Option<Snapshot> {
        if let Some(last) = self.last.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            return Some(last);
        }
        let shared = self.shared.get().and_then(Weak::upgrade)?;
        Some(shared.snapshot())
    }

    /// The per-second series of the seconds that are over, merged across the recorders
    /// (its totals are empty), and the second it ends before: `None` before the engine
    /// started; once it ended, those that were over then (the run's result has them all).
    pub fn series(&self) -> Option<(Metrics, u32)> {
        if let Some(last) = self
            .last_series
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            return Some(last);
        }
        let shared = self.shared.get().and_then(Weak::upgrade)?;
        Some(shared.settled_series())
    }

    /// Whether the driver's sends get an acceptance (send → ack is measured): `None`
    /// before the engine started.
    pub fn acceptance(&self) -> Option<bool> {
        self.acceptance.get().copied()
    }

    /// Called by the engine when its users start.
    pub(super) fn attach(&self, shared: &std::sync::Arc<Shared>, acceptance: bool) {
        let _ = self.acceptance.set(acceptance);
        let _ = self.shared.set(std::sync::Arc::downgrade(shared));
    }

    /// Called by the engine when it ends, with its final state.
    pub(super) fn close(&self, shared: &Shared) {
        *self.last_series.lock().unwrap_or_else(|p| p.into_inner()) = Some(shared.settled_series());
        let mut last = shared.snapshot();
        last.phase = "done";
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Some(last);
    }
}

impl Shared {
    /// The run's totals now (see the module documentation).
    pub fn snapshot(&self) -> Snapshot {
        let mut metrics = Metrics::new();
        let mut deliveries = Running::default();
        let mut patterns: Vec<PatternTotals> = Vec::new();
        for i in 0..self.recorder_count() {
            let r = self.recorder(i);
            metrics.merge_totals(&r.metrics);
            deliveries.add(&r.ledger.running());
            for (j, p) in r.patterns.iter().enumerate() {
                slot(&mut patterns, j).add(p);
            }
        }
        let patterns = self
            .patterns
            .names
            .iter()
            .enumerate()
            .map(|(j, name)| (name.clone(), patterns.get(j).cloned().unwrap_or_default()))
            .collect();
        let l = &self.live;
        let expected = l.expected.load(Ordering::Relaxed);
        Snapshot {
            elapsed: self.t0.elapsed(),
            phase: self.phase_name(),
            traffic_started: self
                .traffic_start()
                .map(|t| t.saturating_duration_since(self.t0)),
            online: l.online.load(Ordering::Relaxed),
            logging_in: self.logins_pending.load(Ordering::Relaxed) as u64,
            metrics,
            deliveries,
            overdue: expected.saturating_sub(l.received.load(Ordering::Relaxed)),
            patterns,
        }
    }
}

/// Something that shows a run while it lasts (the `--live` page): told where the engine
/// publishes its state and what the run is, before the users start.
pub trait Viewer: Send + Sync + std::fmt::Debug {
    /// Shows the run of `plan` (id `run_id`, against `target` as the report names it)
    /// from what the engine publishes to `tap`.
    fn follow(&self, tap: std::sync::Arc<LiveTap>, run: Followed);
}

/// What a [`Viewer`] is told of the run it shows.
#[derive(Debug)]
pub struct Followed {
    /// The plan being run.
    pub plan: crate::scenario::Plan,
    /// The run id.
    pub run_id: u32,
    /// The target as the report names it.
    pub target: String,
    /// The scenario as run.
    pub scenario_source: Option<crate::artifact::ScenarioSource>,
}
