//! The generator's wall clock: the system clock, skewed on request for tests
//! (`MSGSTORM_CLOCK_SKEW_MS`), and corrected by the offset to the run's reference clock
//! that [`crate::launch::coord`] measures, so that send and receive times of every shard of
//! a run are on one clock and cross-host end-to-end latency is honest.

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Environment variable that skews this process's wall clock by this many milliseconds
/// (may be negative): a test and diagnostic option that plays a host whose clock is off.
pub const SKEW_ENV: &str = "MSGSTORM_CLOCK_SKEW_MS";

/// The skew of this process's wall clock, µs (0 unless [`SKEW_ENV`] is set; an unparsable
/// value is ignored, being a diagnostic option only).
fn skew_us() -> i64 {
    static SKEW: OnceLock<i64> = OnceLock::new();
    *SKEW.get_or_init(|| {
        std::env::var(SKEW_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<i64>().ok())
            .map_or(0, |ms| ms.saturating_mul(1000))
    })
}

/// This host's wall clock (with the test skew), µs since the Unix epoch.
pub fn local_us() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64);
    now.saturating_add(skew_us())
}

/// The run's clock: this host's wall clock minus its measured offset to the reference.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    /// How far this host's clock is ahead of the reference, µs (0: it is the reference,
    /// or no offset was measured).
    pub offset_us: i64,
}

impl Clock {
    /// Now on the run's clock, µs since the Unix epoch.
    pub fn now_us(&self) -> u64 {
        local_us().saturating_sub(self.offset_us).max(0) as u64
    }

    /// Now on the run's clock.
    pub fn now(&self) -> SystemTime {
        UNIX_EPOCH + Duration::from_micros(self.now_us())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offset_is_taken_off_the_local_clock() {
        let ahead = Clock {
            offset_us: 5_000_000,
        };
        let plain = Clock::default();
        let diff = plain.now_us() as i64 - ahead.now_us() as i64;
        assert!((4_000_000..=6_000_000).contains(&diff), "{diff}");
    }
}
