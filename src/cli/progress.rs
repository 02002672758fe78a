//! Live progress of a run. On a terminal: where the run stands against its plan — the
//! phase (login ramp, traffic, drain, final sync), a bar and the time left — beside the
//! live rates. Off a terminal (CI logs): plain lines every few seconds.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::engine;
use crate::scenario::{Plan, TrafficShape};

/// Interval of plain progress lines when stderr is not a terminal.
const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Steps of the bar (per mille).
const BAR_STEPS: u64 = 1000;

/// How long each phase of a run is planned to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeline {
    /// From the start until every on-time user has logged in.
    pub login: Duration,
    /// From traffic start until the last pattern ends.
    pub traffic: Duration,
    /// The longest the drain may take.
    pub drain: Duration,
}

impl Timeline {
    /// The plan's timeline.
    pub fn of(plan: &Plan) -> Timeline {
        let on_time = plan.population.users - plan.population.late.len() as u32;
        let login = engine::arrival::arrival_offset(
            &plan.population.arrival,
            u64::from(on_time.max(1) - 1),
        );
        let traffic = plan
            .traffic
            .iter()
            .map(|t| {
                let len = match (&t.kind, t.duration) {
                    (_, Some(d)) => d,
                    (TrafficShape::Request(r), None) => r.step_duration * r.steps.len() as u32,
                    (_, None) => Duration::ZERO,
                };
                t.start + len
            })
            .max()
            .unwrap_or_default();
        Timeline {
            login,
            traffic,
            drain: plan.drain,
        }
    }
}

/// Where a run stands: the phase as people call it, the share of the plan done, and the
/// time left (`None` in the final sync, whose length the plan does not say).
#[derive(Debug, Clone, PartialEq)]
pub struct Standing {
    /// `login ramp`, `traffic`, `drain`, `final sync`, `stopping`.
    pub phase: &'static str,
    /// Share of the planned run behind us, 0..=1.
    pub done: f64,
    /// Planned time left.
    pub left: Option<Duration>,
}

/// Shows a run's progress.
pub struct Progress {
    bar: Option<ProgressBar>,
    plain: bool,
    last_plain: Instant,
    last: engine::Progress,
    users: u32,
    plan: Timeline,
    /// When traffic and the drain started, seconds into the run.
    traffic_at: Option<Duration>,
    drain_at: Option<Duration>,
}

impl Progress {
    /// Progress for a run of `users` users planned as `plan`; nothing at all when `quiet`.
    pub fn new(quiet: bool, users: u32, plan: Timeline) -> Self {
        let terminal = std::io::stderr().is_terminal();
        let bar = (!quiet && terminal).then(|| {
            let bar = ProgressBar::new(BAR_STEPS);
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} {prefix:<10} [{bar:24}] {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            plain: !quiet && !terminal,
            last_plain: Instant::now(),
            last: engine::Progress::default(),
            users,
            plan,
            traffic_at: None,
            drain_at: None,
        }
    }

    /// Where the run of snapshot `p` stands against the plan.
    pub fn standing(&mut self, p: &engine::Progress) -> Standing {
        let now = p.elapsed;
        let plan = self.plan;
        if p.phase != "login" {
            self.traffic_at.get_or_insert(now);
        }
        if matches!(p.phase, "drain" | "closing" | "abort") {
            self.drain_at.get_or_insert(now);
        }
        let (phase, left) = match (p.phase, self.traffic_at, self.drain_at) {
            ("login", _, _) => (
                "login ramp",
                Some(plan.login.saturating_sub(now) + plan.traffic + plan.drain),
            ),
            ("traffic", Some(t), _) => (
                "traffic",
                Some((t + plan.traffic).saturating_sub(now) + plan.drain),
            ),
            ("drain", _, Some(d)) => ("drain", Some((d + plan.drain).saturating_sub(now))),
            ("abort", _, _) => ("stopping", None),
            _ => ("final sync", None),
        };
        let done = match left {
            Some(left) => now.as_secs_f64() / (now + left).as_secs_f64().max(1e-3),
            None => 1.0,
        };
        Standing {
            phase,
            done: done.clamp(0.0, 1.0),
            left,
        }
    }

    /// Shows a new snapshot (called about once a second).
    pub fn update(&mut self, p: &engine::Progress) {
        let dt = p
            .elapsed
            .saturating_sub(self.last.elapsed)
            .as_secs_f64()
            .max(1e-3);
        let send_rate = p.sent.saturating_sub(self.last.sent) as f64 / dt;
        let recv_rate = p.received.saturating_sub(self.last.received) as f64 / dt;
        let rates = format!(
            "online {}/{}  send {:.0}/s  recv {:.0}/s  replies {}  e2e p99 {:.1} ms  errors {}",
            p.online,
            self.users,
            send_rate,
            recv_rate,
            p.replies,
            p.e2e_p99_us as f64 / 1000.0,
            p.errors
        );
        self.last = *p;
        let standing = self.standing(p);
        if let Some(bar) = &self.bar {
            let left = match standing.left {
                Some(left) => format!("{} left", humantime::format_duration(whole(left))),
                None => "ending".to_owned(),
            };
            bar.set_prefix(standing.phase);
            bar.set_position((standing.done * BAR_STEPS as f64) as u64);
            bar.set_message(format!("{left}  {rates}"));
        } else if self.plain && self.last_plain.elapsed() >= PLAIN_EVERY {
            self.last_plain = Instant::now();
            super::note(&format!(
                "[{:>6.1}s] {:<7} {rates}",
                p.elapsed.as_secs_f64(),
                p.phase
            ));
        }
    }

    /// Removes the status line.
    pub fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// `d` rounded up to whole seconds.
fn whole(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs() + u64::from(d.subsec_nanos() > 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, phase: &'static str) -> engine::Progress {
        engine::Progress {
            elapsed: Duration::from_secs(secs),
            phase,
            ..engine::Progress::default()
        }
    }

    #[test]
    fn the_standing_follows_the_plan_through_its_phases() {
        let plan = Timeline {
            login: Duration::from_secs(10),
            traffic: Duration::from_secs(60),
            drain: Duration::from_secs(5),
        };
        let mut p = Progress::new(true, 100, plan);
        let s = p.standing(&at(4, "login"));
        assert_eq!(s.phase, "login ramp");
        assert_eq!(s.left, Some(Duration::from_secs(6 + 60 + 5)));
        // Traffic started late (at 12 s): the plan's traffic counts from there.
        p.standing(&at(12, "traffic"));
        let s = p.standing(&at(42, "traffic"));
        assert_eq!(s.left, Some(Duration::from_secs(30 + 5)));
        assert!((s.done - 42.0 / 77.0).abs() < 1e-9, "{s:?}");
        let s = p.standing(&at(73, "drain"));
        assert_eq!((s.phase, s.left), ("drain", Some(Duration::from_secs(5))));
        let s = p.standing(&at(80, "closing"));
        assert_eq!((s.phase, s.left, s.done), ("final sync", None, 1.0));
    }

    #[test]
    fn the_timeline_of_the_default_scenario() {
        let plan = crate::scenario::parse(
            crate::scenario::DEFAULT_SCENARIO,
            std::path::Path::new("default.toml"),
            &[],
            crate::scenario::Shard::WHOLE,
        )
        .expect("the default scenario loads");
        let t = Timeline::of(&plan);
        assert!(
            t.login > Duration::ZERO && t.traffic > Duration::ZERO,
            "{t:?}"
        );
        assert_eq!(t.drain, plan.drain);
    }
}
