//! Body sizes as a scenario writes them in a pattern's `size`: bytes (`200`), a lognormal
//! with a cap (`{ lognormal = 200, spread = 1.0, max = 4096 }`, the median and σ of the
//! logarithm) or a mix (`{ mix = [[100, 0.8], [1000, 0.15], [10000, 0.05]] }`, bytes and
//! weight). Every kind that sends bodies reads its `size` here.
//!
//! A size is drawn per (stream, seq) from the plan's seed alone ([`BodySize::at`]): every
//! shard and every re-run give one message the same body, and no random state is shared
//! between the users sending. A drawn size is never below [`MAX_HEADER_LEN`] (the body
//! still carries the whole envelope the ledger verifies) nor above the distribution's
//! largest size, which the driver is configured for ([`BodySize::max`]).

use std::sync::Arc;

use toml::Spanned;

use super::dist::{spread, standard_normal};
use super::draw::mix;
use super::source::Source;
use super::values::{MAX_SIZE, SIZE};
use crate::envelope::MAX_HEADER_LEN;
use crate::vocab::offered::BodyBytes;
use crate::vocab::StreamId;
use crate::Result;

/// How a size is written, for error messages.
pub const FORMS: &str = "bytes (200), { lognormal = 200, spread = 1.0, max = 4096 } (the \
     median, the σ of its logarithm and the cap) or { mix = [[100, 0.8], [1000, 0.2]] } \
     ([bytes, weight] pairs)";

/// The seed tag of body sizes (mixed with the plan's seed).
const TAG: u64 = 0x5_12E5;

/// How many draws stand for a distribution in [`summary`].
const SAMPLE: u64 = 20_000;

/// The sizes a pattern's bodies are drawn from.
#[derive(Debug, Clone, PartialEq)]
pub enum Sizes {
    /// Always this many bytes (a body shorter than its envelope header is the header).
    Fixed(usize),
    /// Lognormal: half the bodies are below `median` bytes; none above `max`.
    Lognormal {
        /// The median, bytes.
        median: usize,
        /// σ of the natural logarithm.
        spread: f64,
        /// The cap, bytes.
        max: usize,
    },
    /// One of a few sizes, each with its probability: `(bytes, cumulative probability)`,
    /// ascending, the last at 1.
    Mix(Arc<[(usize, f64)]>),
}

impl Sizes {
    /// The largest body drawn, bytes.
    pub fn max(&self) -> usize {
        match self {
            Sizes::Fixed(n) => *n,
            Sizes::Lognormal { max, .. } => *max,
            Sizes::Mix(m) => m.iter().map(|&(b, _)| b).max().unwrap_or(0),
        }
    }

    /// The distribution seeded by the plan's `seed`.
    pub fn seeded(self, seed: u64) -> BodySize {
        BodySize {
            sizes: Arc::new(self),
            seed: mix(seed, TAG),
        }
    }
}

/// A pattern's body sizes with the seed they are drawn from; shared by its senders'
/// programs (a clone is a reference count).
#[derive(Debug, Clone, PartialEq)]
pub struct BodySize {
    /// The distribution.
    pub sizes: Arc<Sizes>,
    /// Mixed with (stream, seq) for each draw.
    pub seed: u64,
}

impl BodySize {
    /// Always `n` bytes.
    pub fn fixed(n: usize) -> BodySize {
        Sizes::Fixed(n).seeded(0)
    }

    /// The largest body drawn, bytes: what the driver must accept.
    pub fn max(&self) -> usize {
        self.sizes.max()
    }

    /// The body size of message `seq` of `stream`.
    pub fn at(&self, stream: StreamId, seq: u64) -> usize {
        let draw = || fastrand::Rng::with_seed(mix(mix(self.seed, u64::from(stream)), seq));
        match &*self.sizes {
            Sizes::Fixed(n) => *n,
            Sizes::Lognormal {
                median,
                spread,
                max,
            } => {
                let x = *median as f64 * (spread * standard_normal(&mut draw())).exp();
                (x.round() as usize).clamp(MAX_HEADER_LEN, (*max).max(MAX_HEADER_LEN))
            }
            Sizes::Mix(m) => {
                let u = draw().f64();
                let (b, _) = m
                    .iter()
                    .find(|&&(_, c)| u < c)
                    .or(m.last())
                    .copied()
                    .unwrap_or((0, 1.0));
                b.max(MAX_HEADER_LEN)
            }
        }
    }

    /// [`SAMPLE`] draws, ascending: the distribution as [`summary`] weighs it.
    fn sample(&self) -> Vec<usize> {
        let mut v: Vec<usize> = (0..SAMPLE).map(|k| self.at(k as StreamId, k)).collect();
        v.sort_unstable();
        v
    }
}

