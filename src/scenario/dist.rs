//! Durations drawn from a distribution, as a scenario writes them: `"2s"` (fixed),
//! `{ uniform = ["1s", "3s"] }`, `{ exponential = "2s" }` (the mean) or
//! `{ lognormal = "2m", spread = 1.2 }` (the median and σ of the logarithm). Used by
//! `flow`'s think times and by the population's session lengths and offline gaps.

use std::time::Duration;

use toml::Spanned;

use super::source::Source;
use super::values::{positive, show, Dur};
use crate::Result;

/// How a duration distribution is written, for error messages.
pub const FORMS: &str = "a duration (\"2s\"), { uniform = [\"1s\", \"3s\"] }, \
     { exponential = \"2s\" } (the mean) or { lognormal = \"2s\", spread = 1.0 } (the median \
     and the σ of its logarithm)";

/// The largest lognormal `spread` taken: beyond it one draw in a thousand is 10¹⁵ × the
/// median, which no session or think time means.
const MAX_SPREAD: f64 = 5.0;

/// A distribution of durations: how long a user thinks between two loops, how long a
/// session lasts, how long a user stays away.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ThinkTimes {
    /// Always this long.
    Fixed(Duration),
    /// Uniform in `low..=high`.
    Uniform(Duration, Duration),
    /// Exponential with this mean (a Poisson process per user).
    Exponential(Duration),
    /// Lognormal: half the draws are below `median`; `spread` is the σ of the logarithm
    /// (heavy-tailed: most short, a few very long).
    Lognormal {
        /// The median.
        median: Duration,
        /// σ of the natural logarithm.
        spread: f64,
    },
}

impl ThinkTimes {
    /// The mean think time.
    pub fn mean(&self) -> Duration {
        match *self {
            ThinkTimes::Fixed(d) | ThinkTimes::Exponential(d) => d,
            ThinkTimes::Uniform(low, high) => (low + high) / 2,
            ThinkTimes::Lognormal { median, spread } => {
                Duration::try_from_secs_f64(median.as_secs_f64() * (spread * spread / 2.0).exp())
                    .unwrap_or(Duration::MAX)
            }
        }
    }

    /// One think time drawn from `rng`.
    pub fn draw(&self, rng: &mut fastrand::Rng) -> Duration {
        match *self {
            ThinkTimes::Fixed(d) => d,
            ThinkTimes::Uniform(low, high) => {
                let span = (high - low).as_nanos().min(u128::from(u64::MAX)) as u64;
                low + Duration::from_nanos(rng.u64(..=span))
            }
            ThinkTimes::Exponential(mean) => {
                // 1 − u is in (0, 1]: the logarithm is finite.
                let x = -(1.0 - rng.f64()).ln() * mean.as_secs_f64();
                Duration::try_from_secs_f64(x).unwrap_or(Duration::MAX)
            }
            ThinkTimes::Lognormal { median, spread } => {
                let x = median.as_secs_f64() * (spread * standard_normal(rng)).exp();
                Duration::try_from_secs_f64(x).unwrap_or(Duration::MAX)
            }
        }
    }
}

/// One draw of the standard normal distribution (Box–Muller). Written here because
/// `fastrand`, whose seeded streams every plan is drawn from, has no distributions, and
/// `rand_distr` needs `rand`'s generator traits.
pub fn standard_normal(rng: &mut fastrand::Rng) -> f64 {
    // 1 − u is in (0, 1]: the logarithm is finite.
    let (u, v) = (1.0 - rng.f64(), rng.f64());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Reads the distribution at `key` from `v`.
pub fn durations(src: &Source<'_>, v: &Spanned<toml::Value>, key: &str) -> Result<ThinkTimes> {
    let bad = |msg: String| src.at(v, key, msg);
    let dur = |v: &toml::Value| -> Result<Duration> {
        let text = v.as_str().ok_or_else(|| bad(format!("must be {FORMS}")))?;
        let d = humantime::parse_duration(text.trim()).map_err(|_| {
            bad(format!(
                "not a duration: `{text}` (use e.g. `200ms`, `20s`, `1m30s`)"
            ))
        })?;
        positive(Dur(d)).map_err(bad)
    };
    let table = match v.get_ref() {
        toml::Value::String(_) => return Ok(ThinkTimes::Fixed(dur(v.get_ref())?)),
        toml::Value::Table(table) => table,
        _ => return Err(bad(format!("must be {FORMS}"))),
    };
    let get = |k: &str| table.get(k);
    match (get("exponential"), get("uniform"), get("lognormal")) {
        (Some(mean), None, None) if table.len() == 1 => Ok(ThinkTimes::Exponential(dur(mean)?)),
        (None, Some(toml::Value::Array(b)), None) if table.len() == 1 && b.len() == 2 => {
            let (low, high) = (dur(&b[0])?, dur(&b[1])?);
            if high <= low {
                return Err(bad(format!(
                    "uniform bounds must rise: {} is not above {}",
                    show(high),
                    show(low)
                )));
            }
            Ok(ThinkTimes::Uniform(low, high))
        }
        (None, None, Some(median)) if table.keys().all(|k| k == "lognormal" || k == "spread") => {
            let median = dur(median)?;
            let spread = spread(table, &bad)?;
            Ok(ThinkTimes::Lognormal { median, spread })
        }
        _ => Err(bad(format!("must be {FORMS}"))),
    }
}

/// A lognormal's `spread` in `table` (1.0 when absent): the σ of the logarithm, in
/// 0..=[`MAX_SPREAD`]. `bad` makes the error at the distribution's key.
pub fn spread(table: &toml::Table, bad: &impl Fn(String) -> crate::Error) -> Result<f64> {
    match table.get("spread") {
        None => Ok(1.0),
        Some(s) => s
            .as_float()
            .or_else(|| s.as_integer().map(|i| i as f64))
            .filter(|s| (0.0..=MAX_SPREAD).contains(s))
            .ok_or_else(|| {
                bad(format!(
                    "`spread` is the σ of the logarithm, a number in 0..={MAX_SPREAD} \
                     (1.0 when absent)"
                ))
            }),
    }
}
