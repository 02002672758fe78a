//! The login arrival pacer: a pure function from "the k-th arrival" to "when it is due".
//!
//! Phases are piecewise-linear rates; the cumulative number of arrivals N(t) is their
//! integral, and the k-th arrival (0-based) is due at the t where N(t) = k. Past the last
//! phase, arrivals continue at its final rate, so every user gets a time.

use std::time::Duration;

use crate::scenario::{ArrivalPhase, Population};

/// When the late user at `position` of `pop.late` logs in, from the start of the run:
/// `late_at`, plus its offset along `late_arrival` when the late users arrive in steps.
pub fn late_login(pop: &Population, position: usize) -> Duration {
    if pop.late_arrival.is_empty() {
        return pop.late_at;
    }
    pop.late_at + arrival_offset(&pop.late_arrival, position as u64)
}

/// When the last late user logs in (`late_at` without late users).
pub fn last_late_login(pop: &Population) -> Duration {
    late_login(pop, pop.late.len().saturating_sub(1))
}

/// When the `k`-th arrival (0-based) is due, counted from the start of the run.
pub fn arrival_offset(phases: &[ArrivalPhase], k: u64) -> Duration {
    let mut start = 0.0_f64;
    let mut remaining = k as f64;
    for p in phases {
        let len = p.duration.as_secs_f64();
        let (a, b) = (p.rate_from, p.rate_to);
        let total = (a + b) / 2.0 * len;
        if remaining < total {
            // Solve a·t + (b − a)/(2·len)·t² = remaining for t in [0, len].
            let c = (b - a) / (2.0 * len);
            let t = if c.abs() < 1e-12 {
                remaining / a
            } else {
                (-a + (a * a + 4.0 * c * remaining).max(0.0).sqrt()) / (2.0 * c)
            };
            return Duration::from_secs_f64(start + t.clamp(0.0, len));
        }
        remaining -= total;
        start += len;
    }
    let rate = phases.last().map_or(1.0, |p| p.rate_to);
    Duration::from_secs_f64(start + remaining / rate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(secs: u64, from: f64, to: f64) -> ArrivalPhase {
        ArrivalPhase {
            duration: Duration::from_secs(secs),
            rate_from: from,
            rate_to: to,
        }
    }

    #[test]
    fn steady_phase_spaces_arrivals_evenly() {
        let p = [phase(10, 100.0, 100.0)];
        assert_eq!(arrival_offset(&p, 0), Duration::ZERO);
        assert_eq!(arrival_offset(&p, 100), Duration::from_secs(1));
        assert_eq!(arrival_offset(&p, 550), Duration::from_millis(5500));
    }

    #[test]
    fn ramp_follows_the_integral() {
        // 0→200/s over 10 s: N(t) = 10·t², 1000 arrivals in all.
        let p = [phase(10, 1e-9, 200.0)];
        let t = arrival_offset(&p, 250).as_secs_f64();
        assert!((t - 5.0).abs() < 1e-3, "{t}");
    }

    #[test]
    fn arrivals_continue_after_the_last_phase() {
        let p = [phase(1, 10.0, 10.0), phase(1, 20.0, 20.0)];
        assert_eq!(arrival_offset(&p, 30), Duration::from_secs(2));
        assert_eq!(arrival_offset(&p, 50), Duration::from_secs(3));
    }

    #[test]
    fn zero_rate_phases_hold_the_arrivals() {
        // 10 at 10/s, a 5 s hold, 10 more at 10/s.
        let p = [
            phase(1, 10.0, 10.0),
            phase(5, 0.0, 0.0),
            phase(1, 10.0, 10.0),
        ];
        assert_eq!(arrival_offset(&p, 9), Duration::from_millis(900));
        assert_eq!(arrival_offset(&p, 10), Duration::from_secs(6));
        assert_eq!(arrival_offset(&p, 15), Duration::from_millis(6500));
    }

    #[test]
    fn offsets_are_monotonic() {
        let p = [phase(3, 50.0, 500.0), phase(2, 500.0, 20.0)];
        let mut last = Duration::ZERO;
        for k in 0..3000 {
            let t = arrival_offset(&p, k);
            assert!(t >= last, "k={k}");
            last = t;
        }
    }
}
