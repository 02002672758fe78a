//! Which rows of the metrics' split ([`crate::metrics::split`]) a delivery counts in:
//! the size band of its group and the session phase it was due in, both read from the plan
//! once, before the run.
//!
//! - **Bands** (group messages only, when the run's groups are not all one size): `hot` is
//!   the run's largest group (the first of the largest, in plan order) — the one whose
//!   fan-out a server feels first; the others are `small` (at most
//!   [`SMALL_GROUP`] members) or `large`.
//! - **Phases** (with `[population.sessions]` only): a second of the day is in the login
//!   wave when the logins the plan puts in it are more than [`WAVE`] × the median logins
//!   per second of the day; a message counts in the phase of the second it was due in.

use std::sync::Arc;
use std::time::Duration;

use super::schedule::GroupInfo;
use crate::metrics::split::{Part, SMALL_GROUP};
use crate::metrics::Metrics;
use crate::scenario::{Plan, StreamId, TrafficShape};

/// A second is in the login wave when its planned logins exceed this many times the
/// median second's.
pub const WAVE: u64 = 2;

/// The bands of the run's groups and the seconds of the login wave.
#[derive(Debug, Default)]
pub struct Bands {
    /// The band of each group of the run, by [`GroupInfo::index`] (empty when every group
    /// has one size).
    groups: Vec<Part>,
    /// Whether each second from the traffic start is in the login wave (empty without
    /// sessions).
    wave: Vec<bool>,
    /// The band of each group stream (for the lost messages by band).
    streams: Vec<(StreamId, Part)>,
}

impl Bands {
    /// The bands of `plan`, whose groups the schedule listed as `groups`, the group of each
    /// group stream as `of_stream`.
    pub fn of(
        plan: &Plan,
        groups: &[Arc<GroupInfo>],
        of_stream: &foldhash::HashMap<StreamId, Arc<GroupInfo>>,
    ) -> Bands {
        let mut sizes = foldhash::HashMap::default();
        for t in &plan.traffic {
            let specs = match &t.kind {
                TrafficShape::Group(g) => &g.groups,
                TrafficShape::Chat(c) => &c.groups,
                TrafficShape::Trace(t) => &t.groups,
                _ => continue,
            };
            for g in specs {
                sizes.insert(g.name.as_str(), g.members.len());
            }
        }
        let size = |g: &GroupInfo| sizes.get(g.name.as_str()).copied().unwrap_or(0);
        let largest = groups.iter().map(|g| size(g)).max().unwrap_or(0);
        let smallest = groups.iter().map(|g| size(g)).min().unwrap_or(0);
        let hot = groups.iter().position(|g| size(g) == largest);
        let groups = if largest == smallest {
            Vec::new()
        } else {
            groups
                .iter()
                .enumerate()
                .map(|(i, g)| match size(g) {
                    _ if Some(i) == hot => Part::Hot,
                    n if n <= SMALL_GROUP => Part::Small,
                    _ => Part::Large,
                })
                .collect()
        };
        let wave = plan
            .population
            .sessions
            .as_ref()
            .map_or_else(Vec::new, |s| login_wave(s.day, s.logins()));
        let streams = of_stream
            .iter()
            .filter_map(|(&s, g)| Some((s, *groups.get(g.index)?)))
            .collect();
        Bands {
            groups,
            wave,
            streams,
        }
    }

    /// The band of each group stream.
    pub fn streams(&self) -> &[(StreamId, Part)] {
        &self.streams
    }

    /// Counts a first intact copy of a message of `group` (if a group message) due
    /// `due_us` after the traffic start; `push_us` is its end-to-end latency when it came
    /// live.
    pub fn record(
        &self,
        m: &mut Metrics,
        group: Option<&GroupInfo>,
        due_us: u64,
        push_us: Option<u64>,
    ) {
        if let Some(&band) = group.and_then(|g| self.groups.get(g.index)) {
            m.split_mut().record(band, push_us);
        }
        if !self.wave.is_empty() {
            let sec = (due_us / 1_000_000) as usize;
            let wave = self.wave.get(sec).copied().unwrap_or(false);
            let phase = if wave { Part::LoginWave } else { Part::Steady };
            m.split_mut().record(phase, push_us);
        }
    }
}

/// Whether each second of a day of `day` is in the login wave: its planned logins (at
/// `logins`, ms from the traffic start) above [`WAVE`] × the median second's.
pub fn login_wave(day: Duration, logins: impl Iterator<Item = u32>) -> Vec<bool> {
    let mut per_sec = vec![0u64; day.as_secs().max(1) as usize];
    for at in logins {
        if let Some(n) = per_sec.get_mut(at as usize / 1000) {
            *n += 1;
        }
    }
    let mut sorted = per_sec.clone();
    sorted.sort_unstable();
    let median = sorted[sorted.len() / 2];
    per_sec.iter().map(|&n| n > WAVE * median).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_login_wave_is_the_seconds_with_more_than_twice_the_median_logins() {
        // Logins per second: 1, 1, 9, 1, 3 — the median is 1.
        let mut at = vec![0, 1000, 3000, 4000, 4100, 4200];
        at.extend((0..9).map(|k| 2000 + k * 100));
        let wave = login_wave(Duration::from_secs(5), at.into_iter());
        assert_eq!(wave, vec![false, false, true, false, true]);
    }
}
