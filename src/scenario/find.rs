//! The `[find]` table: the settings of `msgstorm find` written in the scenario instead of
//! on the command line (flags given there win). Checked here like every other table, so a
//! mistake names its `FILE:LINE: KEY`.

use toml::Spanned;

use super::plan::{FindOpts, FindValue};
use super::schema::FindSpec;
use super::source::Source;
use super::values::{duration, positive};
use crate::vocab::Precision;
use crate::Result;

/// The most steps one search may run.
pub const MAX_STEPS: u32 = 64;

/// Checks `[find]`.
pub fn find(src: &Source<'_>, spec: Option<&Spanned<FindSpec>>) -> Result<Option<FindOpts>> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let f = spec.get_ref();
    let vary = f.vary.get_ref().trim();
    if vary.is_empty() {
        return Err(src.at(
            &f.vary,
            "find.vary",
            "must name a scenario key, e.g. `traffic[0].rate`",
        ));
    }
    let from = f
        .from
        .as_ref()
        .map(|v| value(src, v, "find.from"))
        .transpose()?;
    let to =
        f.to.as_ref()
            .map(|v| value(src, v, "find.to"))
            .transpose()?;
    if let (Some(a), Some(b), Some(span)) = (from, to, f.to.as_ref()) {
        if b.value <= a.value {
            return Err(src.at(
                span,
                "find.to",
                format!("must be above find.from ({})", crate::vocab::num(a.value)),
            ));
        }
    }
    let precision = f
        .precision
        .as_ref()
        .map(|v| precision(src, v))
        .transpose()?;
    let max_steps = f
        .max_steps
        .as_ref()
        .map(|v| max_steps(src, v))
        .transpose()?;
    let storm = f.storm.as_ref().is_some_and(|s| *s.get_ref());
    if let (true, Some(s)) = (storm && vary != "population.users", &f.storm) {
        return Err(src.at(
            s,
            "find.storm",
            format!("a connection storm varies `population.users`, not `{vary}`"),
        ));
    }
    Ok(Some(FindOpts {
        vary: vary.to_owned(),
        from,
        to,
        precision,
        step_duration: f
            .step_duration
            .as_ref()
            .map(|d| src.value(d, "find.step_duration", positive))
            .transpose()?,
        warmup: f
            .warmup
            .as_ref()
            .map(|d| src.value(d, "find.warmup", duration))
            .transpose()?,
        max_steps,
        storm,
    }))
}

/// `find.precision`: a number or a percentage.
fn precision(src: &Source<'_>, v: &Spanned<toml::Value>) -> Result<Precision> {
    let text = match v.get_ref() {
        toml::Value::String(s) => s.clone(),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(x) => x.to_string(),
        other => {
            return Err(src.at(
                v,
                "find.precision",
                format!(
                    "must be a number or a percentage string such as \"5%\", got a {}",
                    other.type_str()
                ),
            ))
        }
    };
    Precision::parse(&text).map_err(|e| src.at(v, "find.precision", e))
}

/// `find.max_steps`.
fn max_steps(src: &Source<'_>, v: &Spanned<i64>) -> Result<u32> {
    match u32::try_from(*v.get_ref()) {
        Ok(n) if (1..=MAX_STEPS).contains(&n) => Ok(n),
        _ => Err(src.at(
            v,
            "find.max_steps",
            format!("must be in 1..={MAX_STEPS}, got {}", v.get_ref()),
        )),
    }
}

/// A positive, finite number and whether it is written whole.
fn value(src: &Source<'_>, v: &Spanned<toml::Value>, key: &str) -> Result<FindValue> {
    let (x, whole) = match v.get_ref() {
        toml::Value::Integer(i) => (*i as f64, true),
        toml::Value::Float(x) => (*x, false),
        other => {
            return Err(src.at(
                v,
                key,
                format!("must be a number, got a {}", other.type_str()),
            ))
        }
    };
    if !(x > 0.0 && x.is_finite()) {
        return Err(src.at(v, key, format!("must be > 0, got {}", crate::vocab::num(x))));
    }
    Ok(FindValue { value: x, whole })
}
