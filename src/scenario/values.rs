//! Values and their limits: the duration type of the schema, the parsers of counts, rates,
//! fractions and durations, and the table of limits every key is checked against.
//!
//! A leaf: it imports nothing else from `scenario/`. A parser takes the number as written
//! and returns it resolved or says what is wrong; the caller names the key and its line
//! (`Source::value`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// The longest value of any duration key, and the longest the login arrival, a request
/// sweep or a pattern's count of sends may take: 30 days. Every offset the engine adds to
/// the run's start stays far inside what `Instant` and `Duration` arithmetic can hold.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The slowest rate of any rate key (logins/s, msgs/s): one per 1,000 s.
pub const MIN_RATE: f64 = 1e-3;
/// The fastest rate of any rate key: 10⁹/s, beyond any generator.
pub const MAX_RATE: f64 = 1e9;
/// The shortest time between two sends of one sender.
pub const MIN_INTERVAL: Duration = Duration::from_micros(1);
/// The shortest heartbeat interval (`0s` turns heartbeats off).
pub const MIN_HEARTBEAT: Duration = Duration::from_millis(1);
/// The most users a scenario may have: 100 million, ~5,000 shard processes of 20k
/// connections each. The plan never lists all of them (see [`MAX_LISTED`]).
pub const MAX_USERS: u32 = 100_000_000;
/// The most user slots the plan may list in all (late and churning users, senders,
/// receivers, group members, chosen idle users, echo connections): 4 bytes each, so
/// the plan every shard process holds stays under 400 MB.
pub const MAX_LISTED: u64 = 100_000_000;
/// The most stream × recipient pairs (what the ledger tracks) of a plan.
pub const MAX_PAIRS: u64 = 1_000_000_000;
/// The most deliveries a plan may schedule: far more than any generator sends in 30 days,
/// and far inside the `u64` counters that add them up.
pub const MAX_DELIVERIES: u64 = 1_000_000_000_000_000;
/// The most examples kept per kind of delivery failure.
pub const MAX_EXAMPLES: usize = 1000;
/// Default body size, bytes.
pub const SIZE: usize = 100;
/// Largest body size, bytes.
pub const MAX_SIZE: usize = 64 << 20;

/// What a parser says about a bad value (the caller adds file, line and key).
pub type Verdict<T> = std::result::Result<T, String>;

/// A duration written as a string such as `"200ms"` or `"20s"`, parsed while
/// deserializing so a bad one is reported at its own span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Dur;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration string such as \"200ms\" or \"20s\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
                humantime::parse_duration(v.trim()).map(Dur).map_err(|_| {
                    E::custom(format!(
                        "not a duration: `{v}` (use e.g. `200ms`, `20s`, `1m30s`)"
                    ))
                })
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// A count in `1..=u32::MAX`.
pub fn count(n: i64) -> Verdict<u32> {
    if n <= 0 {
        return Err(format!("must be > 0, got {n}"));
    }
    u32::try_from(n).map_err(|_| format!("must be at most {}, got {n}", u32::MAX))
}

/// A rate in [`MIN_RATE`]`..=`[`MAX_RATE`] per second.
pub fn rate(x: f64) -> Verdict<f64> {
    if !(MIN_RATE..=MAX_RATE).contains(&x) {
        return Err(format!(
            "must be a rate in {MIN_RATE}..={MAX_RATE} per second, got {}",
            number(x)
        ));
    }
    Ok(x)
}

/// A fraction in `0..=1`.
pub fn unit(x: f64) -> Verdict<f64> {
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("must be a fraction in 0..=1, got {}", number(x)));
    }
    Ok(x)
}

/// A duration of at most [`MAX_DURATION`].
pub fn duration(d: Dur) -> Verdict<Duration> {
    if d.0 > MAX_DURATION {
        return Err(format!("must be at most 30 days, got {}", show(d.0)));
    }
    Ok(d.0)
}

/// The longest wake tick: a send waits up to a tick for its timer, as for tokio's own
/// 1 ms ticks, and 10 ms is already more than most latency objectives can spare.
pub const MAX_WAKE_TICK: Duration = Duration::from_millis(10);

/// A wake tick ([`crate::runtime`]): zero (none), or whole milliseconds up to
/// [`MAX_WAKE_TICK`], so that its boundaries fall on the timer's.
pub fn wake_tick(d: Dur) -> Verdict<Duration> {
    if d.0 > MAX_WAKE_TICK || d.0.subsec_nanos() % 1_000_000 != 0 {
        return Err(format!(
            "must be whole milliseconds from 0s (none) to 10ms, got {}",
            show(d.0)
        ));
    }
    Ok(d.0)
}

/// A duration > 0 and at most [`MAX_DURATION`].
pub fn positive(d: Dur) -> Verdict<Duration> {
    let d = duration(d)?;
    if d.is_zero() {
        return Err("must be longer than 0s".into());
    }
    Ok(d)
}

/// A duration in `min..=`[`MAX_DURATION`].
pub fn at_least(min: Duration) -> impl FnOnce(Dur) -> Verdict<Duration> {
    move |d| {
        let d = duration(d)?;
        if d < min {
            return Err(format!("must be at least {}, got {}", show(min), show(d)));
        }
        Ok(d)
    }
}

/// `target.heartbeat`: `0s` (none) or [`MIN_HEARTBEAT`]`..=`[`MAX_DURATION`].
pub fn heartbeat(d: Dur) -> Verdict<Option<Duration>> {
    if d.0.is_zero() {
        return Ok(None);
    }
    at_least(MIN_HEARTBEAT)(d).map(Some)
}

/// A number as people read it: `0.5`, `1e-300` (not three hundred zeros).
pub fn number(x: f64) -> String {
    if x != 0.0 && x.is_finite() && !(1e-4..1e15).contains(&x.abs()) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// A duration as people write it: `12.5s`, `200ms`, `2µs`.
pub fn show(d: Duration) -> String {
    if d < Duration::from_millis(1) && !d.is_zero() {
        format!("{}µs", (d.as_secs_f64() * 1e6 * 1000.0).round() / 1000.0)
    } else if d < Duration::from_secs(1) && !d.is_zero() {
        format!("{}ms", (d.as_secs_f64() * 1e3 * 1000.0).round() / 1000.0)
    } else {
        format!("{}s", (d.as_secs_f64() * 1000.0).round() / 1000.0)
    }
}