/// The sizes of `planned` messages of each pattern's sizes, and of `listed` messages with
/// sizes of their own (a trace's): mean, median and 99th percentile weighted by messages,
/// and the largest any may have. `None` when nothing is planned.
pub fn summary(planned: &[(BodySize, u64)], listed: &[usize]) -> Option<BodyBytes> {
    let mut weighted: Vec<(usize, f64)> = listed.iter().map(|&b| (b, 1.0)).collect();
    let mut max = listed.iter().copied().max().unwrap_or(0);
    for (size, n) in planned.iter().filter(|&&(_, n)| n > 0) {
        max = max.max(size.max());
        match &*size.sizes {
            Sizes::Fixed(b) => weighted.push((*b, *n as f64)),
            _ => {
                let each = *n as f64 / SAMPLE as f64;
                weighted.extend(size.sample().into_iter().map(|b| (b, each)));
            }
        }
    }
    weighted.sort_unstable_by_key(|&(b, _)| b);
    let total: f64 = weighted.iter().map(|&(_, w)| w).sum();
    if total <= 0.0 {
        return None;
    }
    let quantile = |p: f64| {
        let mut below = 0.0;
        let at = weighted.iter().find(|&&(_, w)| {
            below += w;
            below > p * total
        });
        at.or(weighted.last()).map_or(0, |&(b, _)| b as u64)
    };
    Some(BodyBytes {
        mean: weighted.iter().map(|&(b, w)| b as f64 * w).sum::<f64>() / total,
        p50: quantile(0.5),
        p99: quantile(0.99),
        max: max as u64,
    })
}

/// Reads the sizes at `key` from `v`, [`SIZE`] bytes when absent.
pub fn sizes(src: &Source<'_>, v: Option<&Spanned<toml::Value>>, key: &str) -> Result<Sizes> {
    let Some(v) = v else {
        return Ok(Sizes::Fixed(SIZE));
    };
    let bad = |msg: String| src.at(v, key, msg);
    let bytes = |v: &toml::Value, what: &str| -> Result<usize> {
        let n = v.as_integer().ok_or_else(|| {
            bad(format!(
                "{what} must be a number of bytes; `size` is {FORMS}"
            ))
        })?;
        if n <= 0 {
            return Err(bad(format!("{what} must be > 0 bytes, got {n}")));
        }
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= MAX_SIZE)
            .ok_or_else(|| {
                bad(format!(
                    "{what} must be at most {MAX_SIZE} bytes (64 MiB), got {n}"
                ))
            })
    };
    let table = match v.get_ref() {
        toml::Value::Integer(_) => return Ok(Sizes::Fixed(bytes(v.get_ref(), "a size")?)),
        toml::Value::Table(table) => table,
        _ => return Err(bad(format!("must be {FORMS}"))),
    };
    if let Some(median) = table.get("lognormal") {
        if let Some(k) = table
            .keys()
            .find(|k| !["lognormal", "spread", "max"].contains(&k.as_str()))
        {
            return Err(bad(format!(
                "unknown key `{k}` in a lognormal size; it takes `lognormal`, `spread` and `max`"
            )));
        }
        let median = bytes(median, "the median")?;
        let spread = spread(table, &bad)?;
        let max = table.get("max").ok_or_else(|| {
            bad(
                "a lognormal size needs `max`, the largest body in bytes (the driver's limit)"
                    .into(),
            )
        })?;
        let max = bytes(max, "`max`")?;
        if max < median {
            return Err(bad(format!("`max` ({max}) is below the median ({median})")));
        }
        return Ok(Sizes::Lognormal {
            median,
            spread,
            max,
        });
    }
    match table.get("mix") {
        Some(toml::Value::Array(entries)) if table.len() == 1 && !entries.is_empty() => {
            mixed(entries, &bytes, &bad)
        }
        _ => Err(bad(format!("must be {FORMS}"))),
    }
}

