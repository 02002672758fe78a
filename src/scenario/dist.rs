//! Durations drawn from a distribution, as a scenario writes them: `"2s"` (fixed),
//! `{ uniform = ["1s", "3s"] }`, `{ exponential = "2s" }` (the mean) or
//! `{ lognormal = "2m", spread = 1.2 }` (the median and σ of the logarithm). Used by
//! `flow`'s think times and by the population's session lengths and offline gaps.

use std::time::Duration;

use toml::Spanned;

use super::plan::ThinkTimes;
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
            let spread = match get("spread") {
                None => 1.0,
                Some(s) => s
                    .as_float()
                    .or_else(|| s.as_integer().map(|i| i as f64))
                    .filter(|s| (0.0..=MAX_SPREAD).contains(s))
                    .ok_or_else(|| {
                        bad(format!(
                            "`spread` is the σ of the logarithm, a number in 0..={MAX_SPREAD} \
                             (1.0 when absent)"
                        ))
                    })?,
            };
            Ok(ThinkTimes::Lognormal { median, spread })
        }
        _ => Err(bad(format!("must be {FORMS}"))),
    }
}
