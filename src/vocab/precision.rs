//! How precise a `find` search must be, and how a searched key's value is written.

use serde::{Deserialize, Serialize};

/// How close the highest pass and the first fail must come before the search stops.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    /// Within this much of each other, in the key's unit.
    Absolute(f64),
    /// Within this fraction of the highest pass (`0.05` for `5%`).
    Relative(f64),
}

impl Precision {
    /// Parses `25` (absolute) or `5%` (relative).
    pub fn parse(s: &str) -> std::result::Result<Precision, String> {
        let bad =
            || format!("`{s}`: write a positive number such as `25`, or a percentage such as `5%`");
        match s.strip_suffix('%') {
            Some(pct) => pct
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| *p > 0.0 && *p < 100.0)
                .map(|p| Precision::Relative(p / 100.0))
                .ok_or_else(bad),
            None => s
                .trim()
                .parse::<f64>()
                .ok()
                .filter(|p| *p > 0.0 && p.is_finite())
                .map(Precision::Absolute)
                .ok_or_else(bad),
        }
    }

    /// The gap that is close enough above a highest pass of `pass`.
    pub fn gap(self, pass: f64) -> f64 {
        match self {
            Precision::Absolute(a) => a,
            Precision::Relative(r) => r * pass,
        }
    }
}

/// `v` as a key's value is written: whole numbers without a fraction.
pub fn num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
