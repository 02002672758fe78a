//! Regression gates: `--fail-on 'METRIC OP VALUE'`, which fails a comparison when the
//! condition holds.
//!
//! - `e2e_p99>+10%`: the new run's value is more than 10% above the base's;
//! - `e2e_p99>+2ms`: more than 2 ms above the base's (a signed value is a change);
//! - `lost>0`, `e2e_p99>250ms`, `send_failure>1%`: the new run's own value (no sign);
//! - `sent_per_s<-5%`: throughput fell by more than 5%.
//!
//! OP is `>`, `>=`, `<` or `<=`. Latencies take `us`, `ms` or `s` (plain numbers are µs);
//! ratios take `%`.

use super::Comparison;

/// How a gate compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `>`
    Above,
    /// `>=`
    AtLeast,
    /// `<`
    Below,
    /// `<=`
    AtMost,
}

impl Op {
    fn holds(self, x: f64, bound: f64) -> bool {
        match self {
            Op::Above => x > bound,
            Op::AtLeast => x >= bound,
            Op::Below => x < bound,
            Op::AtMost => x <= bound,
        }
    }
}

/// What a gate's value is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// The new run's own value.
    Value(f64),
    /// new − base.
    Delta(f64),
    /// (new − base) ÷ base.
    Relative(f64),
}

/// One parsed `--fail-on`.
#[derive(Debug, Clone, PartialEq)]
pub struct Gate {
    /// As given.
    pub text: String,
    /// Metric key (a row of the comparison).
    pub key: String,
    /// The comparison.
    pub op: Op,
    /// The bound.
    pub bound: Bound,
}

/// The outcome of one gate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// The gate as given.
    pub gate: String,
    /// True when its condition held: the comparison fails.
    pub failed: bool,
    /// What was measured, in words.
    pub measured: String,
}

impl Gate {
    /// Parses `METRIC OP VALUE`; the error says what is wrong.
    pub fn parse(text: &str) -> Result<Gate, String> {
        let at = text.find(['<', '>']).ok_or_else(|| {
            format!(
                "--fail-on `{text}`: expected METRIC>VALUE or METRIC<VALUE, e.g. 'e2e_p99>+10%'"
            )
        })?;
        let (key, rest) = text.split_at(at);
        let (op, value) = if let Some(v) = rest.strip_prefix(">=") {
            (Op::AtLeast, v)
        } else if let Some(v) = rest.strip_prefix("<=") {
            (Op::AtMost, v)
        } else if let Some(v) = rest.strip_prefix('>') {
            (Op::Above, v)
        } else {
            (Op::Below, &rest[1..])
        };
        let key = key.trim();
        let value = value.trim();
        if key.is_empty() {
            return Err(format!("--fail-on `{text}`: no metric before the operator"));
        }
        let bound = parse_bound(value, is_latency_key(key))
            .map_err(|why| format!("--fail-on `{text}`: {why}"))?;
        Ok(Gate {
            text: text.to_owned(),
            key: key.to_owned(),
            op,
            bound,
        })
    }

    /// Evaluates the gate; an error when the comparison has no such metric.
    pub fn check(&self, c: &Comparison) -> Result<Outcome, String> {
        let row = c.row(&self.key).ok_or_else(|| {
            let keys: Vec<&str> = c.rows.iter().map(|r| r.key.as_str()).collect();
            format!(
                "--fail-on `{}`: no metric `{}` in these runs; they have: {}",
                self.text,
                self.key,
                keys.join(", ")
            )
        })?;
        let (x, bound, what) = match self.bound {
            Bound::Value(v) => (row.new, v, "new value"),
            Bound::Delta(v) => (row.delta(), v, "change"),
            Bound::Relative(v) => (row.relative(), v, "relative change"),
        };
        let Some(x) = x else {
            return Ok(Outcome {
                gate: self.text.clone(),
                failed: true,
                measured: format!("{} is not measured in both runs", self.key),
            });
        };
        let failed = self.op.holds(x, bound);
        Ok(Outcome {
            gate: self.text.clone(),
            failed,
            measured: format!(
                "{what} {} ({} → {})",
                match self.bound {
                    Bound::Relative(_) => super::render::relative(x),
                    Bound::Delta(_) => super::render::signed(row, x),
                    Bound::Value(_) => super::render::value(row, Some(x)),
                },
                super::render::value(row, row.base),
                super::render::value(row, row.new)
            ),
        })
    }
}

/// Whether a key names a latency (values in µs, units accepted).
fn is_latency_key(key: &str) -> bool {
    ["_p50", "_p95", "_p99", "_p999", "_max", "_mean"]
        .iter()
        .any(|s| key.ends_with(s))
}

/// `+10%`, `-5%`, `+2ms`, `0`, `250ms`, `1%`.
fn parse_bound(v: &str, latency: bool) -> Result<Bound, String> {
    let signed = v.starts_with(['+', '-']);
    let (num, unit) = split_unit(v);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("`{v}` is not a number with an optional unit"))?;
    if !n.is_finite() {
        return Err(format!("`{v}` is not a finite number"));
    }
    let scale = match unit {
        "" => 1.0,
        "%" => {
            return Ok(if signed {
                Bound::Relative(n / 100.0)
            } else {
                Bound::Value(n / 100.0)
            })
        }
        "us" | "µs" if latency => 1.0,
        "ms" if latency => 1000.0,
        "s" if latency => 1_000_000.0,
        other => {
            return Err(format!(
                "unit `{other}` is not one of {}",
                if latency {
                    "us, ms, s, %"
                } else {
                    "% (or none)"
                }
            ))
        }
    };
    Ok(if signed {
        Bound::Delta(n * scale)
    } else {
        Bound::Value(n * scale)
    })
}

/// The number and the unit after it.
fn split_unit(v: &str) -> (&str, &str) {
    let at = v
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E')))
        .unwrap_or(v.len());
    (&v[..at], v[at..].trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gates_parse() {
        let g = Gate::parse("e2e_p99>+10%").expect("parses");
        assert_eq!((g.key.as_str(), g.op), ("e2e_p99", Op::Above));
        assert_eq!(g.bound, Bound::Relative(0.1));
        assert_eq!(
            Gate::parse("lost>0").expect("parses").bound,
            Bound::Value(0.0)
        );
        assert_eq!(
            Gate::parse("e2e_p99 > 250ms").expect("parses").bound,
            Bound::Value(250_000.0)
        );
        assert_eq!(
            Gate::parse("ack_p50>=+2ms").expect("parses").bound,
            Bound::Delta(2000.0)
        );
        let g = Gate::parse("sent_per_s<-5%").expect("parses");
        assert_eq!((g.op, g.bound), (Op::Below, Bound::Relative(-0.05)));
        assert_eq!(
            Gate::parse("send_failure<=1%").expect("parses").bound,
            Bound::Value(0.01)
        );
        for bad in [
            "e2e_p99",
            ">5",
            "lost>x",
            "lost>5ms",
            "e2e_p99>5 parsecs",
            "lost>inf",
        ] {
            assert!(Gate::parse(bad).is_err(), "{bad} parsed");
        }
    }
}
