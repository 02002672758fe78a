//! Fitting login-arrival phases to the population: the plan's phases log in exactly the
//! on-time users. Phases that would log in more are cut short when the last on-time user
//! is in; phases that log in fewer are followed by a steady phase at the last rate until
//! everyone is in.

use std::time::Duration;

use super::plan::ArrivalPhase;

/// Logins during a whole phase.
fn logins(p: &ArrivalPhase) -> f64 {
    (p.rate_from + p.rate_to) / 2.0 * p.duration.as_secs_f64()
}

/// The phases, cut or extended so they log in exactly `users` users.
pub fn fit(phases: &[ArrivalPhase], users: u32) -> Vec<ArrivalPhase> {
    let mut left = f64::from(users);
    let mut out = Vec::new();
    if left <= 0.0 {
        return out;
    }
    for p in phases {
        let n = logins(p);
        if n < left {
            out.push(*p);
            left -= n;
            continue;
        }
        out.push(cut(p, left));
        return out;
    }
    let rate = out.last().map_or(1.0, |p| p.rate_to);
    out.push(ArrivalPhase {
        duration: Duration::from_secs_f64(left / rate),
        rate_from: rate,
        rate_to: rate,
    });
    out
}

/// The start of `p` that logs in `n` users (`n` ≤ the phase's logins).
fn cut(p: &ArrivalPhase, n: f64) -> ArrivalPhase {
    let d = p.duration.as_secs_f64();
    let (a, b) = (p.rate_from, p.rate_to);
    // logins(t) = a·t + k·t², k = (b − a) / 2d
    let k = (b - a) / (2.0 * d);
    let t = if k.abs() < 1e-12 {
        n / a
    } else {
        (-a + (a * a + 4.0 * k * n).max(0.0).sqrt()) / (2.0 * k)
    };
    let t = t.clamp(0.0, d);
    ArrivalPhase {
        duration: Duration::from_secs_f64(t),
        rate_from: a,
        rate_to: a + (b - a) * t / d,
    }
}

/// When the last phase ends.
pub fn end(phases: &[ArrivalPhase]) -> Duration {
    phases.iter().map(|p| p.duration).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phase(secs: f64, from: f64, to: f64) -> ArrivalPhase {
        ArrivalPhase {
            duration: Duration::from_secs_f64(secs),
            rate_from: from,
            rate_to: to,
        }
    }

    fn total(ps: &[ArrivalPhase]) -> f64 {
        ps.iter().map(logins).sum()
    }

    #[test]
    fn short_phases_are_extended_at_the_last_rate() {
        let out = fit(&[phase(1.0, 100.0, 100.0)], 1000);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].rate_from, 100.0);
        assert!((total(&out) - 1000.0).abs() < 1e-6);
        assert!((end(&out).as_secs_f64() - 10.0).abs() < 1e-6);
    }

    #[test]
    fn long_phases_are_cut() {
        let out = fit(&[phase(10.0, 100.0, 100.0), phase(10.0, 500.0, 500.0)], 500);
        assert_eq!(out.len(), 1);
        assert!((end(&out).as_secs_f64() - 5.0).abs() < 1e-6);
    }

    #[test]
    fn ramps_are_cut_where_the_area_is_reached() {
        // 0 → 200/s over 10 s logs in 1000; 250 are in after 5 s.
        let out = fit(&[phase(10.0, 1e-9, 200.0)], 250);
        assert!((end(&out).as_secs_f64() - 5.0).abs() < 1e-3);
        assert!((out[0].rate_to - 100.0).abs() < 1e-3);
        let down = fit(&[phase(10.0, 200.0, 100.0)], 1000);
        assert!((total(&down) - 1000.0).abs() < 1e-6);
    }
}