/// The `[bytes, weight]` pairs of a mix, as cumulative probabilities.
fn mixed(
    entries: &[toml::Value],
    bytes: &impl Fn(&toml::Value, &str) -> Result<usize>,
    bad: &impl Fn(String) -> crate::Error,
) -> Result<Sizes> {
    let mut pairs = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let pair = e.as_array().filter(|p| p.len() == 2).ok_or_else(|| {
            bad(format!(
                "mix entry {i} must be [bytes, weight], e.g. [1000, 0.15]"
            ))
        })?;
        let b = bytes(&pair[0], &format!("mix entry {i}'s size"))?;
        let w = pair[1]
            .as_float()
            .or_else(|| pair[1].as_integer().map(|n| n as f64))
            .filter(|w| w.is_finite() && *w > 0.0)
            .ok_or_else(|| bad(format!("mix entry {i}'s weight must be a number > 0")))?;
        pairs.push((b, w));
    }
    let total: f64 = pairs.iter().map(|&(_, w)| w).sum();
    let mut sum = 0.0;
    let mut cumulative: Vec<(usize, f64)> = pairs
        .into_iter()
        .map(|(b, w)| {
            sum += w;
            (b, sum / total)
        })
        .collect();
    if let Some(last) = cumulative.last_mut() {
        last.1 = 1.0;
    }
    Ok(Sizes::Mix(cumulative.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Sizes> {
        let doc = format!("size = {text}\n");
        let src = Source {
            file: std::path::Path::new("s.toml"),
            text: &doc,
            overrides: &[],
        };
        let v: std::collections::BTreeMap<String, Spanned<toml::Value>> =
            toml::from_str(&doc).unwrap();
        sizes(&src, v.get("size"), "traffic[0].size")
    }

    #[test]
    fn lognormal_sizes_have_the_asked_median_and_never_pass_the_cap() {
        let s = parsed("{ lognormal = 200, spread = 1.0, max = 4096 }").unwrap();
        let b = s.seeded(7);
        let mut v: Vec<usize> = (0..20_000).map(|k| b.at((k % 50) as StreamId, k)).collect();
        v.sort_unstable();
        let median = v[v.len() / 2] as f64;
        assert!((median / 200.0 - 1.0).abs() < 0.05, "median {median}");
        assert_eq!(*v.last().unwrap(), 4096, "e^(3σ) draws reach the cap");
        assert!(v[0] >= MAX_HEADER_LEN);
    }

    #[test]
    fn a_mix_draws_each_size_at_its_weight() {
        let b = parsed("{ mix = [[100, 0.8], [1000, 0.15], [10000, 0.05]] }")
            .unwrap()
            .seeded(3);
        let n = 40_000;
        let count = |size| {
            (0..n)
                .filter(|&k| b.at((k / 7) as StreamId, k) == size)
                .count() as f64
                / n as f64
        };
        assert!((count(100) - 0.8).abs() < 0.01);
        assert!((count(1000) - 0.15).abs() < 0.01);
        assert!((count(10000) - 0.05).abs() < 0.01);
        assert_eq!(b.max(), 10000);
        let s = summary(&[(b.clone(), 1000)], &[]).unwrap();
        assert_eq!((s.p50, s.p99, s.max), (100, 10000, 10000));
        assert!(
            (s.mean / (80.0 + 150.0 + 500.0) - 1.0).abs() < 0.05,
            "mean {}",
            s.mean
        );
    }

    #[test]
    fn a_size_is_the_same_for_one_message_whoever_draws_it() {
        let b = parsed("{ lognormal = 500, spread = 2.0, max = 65536 }")
            .unwrap()
            .seeded(11);
        let first: Vec<usize> = (0..100).map(|k| b.at(3, k)).collect();
        let again: Vec<usize> = (0..100).rev().map(|k| b.at(3, k)).rev().collect();
        assert_eq!(first, again);
        let other = parsed("{ lognormal = 500, spread = 2.0, max = 65536 }")
            .unwrap()
            .seeded(12);
        assert_ne!(first, (0..100).map(|k| other.at(3, k)).collect::<Vec<_>>());
    }

    #[test]
    fn small_sizes_still_carry_the_envelope() {
        let b = parsed("{ mix = [[1, 1.0]] }").unwrap().seeded(1);
        assert_eq!(b.at(0, 0), MAX_HEADER_LEN);
        assert_eq!(parsed("7").unwrap(), Sizes::Fixed(7));
    }

    #[test]
    fn bad_sizes_name_the_key_and_what_is_wrong() {
        for (text, want) in [
            ("0", "must be > 0 bytes"),
            ("\"big\"", "must be bytes"),
            ("{ lognormal = 200 }", "needs `max`"),
            ("{ lognormal = 200, max = 100 }", "below the median"),
            ("{ lognormal = 200, max = 400, spread = 9 }", "`spread`"),
            (
                "{ lognormal = 200, max = 400, mean = 3 }",
                "unknown key `mean`",
            ),
            ("{ mix = [[100, 0.5], [200]] }", "mix entry 1 must be"),
            ("{ mix = [[100, -1]] }", "weight must be a number > 0"),
            ("{ mix = [] }", "must be bytes"),
            ("{ mix = [[100000000, 1]] }", "at most 67108864"),
        ] {
            let e = parsed(text).unwrap_err().to_string();
            assert!(
                e.contains("s.toml:1: traffic[0].size:") && e.contains(want),
                "{text}: {e}"
            );
        }
    }
}
